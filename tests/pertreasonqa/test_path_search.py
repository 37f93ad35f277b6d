"""Hop-limited cheapest paths and their diversification (appendix B.2.3) on hand-made graphs.

Every expected value below is worked out by hand in the comments.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pertreasonqa_lib.path_params import PathParams
from pertreasonqa_lib.path_search import diversified_paths, edge_costs, hop_limited_shortest_paths, prune_paths
from toy_graphs import graph_of


def path_names(graph, path):
    return [graph.nodes[graph.src[path[0]]]] + [graph.nodes[graph.dst[e]] for e in path]


def test_edge_costs_formula():
    g = graph_of([("P", 1, "A")])
    ppr = np.zeros(g.n_nodes)
    ppr[g.nodes.get_loc("P")], ppr[g.nodes.get_loc("A")] = 0.5, 0.2
    assert edge_costs(g, np.array([0.3]), ppr)[0] == pytest.approx(1 / (0.3 * 0.5 * 0.2 + 1e-4))


def test_hop_limit_excludes_cheaper_long_path():
    chain = [("P", 1, "C1"), ("C1", 1, "C2"), ("C2", 1, "C3"), ("C3", 1, "C4"), ("C4", 1, "G")]
    g = graph_of(chain + [("P", 1, "A"), ("A", 1, "G")])
    cost = pd.Series(10.0, index=list(zip(g.nodes[g.src], g.nodes[g.dst])))
    cost[[(s, t) for s, _, t in chain]] = 0.1  # 5 hops costing 0.5 in all, vs 20 for P-A-G
    p, t = g.nodes.get_loc("P"), g.nodes.get_loc("G")
    res4 = hop_limited_shortest_paths(g.src, g.dst, g.n_nodes, cost.to_numpy(), [p], 4)
    assert path_names(g, res4.path(0, t)) == ["P", "A", "G"]
    assert res4.best(0, t) == (20.0, 2)
    res5 = hop_limited_shortest_paths(g.src, g.dst, g.n_nodes, cost.to_numpy(), [p], 5)
    assert path_names(g, res5.path(0, t)) == ["P", "C1", "C2", "C3", "C4", "G"]
    assert res5.best(0, t)[0] == pytest.approx(0.5)
    res1 = hop_limited_shortest_paths(g.src, g.dst, g.n_nodes, cost.to_numpy(), [p], 1)
    assert res1.path(0, t) is None


def test_hop_limited_paths_match_brute_force_on_random_graphs():
    rng = np.random.default_rng(0)
    for _ in range(30):
        n = 8
        pairs = [(a, b) for a in range(n) for b in range(n) if a != b and rng.random() < 0.3]
        if not pairs:
            continue
        src = np.array([a for a, _ in pairs])
        dst = np.array([b for _, b in pairs])
        costs = rng.uniform(0.1, 5.0, size=(3, len(pairs)))
        res = hop_limited_shortest_paths(src, dst, n, costs, [0], 3)
        adj = {}
        for e, (a, b) in enumerate(pairs):
            adj.setdefault(a, []).append((b, e))
        for row in range(3):
            best = {}
            def walk(node, used, total, visited):
                for nxt, e in adj.get(node, []):
                    if nxt in visited:
                        continue
                    c = total + costs[row, e]
                    if c < best.get(nxt, (np.inf,))[0]:
                        best[nxt] = (c, used + (e,))
                    if len(used) + 1 < 3:
                        walk(nxt, used + (e,), c, visited | {nxt})
            walk(0, (), 0.0, {0})
            for target in range(1, n):
                got = res.path(row, target)
                if target not in best:
                    assert got is None
                else:
                    assert got is not None
                    assert costs[row, list(got)].sum() == pytest.approx(best[target][0])
                    assert len(got) <= 3 and src[got[0]] == 0 and dst[got[-1]] == target


def flows(g, values):
    return pd.Series(values).reindex(list(zip(g.nodes[g.src], g.nodes[g.dst]))).to_numpy()


def test_diversification_finds_alternative_route():
    g = graph_of([("P", 1, "A"), ("A", 1, "G"), ("P", 1, "B"), ("B", 1, "G")])
    f = flows(g, {("P", "A"): 1.0, ("A", "G"): 1.0, ("P", "B"): 0.8, ("B", "G"): 0.8})
    params = PathParams(eps_c=1e-12)
    # round 1: PAG 2 < PBG 2.5; round 2: PAG 4 > PBG 2.5; round 3: PAG 4 < PBG 5; round 4: PBG
    bag = diversified_paths(g, f, [g.nodes.get_loc("P")], [g.nodes.get_loc("G")], params)
    assert [path_names(g, p) for p in bag[g.nodes.get_loc("G")]] == [["P", "A", "G"], ["P", "B", "G"]]
    one = diversified_paths(g, f, [g.nodes.get_loc("P")], [g.nodes.get_loc("G")], PathParams(eps_c=1e-12, n_paths=1))
    assert [path_names(g, p) for p in one[g.nodes.get_loc("G")]] == [["P", "A", "G"]]


def test_diversification_prunes_superset_path():
    g = graph_of([("P", 1, "A"), ("A", 1, "G"), ("A", 1, "B"), ("B", 1, "G"), ("P", 1, "B")])
    f = flows(g, {("P", "A"): 10.0, ("A", "G"): 1.0, ("A", "B"): 10.0, ("B", "G"): 0.9, ("P", "B"): 0.1})
    params = PathParams(eps_c=1e-12)
    # costs: PAG 1.1 -> after one penalty 2.2; PABG 1.311 -> round 2 picks PABG; round 3 PAG (2.2 vs
    # 2.82); round 4 PABG (4.4 vs 2.82). P-A-B-G's node set contains P-A-G's: pruned.
    bag = diversified_paths(g, f, [g.nodes.get_loc("P")], [g.nodes.get_loc("G")], params)
    assert [path_names(g, p) for p in bag[g.nodes.get_loc("G")]] == [["P", "A", "G"]]


def test_prune_paths_keeps_order_drops_duplicates_and_supersets():
    g = graph_of([("P", 1, "A"), ("A", 1, "G"), ("A", 1, "B"), ("B", 1, "G"), ("P", 1, "B")])
    e = g.edge_lookup()
    pag = (e["P", "A"], e["A", "G"])
    pbg = (e["P", "B"], e["B", "G"])
    pabg = (e["P", "A"], e["A", "B"], e["B", "G"])
    assert prune_paths([pbg, pabg, pag, pbg], g.src, g.dst) == [pbg, pag]


def test_diversified_paths_many_targets_and_unreachable():
    g = graph_of([("P", 1, "A"), ("A", 1, "G1"), ("A", -1, "G2"), ("Q", 1, "G3")])
    f = np.ones(g.n_edges)
    bag = diversified_paths(g, f, [g.nodes.get_loc("P")], [g.nodes.get_loc(x) for x in ["G1", "G2", "G3", "P"]])
    assert sorted(g.nodes[list(bag)]) == ["G1", "G2"]  # G3 unreachable, P is the start
