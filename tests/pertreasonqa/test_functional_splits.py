"""Appendix B.1: functional gene clusters and the ID/OOD splits built on them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pertreasonqa_lib import genetic_items
from pertreasonqa_lib.functional_splits import (
    KMEANS_SCALE,
    assign_splits,
    fixed_point_unit,
    fold_of_items,
    functional_clusters,
    functional_vectors,
    nearest_centre,
    refill_empty_clusters,
    spherical_kmeans,
)


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


def blobs(seed: int = 0, n_per: int = 40, k: int = 6, d: int = 50) -> np.ndarray:
    """Non-negative vectors around ``k`` random directions (like GO-PPR vectors), float32."""
    rng = np.random.default_rng(seed)
    centres = rng.gamma(0.3, 1.0, (k, d))
    x = np.repeat(centres, n_per, axis=0) * rng.gamma(5.0, 0.2, (k * n_per, d))
    return x.astype(np.float32)


def test_spherical_kmeans_ignores_ulp_noise_and_summation_order():
    x = blobs()
    labels, centres = spherical_kmeans(x, 6, seed=3)
    # A few ULPs on every input (what another BLAS kernel or thread count does to upstream floats)
    nudged = np.nextafter(x, np.float32(np.inf))
    nudged = np.nextafter(nudged, np.float32(np.inf))
    assert np.array_equal(spherical_kmeans(nudged, 6, seed=3)[0], labels)
    # Permuted features change the order of every dot product's summation, not its exact value
    perm = np.random.default_rng(1).permutation(x.shape[1])
    assert np.array_equal(spherical_kmeans(x[:, perm], 6, seed=3)[0], labels)
    # Only direction counts: rescaled rows cluster the same
    scaled = x * np.random.default_rng(2).uniform(0.5, 4.0, (len(x), 1)).astype(np.float32)
    assert np.array_equal(spherical_kmeans(scaled, 6, seed=3)[0], labels)
    # The fit recovers the blobs and its centres place its own rows where it put them
    assert pd.crosstab(labels, np.repeat(np.arange(6), 40)).gt(0).sum(axis=1).eq(1).all()
    assert np.array_equal(nearest_centre(x, centres), labels)


def test_spherical_kmeans_dot_products_are_exact_integers():
    x = fixed_point_unit(blobs(d=2000))
    assert np.array_equal(x, np.rint(x)) and np.abs(x).max() <= KMEANS_SCALE
    lengths = np.sqrt((x * x).sum(axis=1))
    assert np.allclose(lengths, KMEANS_SCALE, rtol=1e-4)
    # Float64 BLAS products equal exact integer (numpy int64, no BLAS) products
    xi = x.astype(np.int64)
    assert np.array_equal((x[:50] @ x[50:80].T).astype(np.int64), xi[:50] @ xi[50:80].T)


def test_spherical_kmeans_ties_go_to_the_lowest_index():
    # [1, 1] is exactly as close to both axes: the first centre wins, whichever it is
    centres = fixed_point_unit(np.array([[1.0, 0.0], [0.0, 1.0]]))
    assert nearest_centre(np.array([[1.0, 1.0], [2.0, 2.0]]), centres).tolist() == [0, 0]
    assert nearest_centre(np.array([[1.0, 1.0]]), centres[::-1]).tolist() == [0]
    x = np.array([[1, 0], [1, 0], [1, 0], [0, 1], [0, 1], [0, 1]], dtype=float)
    for seed in range(10):
        labels, _ = spherical_kmeans(x, 2, seed=seed)
        assert labels[0] != labels[3] and len(set(labels[:3])) == 1 and len(set(labels[3:])) == 1
    # Duplicated rows are never two seeds (k-means++ weight D^2 = 0) and too few distinct rows fail
    with pytest.raises(ValueError, match="distinct"):
        spherical_kmeans(np.ones((5, 3)), 2)
    with pytest.raises(ValueError, match="zero vectors"):
        spherical_kmeans(np.array([[1.0, 0.0], [0.0, 0.0]]), 1)
    with pytest.raises(ValueError, match="NaN"):
        fixed_point_unit(np.array([[np.nan, 1.0]]))


def test_spherical_kmeans_refills_an_empty_cluster():
    x = fixed_point_unit(np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.3, 1.0], [1.0, 1.0]]))
    centres = fixed_point_unit(np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]))
    labels = np.array([0, 0, 1, 1, 0])
    # Cluster 2 is empty: it takes the row least like its own centre (row 4, cos 0.71 to cluster 0)
    assert refill_empty_clusters(x, labels, centres).tolist() == [0, 0, 1, 1, 2]
    # A row alone in its cluster is never moved: two empty clusters take rows 4, then 3
    centres4 = np.vstack([centres, fixed_point_unit(np.array([[0.0, -1.0]]))])
    assert refill_empty_clusters(x, labels, centres4).tolist() == [0, 0, 1, 3, 2]
    with pytest.raises(ValueError, match="cannot fill"):
        refill_empty_clusters(x[:2], np.array([0, 1]), centres)
    # Every fitted cluster keeps at least one row
    rng = np.random.default_rng(0)
    for seed in range(10):
        labels, _ = spherical_kmeans(np.abs(rng.normal(size=(40, 3))) + 0.01, 12, seed=seed)
        assert np.bincount(labels, minlength=12).min() >= 1
