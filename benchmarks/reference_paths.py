"""Timings of the PertReasonQA reference-path pipeline (appendix B.2) on every K562 and RPE1 item.

Run with ``PYTHONPATH=common python benchmarks/reference_paths.py [--chemical]`` (needs the shared data
folder, ``$OPENPERT_SHARED_DATA`` or ``../shared/data``; the task's library is put on the path here).

Prints the wall time of each step for all items of both cells, then two ratios against references
measured in the same run on a sample: the vectorised sparse PPR against networkx's ``pagerank``
(one personalisation at a time, same alpha, iterations and tolerance semantics differ: networkx
stops at ``n * tol``), and the vectorised layered hop-limited search against a heap Dijkstra on
(node, depth) states in pure Python. With ``--chemical`` it also times the chemical modality:
the full-size OP3 simulation with its outcome labels and split, then the whole pipeline for every
compound item of the six cell types.
"""

from __future__ import annotations

import heapq
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from figures import write_figures

from openpert.config.project import shared_data_dir

ROOT = Path(__file__).resolve().parents[1]
# The task's own library, as its components and tests import it.
sys.path.insert(0, str(ROOT / "src" / "pertreasonqa"))
from pertreasonqa_lib import chemical_items as pc  # noqa: E402
from pertreasonqa_lib.basal_expression import load_basal_expression, load_blood_basal  # noqa: E402
from pertreasonqa_lib.cell_state import cell_thresholds, gate_edge_weights  # noqa: E402
from pertreasonqa_lib.genetic_items import CELLS, load_perturbqa_items  # noqa: E402
from pertreasonqa_lib.pagerank import personalized_pagerank  # noqa: E402
from pertreasonqa_lib.path_search import edge_costs, hop_limited_shortest_paths  # noqa: E402
from pertreasonqa_lib.reference_paths import reference_paths_for_items  # noqa: E402
from pertreasonqa_lib.signed_graph import SignedGraph, load_signed_graph, node_values  # noqa: E402

DATA = shared_data_dir(ROOT)


def _clock(label: str, func):
    start = time.perf_counter()
    out = func()
    elapsed = time.perf_counter() - start
    print(f"{label:62s} {elapsed:8.2f} s")
    return out, elapsed


def adjacency_lists(graph: SignedGraph) -> dict[int, list[tuple[int, int]]]:
    """node -> [(next node, edge index)], built once for the reference search."""
    out: dict[int, list[tuple[int, int]]] = {}
    for e, (u, v) in enumerate(zip(graph.src.tolist(), graph.dst.tolist())):
        out.setdefault(u, []).append((v, e))
    return out


def heap_dijkstra_hops(out: dict[int, list[tuple[int, int]]], cost: np.ndarray, start: int, target: int, max_hops: int) -> float:
    """Reference: Dijkstra over (node, depth) states, pure Python."""
    cost = cost.tolist()
    heap = [(0.0, start, 0)]
    seen = set()
    while heap:
        d, node, depth = heapq.heappop(heap)
        if node == target and depth > 0:
            return d
        if (node, depth) in seen or depth == max_hops:
            continue
        seen.add((node, depth))
        for nxt, e in out.get(node, ()):
            heapq.heappush(heap, (d + cost[e], nxt, depth + 1))
    return float("inf")


def main() -> None:
    graph, _ = _clock("load signed graph (OmniPath + DoRothEA + TRRUST)", lambda: load_signed_graph(DATA / "knowledge_graphs"))
    items, _ = _clock("load PerturbQA items (K562, RPE1)",
                      lambda: pd.concat([load_perturbqa_items(c, DATA) for c in CELLS], ignore_index=True))
    (basal, profile, stats), _ = _clock("load HPA v20 basal expression", lambda: load_basal_expression(DATA))
    basal, profile = np.log1p(basal), np.log1p(profile)
    print(f"  {len(items):,} items; {graph.n_nodes:,} genes, {graph.n_edges:,} edges; "
          f"{stats['n_mapped']:,} of {stats['n_hpa_genes']:,} HPA genes map to a symbol")
    thresholds, _ = _clock("KS thresholds of both cells", lambda: cell_thresholds(items, basal, profile))
    total = 0.0
    figures: dict[str, float] = {}
    for cell in CELLS:
        sub = items[items["cell"] == cell]
        node_b = node_values(graph, basal[cell])
        tl = float(thresholds.loc[cell, "tau_low"])
        w, _ = _clock(f"{cell}: gating", lambda: gate_edge_weights(graph, node_b, tl))
        perts = [p for p in sub["perturbation"].unique() if p in graph.nodes]
        starts = [[graph.nodes.get_loc(p)] for p in perts]
        ppr, t_ppr = _clock(f"{cell}: PPR of {len(perts)} perturbations (vectorised)",
                            lambda: personalized_pagerank(graph, w, starts))
        out, t_all = _clock(f"{cell}: whole pipeline, {len(sub):,} items (search + filters)",
                            lambda: reference_paths_for_items(sub, graph, basal, thresholds))
        total += t_all
        print(f"  {cell}: {(out['n_candidate_paths'] > 0).sum():,} items with candidate paths, "
              f"{(out['n_reference_paths'] > 0).sum():,} with reference paths")
        if cell == "K562":
            try:
                import networkx as nx
            except ImportError:
                print("  networkx is not installed: the PPR and shortest-path comparisons are skipped")
                continue
            nxg = nx.DiGraph()
            nxg.add_weighted_edges_from(zip(graph.nodes[graph.src], graph.nodes[graph.dst], w))
            sample = perts[:50]
            _, t_nx = _clock(f"{cell}: networkx pagerank, {len(sample)} perturbations one by one",
                             lambda: [nx.pagerank(nxg, alpha=0.85, personalization={p: 1.0}, max_iter=50, tol=1e-4)
                                      for p in sample])
            figures["ppr_speedup_vs_networkx"] = (t_nx / len(sample)) / (t_ppr / len(perts))
            print(f"  PPR ratio networkx / vectorised, per perturbation: {figures['ppr_speedup_vs_networkx']:.1f}x")
            rows = sub[sub["perturbation"].isin(sample) & sub["gene"].isin(graph.nodes)].head(200)
            col = {p: j for j, p in enumerate(perts)}
            pairs = [(graph.nodes.get_loc(p), graph.nodes.get_loc(g), ppr[:, col[p]]) for p, g in zip(rows["perturbation"], rows["gene"])]
            adj = adjacency_lists(graph)
            got, t_heap = _clock(f"{cell}: heap Dijkstra on (node, depth), {len(pairs)} items",
                                 lambda: [heap_dijkstra_hops(adj, edge_costs(graph, w, x), s, t, 4) for s, t, x in pairs])
            ours, t_layer = _clock(f"{cell}: layered search, same {len(pairs)} items",
                                   lambda: [hop_limited_shortest_paths(graph.src, graph.dst, graph.n_nodes,
                                                                       edge_costs(graph, w, x), [s], 4).best(0, t)[0]
                                            for s, t, x in pairs])
            assert np.allclose(got, ours), "the layered search disagrees with the heap Dijkstra"
            figures["search_speedup_vs_heap_dijkstra"] = t_heap / t_layer
            print(f"  shortest-path ratio heap Dijkstra / layered search (one item at a time): {t_heap / t_layer:.1f}x")
    print(f"{'both cells, whole pipeline':62s} {total:8.2f} s")
    figures["genetic_pipeline_s"] = total
    print(f"figures: {write_figures('reference_paths', figures, items=len(items))}")
    if "--chemical" in sys.argv[1:]:
        chemical(graph)


def chemical(graph: SignedGraph) -> None:
    """The chemical modality: simulation, labels and split, then paths of every compound item."""
    built, _ = _clock("OP3 simulation (full size), Wilcoxon labels, compound split",
                      lambda: pc.chemical_items(graph.nodes, graph.to_frame(), DATA))
    items = built["items"]
    with_drugs = graph.with_drug_targets(built["targets"], pc.TARGET_DATABASE)
    (basal, profile, _), _ = _clock("load HPA v20 blood basal expression", lambda: load_blood_basal(DATA))
    basal, profile = np.log1p(basal), np.log1p(profile)
    thresholds = cell_thresholds(items, basal, profile)
    print(f"  {len(items):,} compound items of {items['perturbation'].nunique()} compounds in {items['cell'].nunique()} cell types; "
          f"{int(with_drugs.drug_edge.sum())} drug-target edges")
    out, _ = _clock("all cell types: whole pipeline (search + filters)",
                    lambda: reference_paths_for_items(items, with_drugs, basal, thresholds))
    print(f"  {(out['n_candidate_paths'] > 0).sum():,} items with candidate paths, "
          f"{(out['n_reference_paths'] > 0).sum():,} with reference paths")


if __name__ == "__main__":
    main()
