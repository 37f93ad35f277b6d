"""Appendix B.1 splits and the item loaders of PertReasonQA."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pertreasonqa_lib import items_and_splits as ps
from pertreasonqa_lib import reasoning_paths as rp
from project_paths import SHARED_DATA

needs_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data not found at {SHARED_DATA}")


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
    vec, terms = ps.functional_vectors(["A1", "B1", "LONE"], edges, go)
    v = pd.DataFrame(vec, index=["A1", "B1", "LONE"], columns=terms)
    # A1's walk reaches Ahub (term_a, term_ab) but never Bhub; LONE (no edge, no GO) is all zero
    assert v.loc["A1", "term_a"] > 0 and v.loc["A1", "term_b"] == 0
    assert v.loc["A1", "term_ab"] == pytest.approx(v.loc["A1", "term_a"])
    assert v.loc["B1", "term_b"] > 0 and v.loc["B1", "term_a"] == 0
    assert (v.loc["LONE"] == 0).all()
    # a gene without out-edges keeps its whole mass: its vector is its own annotation
    vec2, _ = ps.functional_vectors(["Z"], pd.concat([edges, pd.DataFrame({"source": ["A1"], "target": ["Z"]})]),
                                    {**go, "term_z": ["Z"]})
    assert vec2[0].tolist() == [0, 0, 0, 1]


def test_functional_clusters_follow_modules():
    edges, go = module_graph()
    genes = [f"{m}{i}" for m in "AB" for i in range(1, 5)] + ["LONE"]
    clusters = ps.functional_clusters(genes, edges, go, n_clusters=2, seed=0)
    assert clusters["LONE"] == 2  # the extra cluster of zero vectors
    assert clusters[["A1", "A2", "A3", "A4"]].nunique() == 1 and clusters[["B1", "B2", "B3", "B4"]].nunique() == 1
    assert clusters["A1"] != clusters["B1"]


def test_assign_splits_keeps_clusters_whole():
    clusters = pd.Series(np.repeat(np.arange(10), 10), index=[f"g{i}" for i in range(100)])
    splits = ps.assign_splits(clusters.index, clusters, ood_fraction=0.3, seed=1)
    per_cluster = splits.groupby("cluster")["distribution"].nunique()
    assert (per_cluster == 1).all()  # no cluster is cut between ID and OOD
    assert (splits["distribution"] == "OOD").sum() == 30  # 3 clusters of 10 reach the target exactly
    assert (splits.loc[splits["distribution"] == "OOD", "split"] == "test").all()
    counts = splits.loc[splits["distribution"] == "ID", "split"].value_counts()
    assert counts.to_dict() == {"train": 56, "valid": 7, "test": 7}  # 80/10/10 of 70
    again = ps.assign_splits(clusters.index, clusters, ood_fraction=0.3, seed=1)
    assert again.equals(splits)
    with pytest.raises(ValueError, match="no cluster"):
        ps.assign_splits(["unknown"], clusters)


def test_assign_splits_does_not_overshoot_with_a_big_cluster():
    sizes = [50, 5, 5, 5, 5, 5, 5, 5, 5, 10]
    clusters = pd.Series(np.repeat(np.arange(10), sizes), index=[f"g{i}" for i in range(sum(sizes))])
    for seed in range(5):
        n_ood = (ps.assign_splits(clusters.index, clusters, ood_fraction=0.25, seed=seed)["distribution"] == "OOD").sum()
        assert abs(n_ood - 25) <= 5


def test_fold_of_items():
    splits = pd.DataFrame({"distribution": ["ID", "ID", "ID", "OOD"], "split": ["train", "valid", "test", "test"]},
                          index=["tr", "va", "te", "ood"])
    items = pd.DataFrame({"cell": ["K562"] * 4 + ["RPE1"] * 4 + ["K562"], "perturbation": ["tr", "va", "te", "ood"] * 2 + ["new"]})
    assert ps.fold_of_items(items, splits).tolist() == [
        "train", "valid", "id_cell_id_pert", "id_cell_ood_pert", "unused", "unused", "ood_cell_id_pert", "ood_cell_ood_pert", "unused"]


@needs_data
def test_load_perturbqa_items_labels():
    items = ps.load_perturbqa_items("K562")
    # k562-de.csv: 137,699 label-0 rows; k562-dir.csv: 13,571 up and 6,409 down
    assert items["label"].value_counts().to_dict() == {"unchanged": 137699, "up": 13571, "down": 6409}
    assert set(items["perturbation_type"]) == {"CRISPRi"} and set(items["cell"]) == {"K562"}
    basal, profile, stats = ps.load_basal_expression()
    assert stats == {"n_hpa_genes": 19670, "n_mapped": 8163}
    assert list(basal.columns) == ["K562", "RPE1"] and len(profile) == 19670


@needs_data
def test_real_reference_paths_are_valid():
    """On real K562 items of a few perturbations: reference paths are candidate paths that pass the filters."""
    graph = rp.load_signed_graph()
    items = ps.load_perturbqa_items("K562")
    basal, profile, _ = ps.load_basal_expression()
    basal, profile = np.log1p(basal), np.log1p(profile)
    thresholds = rp.cell_thresholds(items, basal, profile)
    # tau_low sits where unchanged and changed items separate best; tau_high above it
    assert 0 < thresholds.loc["K562", "tau_low"] < thresholds.loc["K562", "tau_high"]
    out_deg = pd.Series(np.bincount(graph.src, minlength=graph.n_nodes), index=graph.nodes)
    perts = sorted(p for p in items["perturbation"].unique() if out_deg.get(p, 0) > 20)[:4]
    sub = items[items["perturbation"].isin(perts)]
    out = rp.reference_paths_for_items(sub, graph, basal, thresholds)
    assert (out["n_reference_paths"] > 0).any()
    edges = graph.to_frame().set_index(["source", "target"])
    for (_, row), (_, res) in zip(sub.iterrows(), out.iterrows()):
        cands = rp.paths_from_json(res["candidate_paths"])
        refs = rp.paths_from_json(res["reference_paths"])
        assert all(r in cands for r in refs)
        assert len(cands) <= 4
        for path in cands:
            assert 1 <= len(path) <= 4 and path[0][0] == row["perturbation"] and path[-1][2] == row["gene"]
            assert all(path[i][2] == path[i + 1][0] for i in range(len(path) - 1))
            assert all(edges.loc[(s, t), "sign"] == sign for s, sign, t in path)
        for path in refs:
            signs = [t[1] for t in path]
            assert rp.path_is_reference(signs, row["label"], "CRISPRi", int(res["gene_state"]))
