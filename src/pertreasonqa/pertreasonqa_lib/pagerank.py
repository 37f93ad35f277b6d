"""Personalised PageRank from the perturbation's start nodes (PertReasonQA, Kim et al. 2026, appendix B.2.3).

Vectorised over personalisation vectors: one sparse product per iteration serves a whole batch of
perturbations (and, with unit weights, B.1's functional gene vectors).

Choices the paper leaves open
-----------------------------
- **PPR**: dangling nodes return their mass to the personalisation vector; iteration starts from the
  personalisation vector and stops after 50 iterations or when every column's L1 change is below
  1e-4. Raw PPR probabilities enter the cost.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from pertreasonqa_lib.path_params import DEFAULT_PARAMS, PathParams
from pertreasonqa_lib.signed_graph import SignedGraph


def personalized_pagerank(graph: SignedGraph, weights: np.ndarray, start_sets: Sequence[Sequence[int]],
                          params: PathParams = DEFAULT_PARAMS, *, dtype=np.float64) -> np.ndarray:
    """PPR ``p = (1 - alpha) s + alpha P^T p`` for many personalisation vectors at once.

    Parameters
    ----------
    graph
        The graph.
    weights
        Edge weights (e.g. from :func:`~pertreasonqa_lib.cell_state.gate_edge_weights`); ``P`` is their row-normalised matrix.
    start_sets
        One list of start nodes per column; each start node gets mass ``1/|S|``.
    params
        ``alpha``, ``ppr_max_iter``, ``ppr_tol``.

    Returns
    -------
    numpy.ndarray
        ``n_nodes x len(start_sets)``; each column sums to 1. The mass of dangling nodes (no
        out-edge) returns to the personalisation vector. Power iteration from ``s`` stops after
        ``ppr_max_iter`` steps or once every column changed by less than ``ppr_tol`` in L1.
    """
    n, m = graph.n_nodes, len(start_sets)
    rows, cols, vals = [], [], []
    for j, starts in enumerate(start_sets):
        starts = np.unique(np.asarray(starts, dtype=np.int64))
        if len(starts) == 0:
            raise ValueError(f"start set {j} is empty")
        rows.append(starts)
        cols.append(np.full(len(starts), j))
        vals.append(np.full(len(starts), 1.0 / len(starts)))
    rows, cols, vals = (np.concatenate(a) if a else np.zeros(0, dtype=int) for a in (rows, cols, vals))
    w = np.asarray(weights, dtype=float)
    out_sum = np.bincount(graph.src, weights=w, minlength=n)
    dangling = np.flatnonzero(out_sum == 0)
    inv = 1.0 / np.where(out_sum == 0, 1.0, out_sum)
    pt = sp.csr_matrix((w * inv[graph.src], (graph.dst, graph.src)), shape=(n, n)).astype(dtype)  # P^T
    x = np.zeros((n, m), dtype=dtype)
    x[rows, cols] = vals
    for _ in range(params.ppr_max_iter):
        lost = x[dangling].sum(axis=0)
        new = pt @ x
        new *= params.alpha
        # (1 - alpha) s + alpha s * lost: s is non-zero only at the start nodes
        new[rows, cols] += vals * (params.alpha * lost[cols] + (1.0 - params.alpha))
        x -= new
        np.abs(x, out=x)
        err = x.sum(axis=0).max() if m else 0.0
        x = new
        if err < params.ppr_tol:
            break
    return x
