"""Cell-state-conditioned reference reasoning paths of items (PertReasonQA, Kim et al. 2026, appendix B.2).

The pipeline that pairs a perturbation outcome (cell ``c``, perturbation ``p``, effect gene ``g``,
label up/down/unchanged) with signed mechanistic paths ``p -> ... -> g`` from a knowledge graph
conditioned on the cell's basal expression. Its steps, one module each:

1. :func:`~pertreasonqa_lib.signed_graph.build_signed_graph` — one signed, directed edge per gene
   pair from OmniPath, DoRothEA and TRRUST, each edge keeping the databases it comes from (B.2.2,
   B.2.4 "evidence augmentation").
2. :func:`~pertreasonqa_lib.cell_state.tau_low_ks`, :func:`~pertreasonqa_lib.cell_state.tau_high_ks`
   — the KS-based basal activity thresholds (B.2.1).
3. :func:`~pertreasonqa_lib.cell_state.gate_edge_weights` — asymmetric sigmoid gating of the edge
   weights (B.2.2).
4. :func:`~pertreasonqa_lib.pagerank.personalized_pagerank` — vectorised sparse PPR from the
   perturbation's start nodes (B.2.3).
5. :func:`~pertreasonqa_lib.path_search.edge_costs` and
   :func:`~pertreasonqa_lib.path_search.hop_limited_shortest_paths` — Dijkstra on the PPR-informed
   cost with a hop limit (B.2.3).
6. :func:`~pertreasonqa_lib.path_search.diversified_paths` — iterative penalty diversification,
   duplicates and supersets pruned (B.2.3).
7. :func:`~pertreasonqa_lib.sign_filters.sign_reachability` (Algorithm 1) and
   :func:`~pertreasonqa_lib.sign_filters.sign_consistency` (Algorithm 2) — the label filters that
   turn candidate paths into reference paths (B.2.4).

This module chains them: :func:`extract_paths` runs steps 3-6 for many (perturbation, gene)
queries of one cell, :func:`search_items` for the items of any cells, and
:func:`reference_paths_for_items` adds step 7.

Choices the paper leaves open (each is also stated where it is made)
--------------------------------------------------------------------
- **Expression scale**: basal expression enters as ``log1p(NX)`` (HPA v20 NX). ``tau_low`` does not
  depend on the scale (a monotone transform keeps the argmax); ``tau_high`` and the gates do.
- **Genes without a basal value** (outside the symbol map) are gated as if they sat exactly at
  ``tau_low`` (gate = sigmoid(0) = 0.5): no evidence either way. Their basal state is *unknown*, so
  Algorithm 2 never accepts them as silent or saturated.
- **Sign consensus** (stand-in for INDRA CoGEx, which is not available offline): each database row
  votes its sign; unsigned rows abstain; the majority of signed votes wins; a tie, or no signed vote,
  leaves the edge ambiguous (sign 0).
- **PPR**: dangling nodes return their mass to the personalisation vector; iteration starts from the
  personalisation vector and stops after 50 iterations or when every column's L1 change is below
  1e-4. Raw PPR probabilities enter the cost.
- **Hop limit**: the hop-constrained shortest path is computed exactly by a layered Bellman-Ford
  recursion (the answer of Dijkstra on (node, depth) states), vectorised over edges and queries.
- **Diversification**: the PPR is not recomputed on the penalised copy; an edge used by ``m``
  extracted paths has its weight divided by ``penalty**m``; ``n_paths`` extraction rounds are run
  and the distinct paths kept, then any path whose node set strictly contains another kept path's
  node set is pruned.
- **Ambiguity budget** of Algorithm 1: ``B_0 = 1`` (at most one unsigned edge per path).
- **CRISPRi** knockdown: initial sign ``-1`` (Algorithm 1), initial state ``z_0 = 0`` (Algorithm 2).
- **Chemical perturbations**: a compound is a node of the graph whose out-edges are its
  drug-target edges (``interaction == "drug_target"``, signed +1 for an activator, -1 for an
  inhibitor, 0 when unknown). Its start set ``S(p)`` is its targets: PPR is personalised on them
  and the search runs from them with ``D_max = 3``; the drug-target edge into the path's first
  gene is then prepended, so a chemical path has at most four edges and starts at the compound.
  The compound itself is present (initial sign ``+1``, initial state ``z_0 = 1``); the sign of
  the drug-target edge does the rest. A target that is itself the effect gene is explained by the
  drug-target edge alone. The drug-target edge adds no cost (the compound has no PPR mass).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from pertreasonqa_lib.cell_state import STATE_UNKNOWN, basal_state, gate_edge_weights
from pertreasonqa_lib.pagerank import personalized_pagerank
from pertreasonqa_lib.path_params import DEFAULT_PARAMS, PathParams
from pertreasonqa_lib.path_search import diversified_paths, edge_flow
from pertreasonqa_lib.path_serialisation import paths_to_json
from pertreasonqa_lib.sign_filters import filter_reference_paths
from pertreasonqa_lib.signed_graph import SignedGraph, hop_distances, node_values


@dataclasses.dataclass
class CellSearch:
    """Label-free path search results for the queries of one cell (:func:`extract_paths`)."""

    paths: list[list[tuple[int, ...]]]  # per query: candidate paths (edge indices)
    ppr_target: np.ndarray  # per query: PPR of the effect gene from the perturbation (NaN if not in graph)
    best_cost: np.ndarray  # per query: cost of the cheapest path (inf if none; a drug-target edge costs 0)
    hop_distance: np.ndarray  # per query: directed hop distance p -> g (max_hops + 1 if farther)
    weights: np.ndarray  # gated edge weights of the cell


def extract_paths(graph: SignedGraph, node_basal: np.ndarray, tau_low: float, queries: pd.DataFrame,
                  params: PathParams = DEFAULT_PARAMS, *, ppr_batch: int = 256) -> CellSearch:
    """Run gating, PPR and diversified hop-limited search for many queries of one cell.

    Parameters
    ----------
    graph
        The signed graph.
    node_basal
        Basal expression per graph node (NaN unknown).
    tau_low
        Low threshold of the cell.
    queries
        Columns ``perturbation`` (gene symbol, several joined by ``+`` for a combination, whose
        start set is all of them, or a compound of the graph, whose start set is its targets; see
        :meth:`SignedGraph.start_nodes`) and ``gene`` (effect gene).
    params
        Pipeline hyperparameters.
    ppr_batch
        Perturbations whose PPR vectors are computed in one sparse product.
    """
    n_q = len(queries)
    weights = gate_edge_weights(graph, node_basal, tau_low, params)
    paths: list[list[tuple[int, ...]]] = [[] for _ in range(n_q)]
    ppr_target = np.full(n_q, np.nan)
    best_cost = np.full(n_q, np.inf)
    hop_dist = np.full(n_q, params.max_hops + 1, dtype=np.int64)
    pert = queries["perturbation"].astype(str).to_numpy()
    gene_pos = graph.nodes.get_indexer(queries["gene"].astype(str))
    start_sets = {p: starts for p in pd.unique(pert) if (starts := graph.start_nodes(p)) is not None}
    perts = list(start_sets)
    rows_of = pd.Series(np.arange(n_q)).groupby(pert).apply(np.asarray).to_dict()
    for lo in range(0, len(perts), ppr_batch):
        batch = perts[lo:lo + ppr_batch]
        ppr = personalized_pagerank(graph, weights, [start_sets[p] for p in batch], params)
        for j, p in enumerate(batch):
            rows = rows_of[p]
            col = ppr[:, j]
            ok = gene_pos[rows] >= 0
            rows, genes = rows[ok], gene_pos[rows[ok]]
            ppr_target[rows] = col[genes]
            drug = graph.drug_targets(p)
            # A chemical's search runs from its targets with D_max - 1 hops; its edge is prepended.
            lead = 0 if drug is None else 1
            hops = params.max_hops - lead
            fwd = hop_distances(graph, start_sets[p], hops)
            hop_dist[rows] = np.minimum(fwd[genes] + lead, params.max_hops + 1)
            flow = edge_flow(graph, weights, col)
            found = diversified_paths(graph, flow, start_sets[p], genes, params, max_hops=hops)
            cost = 1.0 / (flow + params.eps_c)
            for r, g in zip(rows, genes):
                bag = found.get(int(g))
                if drug is not None:
                    if int(g) in drug:  # the effect gene is a target: the drug-target edge explains it
                        paths[r] = [(drug[int(g)],)]
                        best_cost[r] = 0.0
                        continue
                    bag = [(drug[int(graph.src[path[0]])], *path) for path in bag] if bag else None
                if bag:
                    paths[r] = bag
                    best_cost[r] = float(cost[list(bag[0][lead:])].sum())
    return CellSearch(paths=paths, ppr_target=ppr_target, best_cost=best_cost, hop_distance=hop_dist, weights=weights)


def search_items(items: pd.DataFrame, graph: SignedGraph, basal: pd.DataFrame, thresholds: pd.DataFrame,
                 params: PathParams = DEFAULT_PARAMS) -> tuple[list[list[tuple[int, ...]]], pd.DataFrame]:
    """Label-free diversified path search for items of any cells (steps 3-6).

    Returns
    -------
    paths, features
        Per item (in ``items`` order) its candidate paths (edge indices), and a frame with
        ``ppr_target``, ``best_cost``, ``hop_distance`` and ``gene_state`` (basal state code).
    """
    paths: list[list[tuple[int, ...]]] = [[] for _ in range(len(items))]
    feats = pd.DataFrame({"ppr_target": np.nan, "best_cost": np.inf, "hop_distance": params.max_hops + 1,
                          "gene_state": STATE_UNKNOWN}, index=items.index)
    pos = np.arange(len(items))
    for cell, idx in pd.Series(pos).groupby(items["cell"].to_numpy()):
        sub = items.iloc[idx.to_numpy()]
        tl, th = float(thresholds.loc[cell, "tau_low"]), float(thresholds.loc[cell, "tau_high"])
        res = extract_paths(graph, node_values(graph, basal[cell]), tl, sub, params)
        for k, i in enumerate(idx.to_numpy()):
            paths[i] = res.paths[k]
        cols = ["ppr_target", "best_cost", "hop_distance", "gene_state"]
        feats.iloc[idx.to_numpy(), [feats.columns.get_loc(c) for c in cols[:3]]] = np.column_stack(
            [res.ppr_target, res.best_cost, res.hop_distance])
        feats.iloc[idx.to_numpy(), feats.columns.get_loc("gene_state")] = basal_state(
            sub["gene"].map(basal[cell]).to_numpy(dtype=float), tl, th)
    feats["hop_distance"] = feats["hop_distance"].astype(int)
    feats["gene_state"] = feats["gene_state"].astype(int)
    return paths, feats


def candidate_triplets(items: pd.DataFrame, graph: SignedGraph, basal: pd.DataFrame, thresholds: pd.DataFrame,
                       params: PathParams = DEFAULT_PARAMS) -> list[list[list[tuple[str, int, str]]]]:
    """Label-free candidate paths of items as triplets: what a method derives from the graph and the context.

    The test file carries no paths; a method that wants the paper's cell-conditioned pathway
    context runs the label-free search (steps 3-6) on its own inputs with this function.

    Returns
    -------
    list
        Per item (``items`` order), its candidate paths, each a list of ``(source, sign, target)``.
    """
    paths, _ = search_items(items, graph, basal, thresholds, params)
    return [[[(str(graph.nodes[graph.src[e]]), int(graph.sign[e]), str(graph.nodes[graph.dst[e]])) for e in path]
             for path in bag] for bag in paths]


def reference_paths_for_items(items: pd.DataFrame, graph: SignedGraph, basal: pd.DataFrame, thresholds: pd.DataFrame,
                              params: PathParams = DEFAULT_PARAMS) -> pd.DataFrame:
    """Candidate and reference paths of labelled items (the whole B.2 pipeline).

    Parameters
    ----------
    items
        ``cell``, ``perturbation``, ``perturbation_type``, ``gene``, ``label``.
    graph
        The signed graph.
    basal
        Basal expression by gene symbol x cell (log1p NX; NaN unknown).
    thresholds
        :func:`~pertreasonqa_lib.cell_state.cell_thresholds`.
    params
        Pipeline hyperparameters.

    Returns
    -------
    pandas.DataFrame
        Indexed like ``items``: ``candidate_paths`` and ``reference_paths`` (JSON, see
        :func:`~pertreasonqa_lib.path_serialisation.paths_to_json`), ``n_candidate_paths``, ``n_reference_paths``, ``gene_state``.
    """
    paths, feats = search_items(items, graph, basal, thresholds, params)
    refs = filter_reference_paths(graph, paths, items["label"].to_numpy(), items["perturbation_type"].to_numpy(),
                                  feats["gene_state"].to_numpy(), params.ambiguity_budget)
    return pd.DataFrame({
        "candidate_paths": [paths_to_json(graph, p) for p in paths],
        "reference_paths": [paths_to_json(graph, p) for p in refs],
        "n_candidate_paths": [len(p) for p in paths],
        "n_reference_paths": [len(p) for p in refs],
        "gene_state": feats["gene_state"].to_numpy(),
    }, index=items.index)
