"""Functional gene clusters and the ID/OOD splits built on them (PertReasonQA, Kim et al. 2026, appendix B.1).

- :func:`functional_clusters`: B.1's functional gene clusters: PPR over the gene network aggregated
  onto GO biological-process terms (:func:`functional_vectors`), cosine geometry, k-means with k = 30.
- :func:`assign_splits`: whole clusters to ID or OOD, ID perturbations to train/valid/test
  (:func:`split_id_perturbations`).
- :func:`fold_of_items`: the split of every item, with the four test folds (ID/OOD cell x ID/OOD
  perturbation).

Choices the paper leaves open
-----------------------------
- The network for B.1 is the task's signed graph (OmniPath + DoRothEA + TRRUST) unweighted and
  directed; each gene's PPR (alpha 0.85, 50 iterations) starts at the gene; dangling mass returns
  to it. A gene outside the network keeps all its mass (its vector is its own GO annotation).
  GO BP terms come from ``GO_Biological_Process_2021.gmt`` (the shared copy; the paper used MSigDB
  v2023.2). Genes whose vector is zero (no annotated gene in reach) form one extra cluster.
- "Cosine similarity" + k-means: vectors are L2-normalised before k-means (spherical k-means
  geometry: squared Euclidean distance on unit vectors is ``2 - 2 cos``), k-means++ with one
  initialisation (scikit-learn's default; the paper gives none).
- Clusters are scanned in a seeded random order and go to OOD whenever that brings the share of
  OOD perturbations closer to ``ood_fraction`` (default 0.26, the share of OOD genetic
  perturbations in Table 1: 518 / (1172+137+131+518)); ID perturbations are split 80/10/10 into train/valid/test (Table 1: 1172/137/131).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from pertreasonqa_lib.pagerank import personalized_pagerank
from pertreasonqa_lib.path_params import PathParams
from pertreasonqa_lib.signed_graph import SignedGraph

#: The four test folds: ID/OOD cell x ID/OOD perturbation.
FOLDS = ("id_cell_id_pert", "id_cell_ood_pert", "ood_cell_id_pert", "ood_cell_ood_pert")


def fold_label(fold: str) -> str:
    """Short reader-facing name of a test fold (``all`` or one of :data:`FOLDS`), e.g. ``OOD cell, ID pert``."""
    if fold == "all":
        return "all folds"
    if fold not in FOLDS:
        raise ValueError(f"unknown fold {fold!r}; expected 'all' or one of {', '.join(FOLDS)}")
    cell, pert = fold.split("_cell_")
    return f"{cell.upper()} cell, {pert.replace('_pert', '').upper()} pert"
#: k of the functional k-means (B.1).
N_CLUSTERS = 30
#: Share of OOD genetic perturbations in Table 1.
OOD_FRACTION = 518 / (1172 + 137 + 131 + 518)
#: Shares of the ID perturbations in train, valid and test (Table 1: 1172/137/131).
ID_SPLIT = {"train": 0.8, "valid": 0.1, "test": 0.1}


def gene_network_ppr(src: np.ndarray, dst: np.ndarray, n_nodes: int, start_nodes: np.ndarray, alpha: float = 0.85,
                     max_iter: int = 50, tol: float = 1e-4, batch: int = 512) -> sp.csr_matrix:
    """Unweighted directed PPR from each start node (one column per start), entries below 1e-6 dropped.

    The power iteration of :func:`pertreasonqa_lib.pagerank.personalized_pagerank` with unit edge
    weights (dangling nodes return their mass to the start node), in float32 since the vectors only
    feed a clustering, in batches of start nodes so that memory stays bounded.

    Returns
    -------
    scipy.sparse.csr_matrix
        ``n_nodes x len(start_nodes)``.
    """
    graph = SignedGraph(nodes=pd.RangeIndex(n_nodes), src=np.asarray(src), dst=np.asarray(dst),
                        sign=np.zeros(len(src), dtype=np.int8), databases=np.full(len(src), "", dtype=object))
    params = PathParams(alpha=alpha, ppr_max_iter=max_iter, ppr_tol=tol)
    weights = np.ones(len(src))
    blocks = []
    for lo in range(0, len(start_nodes), batch):
        starts = start_nodes[lo:lo + batch]
        x = personalized_pagerank(graph, weights, [[int(s)] for s in starts], params, dtype=np.float32)
        x[x < 1e-6] = 0.0
        blocks.append(sp.csr_matrix(x))
    return sp.hstack(blocks).tocsr() if blocks else sp.csr_matrix((n_nodes, 0), dtype=np.float32)


def functional_vectors(genes: Sequence[str], edges: pd.DataFrame, go_sets: Mapping[str, Sequence[str]]) -> tuple[np.ndarray, list[str]]:
    """Gene-to-GO vectors: each gene's network PPR summed over the members of every GO BP term.

    Parameters
    ----------
    genes
        Genes to describe.
    edges
        Directed gene edges (``source``, ``target``).
    go_sets
        GO BP term -> genes.

    Returns
    -------
    vectors, terms
        ``len(genes) x n_terms`` (dense) and the term names. A gene with no out-edge keeps all its
        PPR mass, so its vector is its own GO annotation (no iteration is run for it).
    """
    genes = list(dict.fromkeys(genes))
    nodes = pd.Index(sorted(set(edges["source"]) | set(edges["target"]) | set(genes)))
    src = nodes.get_indexer(edges["source"])
    dst = nodes.get_indexer(edges["target"])
    keep = src != dst
    pair = np.unique(np.stack([src[keep], dst[keep]], 1), axis=0)
    start = nodes.get_indexer(genes)
    has_out = np.isin(start, pair[:, 0])
    # Genes without an out-edge keep their whole mass: an indicator column, no iteration needed.
    rows_, cols_, vals_ = [start[~has_out]], [np.flatnonzero(~has_out)], [np.ones((~has_out).sum(), dtype=np.float32)]
    if has_out.any():
        walk = gene_network_ppr(pair[:, 0], pair[:, 1], len(nodes), start[has_out]).tocoo()
        rows_.append(walk.row)
        cols_.append(np.flatnonzero(has_out)[walk.col])
        vals_.append(walk.data.astype(np.float32))
    ppr = sp.csr_matrix((np.concatenate(vals_), (np.concatenate(rows_), np.concatenate(cols_))),
                        shape=(len(nodes), len(genes)))
    terms = list(go_sets)
    rows, cols = [], []
    for j, t in enumerate(terms):
        pos = nodes.get_indexer(list(dict.fromkeys(go_sets[t])))
        pos = pos[pos >= 0]
        rows.append(pos)
        cols.append(np.full(len(pos), j))
    member = sp.csr_matrix((np.ones(sum(len(r) for r in rows), dtype=np.float32), (np.concatenate(rows), np.concatenate(cols))),
                           shape=(len(nodes), len(terms)))
    vectors = np.asarray((ppr.T @ member).todense())
    return vectors, terms


def functional_clusters(genes: Sequence[str], edges: pd.DataFrame, go_sets: Mapping[str, Sequence[str]],
                        n_clusters: int = N_CLUSTERS, seed: int = 0, assign: Sequence[str] = ()) -> pd.Series:
    """k-means clusters of the genes' L2-normalised GO-PPR vectors (B.1).

    Parameters
    ----------
    genes
        Genes the k-means is fitted on.
    edges, go_sets
        See :func:`functional_vectors`.
    n_clusters, seed
        k and the seed of k-means.
    assign
        Further genes placed in the nearest cluster of the fitted k-means without changing it
        (e.g. the targets of chemical perturbations, aligned to the genetic split).

    Returns
    -------
    pandas.Series
        Gene -> cluster id ``0..n_clusters-1``; ``n_clusters`` for genes with a zero vector.
    """
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    genes = list(dict.fromkeys(genes))
    extra = [g for g in dict.fromkeys(assign) if g not in set(genes)]
    # A gene's vector does not depend on the other genes described: one pass serves both sets.
    vectors, _ = functional_vectors(genes + extra, edges, go_sets)
    norms = np.linalg.norm(vectors, axis=1)
    ok = norms > 0
    labels = np.full(len(genes) + len(extra), n_clusters, dtype=np.int64)
    fit = ok.copy()
    fit[len(genes):] = False
    if fit.sum() < n_clusters:
        raise ValueError(f"only {int(fit.sum())} genes have a functional vector; need at least {n_clusters}")
    unit = np.zeros_like(vectors, dtype=np.float32)
    unit[ok] = vectors[ok] / norms[ok, None]
    km = KMeans(n_clusters=n_clusters, n_init=1, random_state=seed)
    with threadpool_limits(limits=1):  # one thread: OpenMP k-means degrades badly on a shared, busy machine
        labels[fit] = km.fit_predict(unit[fit])
        placed = ok & ~fit
        if placed.any():
            labels[placed] = km.predict(unit[placed])
    return pd.Series(labels, index=pd.Index(genes + extra, name="gene"), name="cluster")


def assign_splits(perturbations: Sequence[str], clusters: pd.Series, *, ood_fraction: float = OOD_FRACTION,
                  id_split: Mapping[str, float] = ID_SPLIT, seed: int = 0) -> pd.DataFrame:
    """Whole clusters to ID/OOD, then ID perturbations to train/valid/test.

    Parameters
    ----------
    perturbations
        Perturbation genes (combinations ``A+B`` take the cluster of their first gene).
    clusters
        Gene -> cluster (:func:`functional_clusters`).
    ood_fraction
        Target share of OOD perturbations: clusters, in a seeded random order, go to OOD whenever
        that brings the share closer to it.
    id_split
        Shares of the ID perturbations in train/valid/test (a seeded random permutation).

    Returns
    -------
    pandas.DataFrame
        Indexed by perturbation: ``cluster``, ``distribution`` (ID/OOD), ``split`` (train/valid/test;
        OOD perturbations are test).
    """
    perts = pd.Index(list(dict.fromkeys(perturbations)))
    first = [p.split("+")[0] for p in perts]
    missing = sorted(set(first) - set(clusters.index))
    if missing:
        raise ValueError(f"{len(missing)} perturbations have no cluster (e.g. {missing[:3]})")
    cl = clusters.reindex(first).to_numpy()
    rng = np.random.default_rng(seed)
    sizes = pd.Series(cl).value_counts()
    order = rng.permutation(np.sort(sizes.index.to_numpy()))
    # Scan clusters in a seeded random order; take one whenever it brings the OOD count closer to
    # the target (so a large cluster drawn late does not overshoot it).
    target = ood_fraction * len(perts)
    ood_clusters, total = [], 0
    for c in order:
        if abs(total + int(sizes[c]) - target) < abs(total - target):
            ood_clusters.append(c)
            total += int(sizes[c])
    is_ood = np.isin(cl, ood_clusters)
    split = split_id_perturbations(is_ood, id_split, rng)
    return pd.DataFrame({"cluster": cl, "distribution": np.where(is_ood, "OOD", "ID"), "split": split}, index=perts)


def split_id_perturbations(is_ood: np.ndarray, id_split: Mapping[str, float], rng: np.random.Generator) -> np.ndarray:
    """``train``/``valid``/``test`` per perturbation: a seeded permutation of the ID ones cut by ``id_split``; OOD ones are test."""
    split = np.full(len(is_ood), "test", dtype=object)
    id_pos = np.flatnonzero(~np.asarray(is_ood, dtype=bool))
    shuffled = id_pos[rng.permutation(len(id_pos))]
    n_train = int(round(id_split["train"] * len(id_pos)))
    n_valid = int(round(id_split["valid"] * len(id_pos)))
    split[shuffled[:n_train]] = "train"
    split[shuffled[n_train:n_train + n_valid]] = "valid"
    return split


def fold_of_items(items: pd.DataFrame, splits: pd.DataFrame, cells: Mapping[str, Mapping]) -> pd.Series:
    """Split of every item: ``train``, ``valid``, one of :data:`FOLDS`, or ``unused``.

    Items of ID cells follow their perturbation's split (test items get ``id_cell_id_pert`` or
    ``id_cell_ood_pert``); items of OOD cells of test perturbations get the ``ood_cell_*`` folds
    and the others are unused.

    Parameters
    ----------
    items
        ``cell`` and ``perturbation`` per item.
    splits
        Per perturbation: ``distribution`` (ID/OOD) and ``split`` (train/valid/test).
    cells
        Cell -> ``{"distribution": "ID" | "OOD"}`` (e.g. :data:`pertreasonqa_lib.genetic_items.CELLS`:
        K562 ID, RPE1 OOD).
    """
    info = splits.reindex(items["perturbation"])
    dist = info["distribution"].to_numpy()
    split = info["split"].to_numpy()
    unknown = sorted(set(items["cell"]) - set(cells))
    if unknown:
        raise KeyError(f"cells {unknown} have no ID/OOD distribution")
    is_id_cell = items["cell"].map(lambda c: cells[c]["distribution"] == "ID").to_numpy()
    pert_part = np.where(dist == "OOD", "ood_pert", "id_pert")
    out = np.where(is_id_cell, np.where(split == "test", "id_cell_" + pert_part, split),
                   np.where(split == "test", "ood_cell_" + pert_part, "unused"))
    out = np.where(pd.isna(dist), "unused", out)
    return pd.Series(out, index=items.index, name="fold")
