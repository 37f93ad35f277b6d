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
- "Cosine similarity" + k-means: spherical k-means (:func:`spherical_kmeans`): each gene goes to
  the centroid of highest cosine, each centroid is the L2-normalised mean of its genes; seeded by
  k-means++ (Arthur & Vassilvitskii 2007: first centre uniform, then each with probability
  proportional to ``D^2 = 2 - 2 cos`` to the nearest centre), one initialisation (the paper gives
  none), Lloyd iterations until no gene moves (at most 300).
- **Machine independence**: every decision of the k-means is taken on exact integers, so the
  clusters do not depend on the BLAS kernel, the thread count or the summation order. Unit vectors
  are rounded to a fixed-point grid (:data:`KMEANS_SCALE` per unit length); a dot product of two
  such vectors is then a sum of integer products whose partial sums are bounded by the product of
  the norms (below ``2**42``), so float64 matrix products compute it exactly in any order. Cosines
  divide these exact products by correctly rounded norms. Ties go to the lowest index (the first
  centre, the first gene), and the k-means++ draw is an integer draw over the exact integer
  ``D^2``. A cluster left empty takes the gene of lowest cosine to its own centroid (the first
  such gene). The input norms are correctly rounded sums (``math.fsum``), not order-dependent ones.
- Clusters are scanned in a seeded random order and go to OOD whenever that brings the share of
  OOD perturbations closer to ``ood_fraction`` (default 0.26, the share of OOD genetic
  perturbations in Table 1: 518 / (1172+137+131+518)); ID perturbations are split 80/10/10 into train/valid/test (Table 1: 1172/137/131).
"""

from __future__ import annotations

import math
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
#: Fixed-point length of a unit vector in the k-means: integer dot products stay below 2**42,
#: exact in float64 (53-bit mantissa) whatever the order of the summation.
KMEANS_SCALE = 2 ** 20
#: Lloyd iterations at most.
KMEANS_MAX_ITER = 300


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
    # Every term's distinct genes, term after term, looked up in one pass.
    members = [list(dict.fromkeys(go_sets[t])) for t in terms]
    pos = nodes.get_indexer([g for m in members for g in m])
    term_of = np.repeat(np.arange(len(terms)), [len(m) for m in members])
    known = pos >= 0
    member = sp.csr_matrix((np.ones(int(known.sum()), dtype=np.float32), (pos[known], term_of[known])),
                           shape=(len(nodes), len(terms)))
    vectors = np.asarray((ppr.T @ member).todense())
    return vectors, terms


def fixed_point_unit(vectors: np.ndarray, scale: int = KMEANS_SCALE) -> np.ndarray:
    """Rows L2-normalised and rounded to integers of length ``scale`` (float64 holding integers).

    The norm of each row is a correctly rounded sum of its squares (``math.fsum``), so it does not
    depend on the order of a summation; zero rows stay zero.

    Parameters
    ----------
    vectors
        ``n x d`` real vectors.
    scale
        Length of a unit vector on the grid (:data:`KMEANS_SCALE`).
    """
    # Read in the input's own type (float32 functional vectors stay half the size): every value
    # converts to float64 exactly, so each step below computes on the float64 values.
    v = np.asarray(vectors)
    if v.ndim != 2:
        raise ValueError(f"vectors must be a matrix, got shape {v.shape}")
    # The non-zero entries of each row, row after row (row-major order); NaN and infinities are among them.
    nonzero = v != 0
    values = v[nonzero]
    if not np.isfinite(values).all():
        raise ValueError("vectors hold NaN or infinite values")
    # Their squares (of the float64 values) summed exactly per row.
    squares = np.square(values, dtype=np.float64).tolist()
    ends = np.cumsum(np.count_nonzero(nonzero, axis=1)).tolist()
    norms = np.array([math.sqrt(math.fsum(squares[lo:hi])) for lo, hi in zip([0, *ends[:-1]], ends)])
    safe = np.where(norms > 0, norms, 1.0)
    # One new float64 matrix: the division converts the input as it reads it.
    x = np.divide(v, safe[:, None], dtype=np.float64)
    x *= float(scale)
    return np.rint(x, out=x)


def _cosines(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """``x . c / |c|`` for fixed-point rows: exact integer products over correctly rounded norms."""
    dots = x @ centres.T  # exact: integer terms, every partial sum below 2**42 (see the module notes)
    norms = np.sqrt((centres * centres).sum(axis=1))  # exact integer sum of squares, then one rounding
    return dots / np.where(norms > 0, norms, 1.0)[None, :]


def _kmeans_pp(x: np.ndarray, sq_norms: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``k`` k-means++ seeds among the rows of ``x``, drawn on exact integer ``D^2``."""
    n = len(x)
    first = int(rng.integers(n))
    seeds = [first]
    # D^2 = |x|^2 + |c|^2 - 2 x.c on the grid: exact integers (int64) for every gene.
    d2 = (sq_norms + sq_norms[first] - 2 * (x @ x[first]).astype(np.int64)).clip(min=0)
    for _ in range(1, k):
        cum = np.cumsum(d2)
        if cum[-1] == 0:
            raise ValueError(f"k-means++: only {len(seeds)} distinct functional vectors for {k} clusters")
        r = int(rng.integers(int(cum[-1])))
        nxt = int(np.searchsorted(cum, r, side="right"))  # P(nxt) = D^2(nxt) / sum D^2
        seeds.append(nxt)
        d_new = (sq_norms + sq_norms[nxt] - 2 * (x @ x[nxt]).astype(np.int64)).clip(min=0)
        np.minimum(d2, d_new, out=d2)
    return np.asarray(seeds)


def refill_empty_clusters(x: np.ndarray, labels: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Labels where each empty cluster has taken the row farthest from its own centre.

    The row of lowest cosine to its current centre (the first on ties) among clusters that keep
    another row moves to the empty cluster, one empty cluster after the other in index order.

    Parameters
    ----------
    x
        Fixed-point rows (:func:`fixed_point_unit`).
    labels
        Current cluster of each row.
    centres
        ``k x d`` fixed-point centres the labels were assigned to.
    """
    labels = np.array(labels, copy=True)
    counts = np.bincount(labels, minlength=len(centres))
    empty = np.flatnonzero(counts == 0)
    if len(empty) == 0:
        return labels
    own = _cosines(x, centres)[np.arange(len(x)), labels]
    for c in empty:
        movable = np.where(counts[labels] >= 2, own, np.inf)
        g = int(np.argmin(movable))
        if not np.isfinite(movable[g]):
            raise ValueError(f"spherical k-means: {len(x)} rows cannot fill {len(centres)} clusters")
        counts[labels[g]] -= 1
        labels[g] = c
        counts[c] = 1
        own[g] = np.inf  # it now sits alone in its cluster
    return labels


def spherical_kmeans(vectors: np.ndarray, n_clusters: int, seed: int = 0, max_iter: int = KMEANS_MAX_ITER,
                     scale: int = KMEANS_SCALE) -> tuple[np.ndarray, np.ndarray]:
    """Spherical k-means with k-means++ seeding, every decision on exact integers (B.1).

    Parameters
    ----------
    vectors
        ``n x d`` non-zero vectors (any length: only their direction counts).
    n_clusters
        k.
    seed
        Seed of the k-means++ draws.
    max_iter
        Lloyd iterations at most (it stops earlier once no vector changes cluster).
    scale
        Fixed-point length of a unit vector (:data:`KMEANS_SCALE`).

    Returns
    -------
    labels, centres
        Cluster ``0..k-1`` of each row (the centre of highest cosine, the lowest index on ties) and
        the ``k x d`` fixed-point unit centres (for :func:`nearest_centre`).
    """
    x = fixed_point_unit(vectors, scale)
    n = len(x)
    if (x == 0).all(axis=1).any():
        raise ValueError("spherical k-means: zero vectors have no direction")
    if n < n_clusters:
        raise ValueError(f"spherical k-means: {n} vectors for {n_clusters} clusters")
    # Exact whatever the order: integers below 2**42. Summed row by row, with no n x d temporary.
    sq_norms = np.einsum("ij,ij->i", x, x).astype(np.int64)
    rng = np.random.default_rng(seed)
    centres = x[_kmeans_pp(x, sq_norms, n_clusters, rng)]
    cosines = _cosines(x, centres)
    labels = np.argmax(cosines, axis=1)
    # Each column of the cosines and each centre depends on its own cluster's members only, and every
    # sum is exact: a cluster whose members did not change keeps its centre and its column, and only
    # the others are computed again (the result is that of recomputing them all).
    fitted = None  # the labels the current centres are the means of (none yet: the seeds)
    for _ in range(max_iter):
        labels = refill_empty_clusters(x, labels, centres)
        if fitted is None:
            changed = np.arange(n_clusters)
        else:
            moved = labels != fitted
            changed = np.union1d(labels[moved], fitted[moved])
        if len(changed):
            rank = np.full(n_clusters, -1)
            rank[changed] = np.arange(len(changed))
            rows = np.flatnonzero(rank[labels] >= 0)
            member = sp.csr_matrix((np.ones(len(rows)), (rank[labels[rows]], rows)), shape=(len(changed), n))
            centres[changed] = fixed_point_unit(np.asarray(member @ x), scale)  # exact: integer sums below 2**53
            cosines[:, changed] = _cosines(x, centres[changed])
        fitted = labels
        new = np.argmax(cosines, axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
    return labels, centres


def nearest_centre(vectors: np.ndarray, centres: np.ndarray, scale: int = KMEANS_SCALE) -> np.ndarray:
    """Index of the centre of highest cosine for each row (lowest index on ties), exactly as the fit assigns."""
    return np.argmax(_cosines(fixed_point_unit(vectors, scale), centres), axis=1)


def functional_clusters(genes: Sequence[str], edges: pd.DataFrame, go_sets: Mapping[str, Sequence[str]],
                        n_clusters: int = N_CLUSTERS, seed: int = 0, assign: Sequence[str] = ()) -> pd.Series:
    """Spherical k-means clusters of the genes' GO-PPR vectors (B.1: cosine similarity, k = 30).

    Parameters
    ----------
    genes
        Genes the k-means is fitted on.
    edges, go_sets
        See :func:`functional_vectors`.
    n_clusters, seed
        k and the seed of the k-means++ seeding (:func:`spherical_kmeans`).
    assign
        Further genes placed in the cluster of highest cosine of the fitted k-means without
        changing it (e.g. the targets of chemical perturbations, aligned to the genetic split).

    Returns
    -------
    pandas.Series
        Gene -> cluster id ``0..n_clusters-1``; ``n_clusters`` for genes with a zero vector. The
        same inputs give the same clusters on any machine (see the module notes).
    """
    from threadpoolctl import threadpool_limits

    genes = list(dict.fromkeys(genes))
    extra = [g for g in dict.fromkeys(assign) if g not in set(genes)]
    # A gene's vector does not depend on the other genes described: one pass serves both sets.
    vectors, _ = functional_vectors(genes + extra, edges, go_sets)
    ok = (vectors != 0).any(axis=1)
    labels = np.full(len(genes) + len(extra), n_clusters, dtype=np.int64)
    fit = ok.copy()
    fit[len(genes):] = False
    if fit.sum() < n_clusters:
        raise ValueError(f"only {int(fit.sum())} genes have a functional vector; need at least {n_clusters}")
    # One BLAS thread: the products are exact in any case, and a shared machine is not slowed down.
    with threadpool_limits(limits=1, user_api="blas"):
        labels[fit], centres = spherical_kmeans(vectors[fit], n_clusters, seed=seed)
        placed = ok & ~fit
        if placed.any():
            labels[placed] = nearest_centre(vectors[placed], centres)
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
    is_id_cell = np.isin(items["cell"].to_numpy(), [c for c in cells if cells[c]["distribution"] == "ID"])
    pert_part = np.where(dist == "OOD", "ood_pert", "id_pert")
    out = np.where(is_id_cell, np.where(split == "test", "id_cell_" + pert_part, split),
                   np.where(split == "test", "ood_cell_" + pert_part, "unused"))
    out = np.where(pd.isna(dist), "unused", out)
    return pd.Series(out, index=items.index, name="fold")
