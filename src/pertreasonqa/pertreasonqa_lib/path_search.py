"""Hop-limited cheapest paths and their diversification (PertReasonQA, Kim et al. 2026, appendix B.2.3).

- :func:`edge_flow`, :func:`edge_costs` — the PPR-informed cost ``1 / (w_uv p_u p_v + eps_c)``;
- :func:`hop_limited_shortest_paths` — Dijkstra with a hop limit ``D_max``, for many cost vectors
  at once (:class:`LayeredPaths`);
- :func:`diversified_paths` — iterative penalty diversification, duplicates and node-set supersets
  pruned (:func:`prune_paths`).

Choices the paper leaves open
-----------------------------
- **Hop limit**: the hop-constrained shortest path is computed exactly by a layered Bellman-Ford
  recursion (the answer of Dijkstra on (node, depth) states), vectorised over edges and queries.
- **Diversification**: the PPR is not recomputed on the penalised copy; an edge used by ``m``
  extracted paths has its weight divided by ``penalty**m``; ``n_paths`` extraction rounds are run
  and the distinct paths kept, then any path whose node set strictly contains another kept path's
  node set is pruned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from pertreasonqa_lib.path_params import DEFAULT_PARAMS, EPS_C, PathParams
from pertreasonqa_lib.signed_graph import SignedGraph, hop_distances


# =================================================================================================
# Hop-limited Dijkstra on the PPR-informed cost
# =================================================================================================
def edge_flow(graph: SignedGraph, weights: np.ndarray, ppr: np.ndarray) -> np.ndarray:
    """``w_uv * p_u * p_v`` per edge (the quantity the cost inverts)."""
    return np.asarray(weights) * ppr[graph.src] * ppr[graph.dst]


def edge_costs(graph: SignedGraph, weights: np.ndarray, ppr: np.ndarray, eps_c: float = EPS_C) -> np.ndarray:
    """``cost_uv = 1 / (w_uv p_u p_v + eps_c)`` for every edge."""
    return 1.0 / (edge_flow(graph, weights, ppr) + eps_c)


@dataclasses.dataclass
class LayeredPaths:
    """Result of :func:`hop_limited_shortest_paths`: exact-``h``-hop distances and predecessors.

    ``dist[h, r, v]`` is the cheapest walk of exactly ``h`` edges from the start set to ``v`` under
    cost row ``r``; ``pred[h - 1, r, v]`` the edge entering ``v`` on it (-1 if none).
    """

    dist: np.ndarray
    pred: np.ndarray
    src: np.ndarray

    def best(self, row: int, target: int) -> tuple[float, int]:
        """Cost and hop count of the cheapest path with at most ``max_hops`` edges (inf, 0 if none)."""
        d = self.dist[1:, row, target]
        h = int(np.argmin(d))
        return float(d[h]), h + 1

    def path(self, row: int, target: int) -> tuple[int, ...] | None:
        """Edge indices of the cheapest path to ``target`` (fewest hops on equal cost), or None."""
        cost, hops = self.best(row, target)
        if not np.isfinite(cost):
            return None
        edges = []
        node = target
        for h in range(hops, 0, -1):
            e = int(self.pred[h - 1, row, node])
            edges.append(e)
            node = int(self.src[e])
        return tuple(reversed(edges))


def hop_limited_shortest_paths(src: np.ndarray, dst: np.ndarray, n_nodes: int, costs: np.ndarray,
                               starts: Sequence[int], max_hops: int) -> LayeredPaths:
    """Cheapest paths of at most ``max_hops`` edges from a start set, for several cost vectors.

    A layered Bellman-Ford recursion ``d_h(v) = min_(u->v) d_(h-1)(u) + c_uv``: exactly the
    shortest path Dijkstra finds on (node, depth) states, but vectorised over the edges and over the
    rows of ``costs``. With positive costs the cheapest walk of at most ``max_hops`` edges is a
    simple path (a cycle could be cut to make it cheaper and shorter).

    Parameters
    ----------
    src, dst
        Edge endpoints (node positions).
    n_nodes
        Number of nodes.
    costs
        ``(n_edges,)`` or ``(n_rows, n_edges)`` positive costs; each row is searched independently.
    starts
        Start nodes (distance 0).
    max_hops
        ``D_max``.
    """
    c = np.atleast_2d(np.asarray(costs, dtype=float))
    if c.shape[1] != len(src):
        raise ValueError(f"costs have {c.shape[1]} columns for {len(src)} edges")
    if (c <= 0).any():
        raise ValueError("costs must be positive")
    rows = c.shape[0]
    order = np.argsort(dst, kind="stable")
    src_o, dst_o = src[order], dst[order]
    c_o = c[:, order]
    group_dst, group_start, group_size = np.unique(dst_o, return_index=True, return_counts=True)
    pos = np.arange(len(order))
    dist = np.full((max_hops + 1, rows, n_nodes), np.inf)
    pred = np.full((max_hops, rows, n_nodes), -1, dtype=np.int64)
    dist[0][:, np.asarray(starts, dtype=np.int64)] = 0.0
    if len(order) == 0:
        return LayeredPaths(dist, pred, src)
    for h in range(1, max_hops + 1):
        cand = dist[h - 1][:, src_o] + c_o
        mins = np.minimum.reduceat(cand, group_start, axis=1)
        hit = cand == np.repeat(mins, group_size, axis=1)
        first = np.minimum.reduceat(np.where(hit, pos, len(order)), group_start, axis=1)
        finite = np.isfinite(mins)
        dist[h][:, group_dst] = mins
        pred[h - 1][:, group_dst] = np.where(finite, order[np.minimum(first, len(order) - 1)], -1)
    return LayeredPaths(dist, pred, src)


# =================================================================================================
# Iterative penalty diversification
# =================================================================================================
def prune_paths(paths: Sequence[tuple[int, ...]], graph_src: np.ndarray, graph_dst: np.ndarray) -> list[tuple[int, ...]]:
    """Drop duplicate paths and paths whose node set strictly contains another path's node set.

    Order (extraction order) is kept among the survivors.
    """
    unique: list[tuple[int, ...]] = []
    for p in paths:
        if p not in unique:
            unique.append(p)
    node_sets = [frozenset([int(graph_src[p[0]])] + [int(graph_dst[e]) for e in p]) for p in unique]
    return [p for p, ns in zip(unique, node_sets) if not any(other < ns for other in node_sets)]


def diversified_paths(graph: SignedGraph, flow: np.ndarray, starts: Sequence[int], targets: Sequence[int],
                      params: PathParams = DEFAULT_PARAMS, *, max_hops: int | None = None,
                      chunk_size: int = 128) -> dict[int, list[tuple[int, ...]]]:
    """Bag of up to ``n_paths`` diverse cheapest paths from a start set to each target.

    Round 1 is the hop-limited shortest path on ``cost = 1 / (flow + eps_c)``; after each round the
    weights of the path's edges are divided by ``penalty`` (cumulatively, in a copy per target, so
    ``flow`` is divided too) and the search is repeated, ``n_paths`` rounds in all. Duplicates and
    node-set supersets are pruned (:func:`prune_paths`).

    Parameters
    ----------
    graph
        The graph.
    flow
        ``w_uv p_u p_v`` per edge (:func:`edge_flow`).
    starts
        Start nodes of the perturbation.
    targets
        Effect-gene nodes.
    params
        ``eps_c``, ``max_hops``, ``n_paths``, ``penalty``.
    max_hops
        Overrides ``params.max_hops`` (e.g. 3 for chemicals after the drug-target edge).
    chunk_size
        Targets searched together (memory: about ``chunk_size x n_edges`` floats).

    Returns
    -------
    dict
        Target node -> list of paths (tuples of edge indices), cheapest first; targets with no path
        within the hop limit (and start nodes) are absent.
    """
    hops = params.max_hops if max_hops is None else int(max_hops)
    starts = np.unique(np.asarray(starts, dtype=np.int64))
    targets = np.asarray(targets, dtype=np.int64)
    fwd = hop_distances(graph, starts, hops)
    reachable = np.unique(targets[(fwd[targets] <= hops) & ~np.isin(targets, starts)])
    out: dict[int, list[tuple[int, ...]]] = {}
    if len(reachable) == 0:
        return out
    flow = np.asarray(flow, dtype=float)
    for lo in range(0, len(reachable), chunk_size):
        chunk = reachable[lo:lo + chunk_size]
        # Only edges on some walk start -> target of at most `hops` edges can be used.
        bwd = hop_distances(graph, chunk, hops, reverse=True)
        keep = fwd[graph.src] + 1 + bwd[graph.dst] <= hops
        e_idx = np.flatnonzero(keep)
        nodes = np.unique(np.concatenate([graph.src[e_idx], graph.dst[e_idx], starts]))
        local = np.full(graph.n_nodes, -1, dtype=np.int64)
        local[nodes] = np.arange(len(nodes))
        s_loc, d_loc = local[graph.src[e_idx]], local[graph.dst[e_idx]]
        f_loc = flow[e_idx]
        t_loc = local[chunk]
        st_loc = local[starts]
        found: list[list[tuple[int, ...]]] = [[] for _ in chunk]
        uses = np.zeros((len(chunk), len(e_idx)))
        for k in range(params.n_paths):
            if k == 0:  # every target shares the unpenalised costs: one row serves them all
                costs = (1.0 / (f_loc + params.eps_c))[None, :]
            else:
                costs = 1.0 / (f_loc[None, :] / params.penalty ** uses + params.eps_c)
            res = hop_limited_shortest_paths(s_loc, d_loc, len(nodes), costs, st_loc, hops)
            for r, t in enumerate(t_loc):
                path = res.path(0 if k == 0 else r, int(t))
                if path is None:
                    continue
                uses[r, list(path)] += 1
                found[r].append(tuple(int(e_idx[e]) for e in path))
        for t, paths in zip(chunk, found):
            if paths:
                out[int(t)] = prune_paths(paths, graph.src, graph.dst)
    return out
