"""Personalised PageRank (appendix B.2.3), against its closed form and on a compound's targets.
"""

from __future__ import annotations

import numpy as np
import pytest
from pertreasonqa_lib.cell_state import gate_edge_weights
from pertreasonqa_lib.pagerank import personalized_pagerank
from pertreasonqa_lib.path_params import PathParams
from toy_graphs import drug_graph, graph_of


def test_personalized_pagerank_matches_linear_solve():
    g = graph_of([("P", 1, "A"), ("P", 1, "B"), ("A", 1, "C"), ("B", 1, "C"), ("C", 1, "P"), ("A", 1, "D")])
    w = np.array([1.0, 2.0, 0.5, 1.0, 1.0, 3.0])[np.argsort(np.argsort(np.arange(g.n_edges)))]
    params = PathParams(ppr_max_iter=2000, ppr_tol=1e-14)
    starts = [[g.nodes.get_loc("P")], [g.nodes.get_loc("A"), g.nodes.get_loc("B")]]
    x = personalized_pagerank(g, w, starts, params)
    assert np.allclose(x.sum(axis=0), 1.0)
    # closed form: p = (1 - a) s + a (P^T p + s * p[dangling]) with D dangling
    n = g.n_nodes
    P = np.zeros((n, n))
    P[g.src, g.dst] = w
    out = P.sum(1)
    dangling = out == 0
    P[~dangling] /= out[~dangling, None]
    for j, st in enumerate(starts):
        s = np.zeros(n)
        s[st] = 1 / len(st)
        M = np.eye(n) - 0.85 * (P.T + np.outer(s, dangling))
        exact = np.linalg.solve(M, 0.15 * s)
        assert np.allclose(x[:, j], exact, atol=1e-10)
    # the default 50 iterations stop with an L1 error of about 0.85**50
    x50 = personalized_pagerank(g, w, starts)
    assert np.abs(x50 - x).sum(axis=0).max() < 1e-2


def test_chemical_ppr_is_personalised_on_the_targets():
    g = drug_graph()
    w = gate_edge_weights(g, np.full(g.n_nodes, np.nan), 0.0)
    ppr = personalized_pagerank(g, w, [g.start_nodes("D")])[:, 0]
    node = {n: i for i, n in enumerate(g.nodes)}
    assert ppr[node["D"]] == 0  # no edge enters a compound
    # T1 and T2 each get (1 - alpha)/2 of restart mass and no inflow: equal scores
    assert ppr[node["T1"]] == pytest.approx(ppr[node["T2"]])
    assert ppr.sum() == pytest.approx(1.0)
