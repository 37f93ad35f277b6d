"""Appendix B.1: functional gene clusters and the ID/OOD splits built on them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pertreasonqa_lib import genetic_items
from pertreasonqa_lib.functional_splits import assign_splits, fold_of_items, functional_clusters, functional_vectors


def module_graph():
    """Two modules: A1-A4 around term 'a', B1-B4 around term 'b'; GO terms annotate the hubs only."""
    rows = []
    for m in "AB":
        genes = [f"{m}{i}" for i in range(1, 5)]
        rows += [(g, f"{m}hub") for g in genes] + [(f"{m}hub", g) for g in genes]
    edges = pd.DataFrame(rows, columns=["source", "target"])
    go = {"term_a": ["Ahub"], "term_b": ["Bhub"], "term_ab": ["Ahub", "Bhub"]}
    return edges, go


def test_functional_vectors_aggregate_ppr_on_terms():
    edges, go = module_graph()
    vec, terms = functional_vectors(["A1", "B1", "LONE"], edges, go)
    v = pd.DataFrame(vec, index=["A1", "B1", "LONE"], columns=terms)
    # A1's walk reaches Ahub (term_a, term_ab) but never Bhub; LONE (no edge, no GO) is all zero
    assert v.loc["A1", "term_a"] > 0 and v.loc["A1", "term_b"] == 0
    assert v.loc["A1", "term_ab"] == pytest.approx(v.loc["A1", "term_a"])
    assert v.loc["B1", "term_b"] > 0 and v.loc["B1", "term_a"] == 0
    assert (v.loc["LONE"] == 0).all()
    # a gene without out-edges keeps its whole mass: its vector is its own annotation
    vec2, _ = functional_vectors(["Z"], pd.concat([edges, pd.DataFrame({"source": ["A1"], "target": ["Z"]})]),
                                    {**go, "term_z": ["Z"]})
    assert vec2[0].tolist() == [0, 0, 0, 1]


def test_functional_clusters_follow_modules():
    edges, go = module_graph()
    genes = [f"{m}{i}" for m in "AB" for i in range(1, 5)] + ["LONE"]
    clusters = functional_clusters(genes, edges, go, n_clusters=2, seed=0)
    assert clusters["LONE"] == 2  # the extra cluster of zero vectors
    assert clusters[["A1", "A2", "A3", "A4"]].nunique() == 1 and clusters[["B1", "B2", "B3", "B4"]].nunique() == 1
    assert clusters["A1"] != clusters["B1"]


def test_assign_splits_keeps_clusters_whole():
    clusters = pd.Series(np.repeat(np.arange(10), 10), index=[f"g{i}" for i in range(100)])
    splits = assign_splits(clusters.index, clusters, ood_fraction=0.3, seed=1)
    per_cluster = splits.groupby("cluster")["distribution"].nunique()
    assert (per_cluster == 1).all()  # no cluster is cut between ID and OOD
    assert (splits["distribution"] == "OOD").sum() == 30  # 3 clusters of 10 reach the target exactly
    assert (splits.loc[splits["distribution"] == "OOD", "split"] == "test").all()
    counts = splits.loc[splits["distribution"] == "ID", "split"].value_counts()
    assert counts.to_dict() == {"train": 56, "valid": 7, "test": 7}  # 80/10/10 of 70
    again = assign_splits(clusters.index, clusters, ood_fraction=0.3, seed=1)
    assert again.equals(splits)
    with pytest.raises(ValueError, match="no cluster"):
        assign_splits(["unknown"], clusters)


def test_assign_splits_does_not_overshoot_with_a_big_cluster():
    sizes = [50, 5, 5, 5, 5, 5, 5, 5, 5, 10]
    clusters = pd.Series(np.repeat(np.arange(10), sizes), index=[f"g{i}" for i in range(sum(sizes))])
    for seed in range(5):
        n_ood = (assign_splits(clusters.index, clusters, ood_fraction=0.25, seed=seed)["distribution"] == "OOD").sum()
        assert abs(n_ood - 25) <= 5


def test_fold_of_items():
    splits = pd.DataFrame({"distribution": ["ID", "ID", "ID", "OOD"], "split": ["train", "valid", "test", "test"]},
                          index=["tr", "va", "te", "ood"])
    items = pd.DataFrame({"cell": ["K562"] * 4 + ["RPE1"] * 4 + ["K562"], "perturbation": ["tr", "va", "te", "ood"] * 2 + ["new"]})
    assert fold_of_items(items, splits, genetic_items.CELLS).tolist() == [
        "train", "valid", "id_cell_id_pert", "id_cell_ood_pert", "unused", "unused", "ood_cell_id_pert", "ood_cell_ood_pert", "unused"]
