"""Answers that model nothing: the random and adversarial controls of PertReasonQA.

Each reads only what a method may read (training items, test questions, the graph): they show
what a metric pays for chance, a list, an invented edge, a plausible-looking path or a copied one.

- :func:`nearby_edges` — every graph edge on a walk of at most ``D_max`` edges from the
  perturbation to the effect gene (a superset of the label-free candidate paths);
- :func:`graph_paths` — the graph's signed simple paths from the perturbation to the effect gene
  (the random control draws its mechanism among them);
- :func:`shortest_hop_path` — the path with the fewest edges, ignoring the cell state;
- :func:`nearest_training_items` — for each test item, the training item whose effect gene
  matches and whose perturbation is nearest in the graph.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pandas as pd

from pertreasonqa_lib.faithfulness import predicted_paths
from pertreasonqa_lib.path_params import MAX_HOPS
from pertreasonqa_lib.signed_graph import SignedGraph, hop_distances

Triplet = tuple[str, int, str]


def perturbation_nodes(graph: SignedGraph, perturbation: str) -> np.ndarray:
    """Graph nodes where a perturbation's mechanism starts: the compound itself, or the genes of ``A+B`` (absent ones dropped)."""
    names = [perturbation] if graph.drug_targets(perturbation) else str(perturbation).split("+")
    idx = graph.node_positions(names)
    return idx[idx >= 0]


def _triplets(graph: SignedGraph, edges) -> list[Triplet]:
    return [(str(graph.nodes[graph.src[e]]), int(graph.sign[e]), str(graph.nodes[graph.dst[e]])) for e in edges]


def nearby_edges(graph: SignedGraph, perturbation: str, gene: str, max_hops: int = MAX_HOPS) -> list[Triplet]:
    """Every edge on some walk of at most ``max_hops`` edges from the perturbation to the gene, with its graph sign."""
    starts = perturbation_nodes(graph, perturbation)
    end = graph.node_positions([gene])
    if len(starts) == 0 or end[0] < 0:
        return []
    fwd = hop_distances(graph, starts, max_hops)
    bwd = hop_distances(graph, end, max_hops, reverse=True)
    return _triplets(graph, np.flatnonzero(fwd[graph.src] + 1 + bwd[graph.dst] <= max_hops))


def graph_paths(graph: SignedGraph, perturbation: str, gene: str, max_hops: int = MAX_HOPS,
                limit: int = 10_000) -> list[tuple[Triplet, ...]]:
    """The graph's simple paths of at most ``max_hops`` edges from the perturbation to the gene (at most ``limit + 1``)."""
    starts = [str(graph.nodes[i]) for i in perturbation_nodes(graph, perturbation)]
    return predicted_paths(nearby_edges(graph, perturbation, gene, max_hops), starts, gene, max_hops, limit=limit)


def shortest_hop_path(graph: SignedGraph, perturbation: str, gene: str, max_hops: int = MAX_HOPS) -> list[Triplet]:
    """A path with the fewest edges (at most ``max_hops``) from the perturbation to the gene, or ``[]``.

    Breadth-first over out-edges in edge order, so ties go to the edge listed first: no cell state,
    no PageRank, no sign rule.
    """
    starts = perturbation_nodes(graph, perturbation)
    end = int(graph.node_positions([gene])[0])
    if len(starts) == 0 or end < 0 or end in starts:
        return []
    out = graph.out_edges()
    entered: dict[int, int] = {int(s): -1 for s in starts}
    depth = {int(s): 0 for s in starts}
    queue = deque(int(s) for s in starts)
    # The gene's entering edge is fixed when the gene is first reached: the search ends there.
    while queue and end not in entered:
        node = queue.popleft()
        if depth[node] == max_hops:
            continue
        for e, nxt in out.get(node, ()):
            if nxt not in entered:
                entered[nxt], depth[nxt] = e, depth[node] + 1
                if nxt == end:
                    break
                queue.append(nxt)
    if end not in entered:
        return []
    edges = []
    node = end
    while entered[node] >= 0:
        edges.append(entered[node])
        node = int(graph.src[entered[node]])
    return _triplets(graph, reversed(edges))


def nearest_training_items(train: pd.DataFrame, test: pd.DataFrame, graph: SignedGraph, max_hops: int = MAX_HOPS) -> pd.Series:
    """For each test item, the training item to copy: same effect gene, perturbation nearest in the graph.

    Among the training items of the test item's effect gene (all training items when the gene has
    none), the one whose perturbation is fewest undirected hops from the test perturbation (capped
    at ``max_hops + 1``); ties go to an item with a reference path, then to the first in the file.

    Returns
    -------
    pandas.Series
        Test item -> index of the chosen training item.
    """
    if train.empty:
        raise ValueError("nearest_training_items: no training item to copy from")
    far = max_hops + 1
    # Ties: an item with a reference path first (0 before 1), then the first in the file (argmin).
    no_ref = (train["n_reference_paths"].to_numpy() <= 0 if "n_reference_paths" in train.columns
              else np.ones(len(train), bool)).astype(np.int64)
    by_gene = pd.Series(np.arange(len(train))).groupby(train["gene"].astype(str).to_numpy()).apply(np.asarray).to_dict()
    everything = np.arange(len(train))
    # Each distinct training perturbation once: the graph nodes it starts from, flattened, with where
    # each one's nodes begin (-1, beyond the hop limit, for a perturbation the graph lacks).
    perts, pert_of_row = np.unique(train["perturbation"].astype(str).to_numpy(), return_inverse=True)
    starts_of = [nodes if len(nodes) else np.array([-1]) for nodes in (perturbation_nodes(graph, p) for p in perts)]
    member_nodes = np.concatenate(starts_of)
    first_member = np.cumsum([0, *(len(nodes) for nodes in starts_of[:-1])])
    pert_distance: dict[str, np.ndarray] = {}  # test perturbation -> hops to each training perturbation
    chosen_for: dict[tuple[str, str | None], object] = {}
    chosen = []
    for pert, gene in zip(test["perturbation"].astype(str), test["gene"].astype(str)):
        key = (pert, gene if gene in by_gene else None)  # without training items of its gene: all of them
        if key not in chosen_for:
            if pert not in pert_distance:
                starts = perturbation_nodes(graph, pert)
                dist = hop_distances(graph, starts, max_hops, undirected=True) if len(starts) else np.full(graph.n_nodes, far)
                hops = np.append(dist, far)[member_nodes]
                pert_distance[pert] = np.minimum.reduceat(hops, first_member)
            rows = by_gene[gene] if key[1] is not None else everything
            rank = pert_distance[pert][pert_of_row[rows]] * 2 + no_ref[rows]
            chosen_for[key] = train.index[rows[np.argmin(rank)]]
        chosen.append(chosen_for[key])
    return pd.Series(chosen, index=test.index)
