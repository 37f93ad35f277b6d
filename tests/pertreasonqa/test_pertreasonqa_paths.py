"""Each step of the PertReasonQA reference-path pipeline (appendix B.2) on hand-made graphs.

Every expected value below is worked out by hand in the comments.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from pertreasonqa_lib import reasoning_paths as rp


def edges(rows, database="OmniPath"):
    return pd.DataFrame([{"source": s, "target": t, "sign": sign, "database": database} for s, sign, t in rows])


def graph_of(rows) -> rp.SignedGraph:
    return rp.build_signed_graph(edges(rows))


def path_names(graph, path):
    return [graph.nodes[graph.src[path[0]]]] + [graph.nodes[graph.dst[e]] for e in path]


# --- step 1: signed graph ------------------------------------------------------------------------
def test_build_signed_graph_consensus_and_provenance():
    df = pd.concat([
        edges([("A", 1, "G"), ("B", 1, "G"), ("C", 1, "G"), ("A", 1, "A")], "OmniPath"),
        edges([("A", 0, "G"), ("B", -1, "G"), ("C", -1, "G")], "TRRUST"),
        edges([("C", -1, "G"), ("D", 0, "G")], "DoRothEA"),
    ])
    g = rp.build_signed_graph(df)
    frame = g.to_frame().set_index(["source", "target"])
    assert ("A", "A") not in frame.index  # self-loop dropped
    assert frame.loc[("A", "G"), "sign"] == 1  # +1 and an abstaining 0
    assert frame.loc[("A", "G"), "databases"] == "OmniPath;TRRUST"
    assert frame.loc[("B", "G"), "sign"] == 0  # +1 vs -1: tie -> ambiguous
    assert frame.loc[("C", "G"), "sign"] == -1  # +1 vs two -1
    assert frame.loc[("C", "G"), "databases"] == "DoRothEA;OmniPath;TRRUST"
    assert frame.loc[("D", "G"), "sign"] == 0  # no signed vote
    assert len(frame) == 4
    again = rp.SignedGraph.from_frame(g.to_frame())
    assert again.to_frame().equals(g.to_frame())


def test_hop_distances_forward_reverse():
    g = graph_of([("P", 1, "A"), ("A", 1, "B"), ("B", 1, "C"), ("X", 1, "A")])
    p = g.nodes.get_loc("P")
    d = pd.Series(rp.hop_distances(g, [p], 2), index=g.nodes)
    assert d.to_dict() == {"A": 1, "B": 2, "C": 3, "P": 0, "X": 3}  # 3 = beyond the limit of 2
    r = pd.Series(rp.hop_distances(g, [g.nodes.get_loc("B")], 4, reverse=True), index=g.nodes)
    assert r["A"] == 1 and r["P"] == 2 and r["X"] == 2 and r["C"] == 5


# --- step 2: thresholds --------------------------------------------------------------------------
def test_tau_low_maximises_signed_ks():
    # grid 1, 2, 2.5, 3, 4, 6, 8, 9: F_bg - F_sig = .25, .5, .25, .5, .25, 0, .25, 0 -> first max at 2
    assert rp.tau_low_ks(np.array([1, 2, 3, 8]), np.array([2.5, 4, 6, 9])) == 2.0
    # perfectly separated samples: the largest background value
    assert rp.tau_low_ks(np.array([0, 1, 1, 2]), np.array([5, 6, 7])) == 2.0
    with pytest.raises(ValueError, match="tau_low needs"):
        rp.tau_low_ks(np.array([]), np.array([1.0]))


def test_tau_high_knee_against_uniform():
    # active values (> 0.5): 1, 2, 3, 4, 100 -> z = 0, 1/99, 2/99, 3/99, 1; F - z peaks at z = 3/99
    # (0.8 - 0.0303 = 0.77), so tau_high is the value 4.
    x = np.array([0, 0, 0, 1, 2, 3, 4, 100, np.nan])
    assert rp.tau_high_ks(x, 0.5) == 4.0
    # values at or below tau_low never count as active
    assert rp.tau_high_ks(np.array([4.0, 4.0, 5.0, 6.0, 7.0, 50.0]), 4.0) == 7.0
    with pytest.raises(ValueError, match="two distinct"):
        rp.tau_high_ks(np.array([1.0, 2.0]), 1.5)


def test_basal_state_codes():
    s = rp.basal_state(np.array([0.0, 1.0, 1.5, 3.0, 4.0, np.nan]), tau_low=1.0, tau_high=3.0)
    assert s.tolist() == [rp.STATE_LOW, rp.STATE_LOW, rp.STATE_MEDIUM, rp.STATE_HIGH, rp.STATE_HIGH, rp.STATE_UNKNOWN]


# --- step 3: gating ------------------------------------------------------------------------------
def test_gate_edge_weights_asymmetric():
    g = graph_of([("HI", 1, "LO"), ("LO", 1, "HI"), ("MID", 1, "NA"), ("NA", 1, "MID")])
    basal = pd.Series({"HI": 10.0, "LO": -10.0, "MID": 0.0})  # NA has no value
    w = pd.Series(rp.gate_edge_weights(g, rp.node_values(g, basal), tau_low=0.0),
                  index=list(zip(g.nodes[g.src], g.nodes[g.dst])))
    # sigmoid(10 * 10) = 1, sigmoid(-100) = 0, sigmoid(0) = 0.5 (and NA is gated as tau_low)
    assert w[("HI", "LO")] == pytest.approx(1.0 * (0.5 + 0.5 * 0.0) + 1e-9)  # source on, target floor 0.5
    assert w[("LO", "HI")] == pytest.approx(0.05 * 1.0 + 1e-9)  # source floor 0.05, target on
    assert w[("MID", "NA")] == pytest.approx(0.5 * 0.75 + 1e-9)
    assert w[("NA", "MID")] == pytest.approx(0.5 * 0.75 + 1e-9)
    with pytest.raises(ValueError, match="shape"):
        rp.gate_edge_weights(g, np.zeros(2), 0.0)


# --- step 4: PPR ---------------------------------------------------------------------------------
def test_personalized_pagerank_matches_linear_solve():
    g = graph_of([("P", 1, "A"), ("P", 1, "B"), ("A", 1, "C"), ("B", 1, "C"), ("C", 1, "P"), ("A", 1, "D")])
    w = np.array([1.0, 2.0, 0.5, 1.0, 1.0, 3.0])[np.argsort(np.argsort(np.arange(g.n_edges)))]
    params = rp.PathParams(ppr_max_iter=2000, ppr_tol=1e-14)
    starts = [[g.nodes.get_loc("P")], [g.nodes.get_loc("A"), g.nodes.get_loc("B")]]
    x = rp.personalized_pagerank(g, w, starts, params)
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
    x50 = rp.personalized_pagerank(g, w, starts)
    assert np.abs(x50 - x).sum(axis=0).max() < 1e-2


# --- step 5: hop-limited Dijkstra ----------------------------------------------------------------
def test_edge_costs_formula():
    g = graph_of([("P", 1, "A")])
    ppr = np.zeros(g.n_nodes)
    ppr[g.nodes.get_loc("P")], ppr[g.nodes.get_loc("A")] = 0.5, 0.2
    assert rp.edge_costs(g, np.array([0.3]), ppr)[0] == pytest.approx(1 / (0.3 * 0.5 * 0.2 + 1e-4))


def test_hop_limit_excludes_cheaper_long_path():
    chain = [("P", 1, "C1"), ("C1", 1, "C2"), ("C2", 1, "C3"), ("C3", 1, "C4"), ("C4", 1, "G")]
    g = graph_of(chain + [("P", 1, "A"), ("A", 1, "G")])
    cost = pd.Series(10.0, index=list(zip(g.nodes[g.src], g.nodes[g.dst])))
    cost[[(s, t) for s, _, t in chain]] = 0.1  # 5 hops costing 0.5 in all, vs 20 for P-A-G
    p, t = g.nodes.get_loc("P"), g.nodes.get_loc("G")
    res4 = rp.hop_limited_shortest_paths(g.src, g.dst, g.n_nodes, cost.to_numpy(), [p], 4)
    assert path_names(g, res4.path(0, t)) == ["P", "A", "G"]
    assert res4.best(0, t) == (20.0, 2)
    res5 = rp.hop_limited_shortest_paths(g.src, g.dst, g.n_nodes, cost.to_numpy(), [p], 5)
    assert path_names(g, res5.path(0, t)) == ["P", "C1", "C2", "C3", "C4", "G"]
    assert res5.best(0, t)[0] == pytest.approx(0.5)
    res1 = rp.hop_limited_shortest_paths(g.src, g.dst, g.n_nodes, cost.to_numpy(), [p], 1)
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
        res = rp.hop_limited_shortest_paths(src, dst, n, costs, [0], 3)
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


# --- step 6: diversification ---------------------------------------------------------------------
def flows(g, values):
    return pd.Series(values).reindex(list(zip(g.nodes[g.src], g.nodes[g.dst]))).to_numpy()


def test_diversification_finds_alternative_route():
    g = graph_of([("P", 1, "A"), ("A", 1, "G"), ("P", 1, "B"), ("B", 1, "G")])
    f = flows(g, {("P", "A"): 1.0, ("A", "G"): 1.0, ("P", "B"): 0.8, ("B", "G"): 0.8})
    params = rp.PathParams(eps_c=1e-12)
    # round 1: PAG 2 < PBG 2.5; round 2: PAG 4 > PBG 2.5; round 3: PAG 4 < PBG 5; round 4: PBG
    bag = rp.diversified_paths(g, f, [g.nodes.get_loc("P")], [g.nodes.get_loc("G")], params)
    assert [path_names(g, p) for p in bag[g.nodes.get_loc("G")]] == [["P", "A", "G"], ["P", "B", "G"]]
    one = rp.diversified_paths(g, f, [g.nodes.get_loc("P")], [g.nodes.get_loc("G")], rp.PathParams(eps_c=1e-12, n_paths=1))
    assert [path_names(g, p) for p in one[g.nodes.get_loc("G")]] == [["P", "A", "G"]]


def test_diversification_prunes_superset_path():
    g = graph_of([("P", 1, "A"), ("A", 1, "G"), ("A", 1, "B"), ("B", 1, "G"), ("P", 1, "B")])
    f = flows(g, {("P", "A"): 10.0, ("A", "G"): 1.0, ("A", "B"): 10.0, ("B", "G"): 0.9, ("P", "B"): 0.1})
    params = rp.PathParams(eps_c=1e-12)
    # costs: PAG 1.1 -> after one penalty 2.2; PABG 1.311 -> round 2 picks PABG; round 3 PAG (2.2 vs
    # 2.82); round 4 PABG (4.4 vs 2.82). P-A-B-G's node set contains P-A-G's: pruned.
    bag = rp.diversified_paths(g, f, [g.nodes.get_loc("P")], [g.nodes.get_loc("G")], params)
    assert [path_names(g, p) for p in bag[g.nodes.get_loc("G")]] == [["P", "A", "G"]]


def test_prune_paths_keeps_order_drops_duplicates_and_supersets():
    g = graph_of([("P", 1, "A"), ("A", 1, "G"), ("A", 1, "B"), ("B", 1, "G"), ("P", 1, "B")])
    e = g.edge_lookup()
    pag = (e["P", "A"], e["A", "G"])
    pbg = (e["P", "B"], e["B", "G"])
    pabg = (e["P", "A"], e["A", "B"], e["B", "G"])
    assert rp.prune_paths([pbg, pabg, pag, pbg], g.src, g.dst) == [pbg, pag]


def test_diversified_paths_many_targets_and_unreachable():
    g = graph_of([("P", 1, "A"), ("A", 1, "G1"), ("A", -1, "G2"), ("Q", 1, "G3")])
    f = np.ones(g.n_edges)
    bag = rp.diversified_paths(g, f, [g.nodes.get_loc("P")], [g.nodes.get_loc(x) for x in ["G1", "G2", "G3", "P"]])
    assert sorted(g.nodes[list(bag)]) == ["G1", "G2"]  # G3 unreachable, P is the start


# --- step 7: Algorithms 1 and 2 ------------------------------------------------------------------
@pytest.mark.parametrize("signs, label, budget, expected", [
    ([1, 1], "down", 1, True),  # knockdown through activations: down
    ([1, 1], "up", 1, False),
    ([-1], "up", 1, True),  # knockdown of an inhibitor: up
    ([1, -1, -1], "down", 1, True),
    ([0], "up", 1, True),  # one ambiguous edge: both signs reachable within budget 1
    ([0], "down", 1, True),
    ([0], "up", 0, False),  # over budget 0
    ([0, 1, 0], "down", 1, False),  # two ambiguous edges > 1
    ([0, 1, 0], "down", 2, True),
])
def test_sign_reachability(signs, label, budget, expected):
    assert rp.sign_reachability(signs, -1, label, budget) is expected


@pytest.mark.parametrize("signs, state, expected", [
    ([1], rp.STATE_LOW, True),  # off signal reaches a silent gene: floor effect
    ([1], rp.STATE_HIGH, False),
    ([-1], rp.STATE_HIGH, True),  # knockdown of a repressor turns the target on; saturated: ceiling
    ([-1], rp.STATE_LOW, False),
    ([0], rp.STATE_LOW, True),
    ([0], rp.STATE_HIGH, True),
    ([0], rp.STATE_MEDIUM, False),  # no boundary, never unchanged by Algorithm 2
    ([1], rp.STATE_UNKNOWN, False),
])
def test_sign_consistency(signs, state, expected):
    assert rp.sign_consistency(signs, 0, state) is expected


def test_predict_from_paths_rules():
    # one activation path: knockdown -> down; a silent target turns it into unchanged (floor)
    assert rp.predict_from_paths([[1, 1]], "CRISPRi", rp.STATE_MEDIUM) == ("down", 0)
    assert rp.predict_from_paths([[1, 1]], "CRISPRi", rp.STATE_LOW) == ("unchanged", 0)
    assert rp.predict_from_paths([[-1]], "CRISPRi", rp.STATE_HIGH) == ("unchanged", 0)  # ceiling
    assert rp.predict_from_paths([], "CRISPRi", rp.STATE_MEDIUM) == ("unchanged", None)
    # an ambiguous path abstains; majority of the other two (up, up) beats the cheapest (down)
    votes = [[1], [0], [-1], [-1, 1]]
    assert rp.predict_from_paths(votes, "CRISPRi", rp.STATE_MEDIUM, aggregation="majority") == ("up", 2)
    assert rp.predict_from_paths(votes, "CRISPRi", rp.STATE_MEDIUM, aggregation="first") == ("down", 0)


# --- the whole pipeline on a hand-made graph -----------------------------------------------------
def test_reference_paths_for_items_end_to_end():
    chain = [("P", 1, "C1"), ("C1", 1, "C2"), ("C2", 1, "C3"), ("C3", 1, "C4"), ("C4", 1, "G4")]
    g = graph_of([("P", 1, "A"), ("A", 1, "G1"), ("P", 1, "B"), ("B", -1, "G2"), ("A", 0, "G3")] + chain)
    basal = pd.DataFrame({"K562": {"P": 5.0, "A": 5.0, "B": 5.0, "G1": 0.0, "G2": 9.0, "G3": 0.0}})
    thresholds = pd.DataFrame({"tau_low": [1.0], "tau_high": [8.0]}, index=["K562"])
    items = pd.DataFrame([
        ("P", "G1", "down"), ("P", "G1", "up"), ("P", "G1", "unchanged"),  # G1 silent
        ("P", "G2", "up"), ("P", "G2", "down"), ("P", "G2", "unchanged"),  # G2 saturated
        ("P", "G3", "up"), ("P", "G3", "down"), ("P", "G3", "unchanged"),  # ambiguous edge
        ("P", "G4", "down"), ("Z", "G1", "down"),  # 5 hops away; perturbation not in the graph
    ], columns=["perturbation", "gene", "label"])
    items["cell"], items["perturbation_type"] = "K562", "CRISPRi"
    out = rp.reference_paths_for_items(items, g, basal, thresholds)
    n_ref = out["n_reference_paths"].tolist()
    # P-A-G1 (+,+): knockdown gives down; the off signal meets a silent G1: unchanged also explained
    # P-B-G2 (+,-): up; the on signal meets a saturated G2: unchanged explained (ceiling)
    # P-A-G3 (+,0): both signs within budget 1; G3 silent and {0,1} reachable: unchanged too
    assert n_ref == [1, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0]
    assert out["n_candidate_paths"].tolist() == [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0]
    assert json.loads(out.loc[0, "reference_paths"]) == [[["P", 1, "A", "OmniPath"], ["A", 1, "G1", "OmniPath"]]]
    assert rp.paths_from_json(out.loc[3, "reference_paths"]) == [[("P", 1, "B"), ("B", -1, "G2")]]
    assert out["gene_state"].tolist()[:4] == [rp.STATE_LOW] * 3 + [rp.STATE_HIGH]


def test_cell_thresholds_from_items():
    items = pd.DataFrame({"cell": "K562", "gene": ["a", "b", "c", "d", "e", "f"],
                          "label": ["unchanged", "unchanged", "up", "down", "unchanged", "up"]})
    basal = pd.DataFrame({"K562": {"a": 0.0, "b": 1.0, "c": 3.0, "d": 4.0, "e": np.nan, "f": 5.0}})
    profile = pd.DataFrame({"K562": [0.0, 1.0, 2.0, 3.0, 4.0, 100.0]})
    th = rp.cell_thresholds(items, basal, profile)
    assert th.loc["K562", "tau_low"] == 1.0  # all background <= 1 < all signal
    assert th.loc["K562", "tau_high"] == 4.0  # active 2, 3, 4, 100: F - z peaks at 4
    assert th.loc["K562", "n_background"] == 2 and th.loc["K562", "n_signal"] == 3


def test_restrict_graph_keeps_paths_only():
    g = graph_of([("P", 1, "A"), ("A", 1, "G"), ("A", 1, "X"), ("Y", 1, "G"), ("G", 1, "Z")])
    sub = rp.restrict_graph(g, ["P"], ["G"], max_hops=4)
    assert sorted(map(tuple, sub.to_frame()[["source", "target"]].to_numpy())) == [("A", "G"), ("P", "A")]


# --- answer format and faithfulness --------------------------------------------------------------
def test_parse_response_strict():
    text = rp.format_response("KD of P lowers A.", "down", [("P", 1, "A"), ("A", 1, "G")])
    assert rp.parse_response(text) == ("KD of P lowers A.", "down", [("P", 1, "A"), ("A", 1, "G")])
    ok = "<thinking>x</thinking>\n<answer> Up </answer><triplets>\n(P, -1, B)\n\n(B, 0, G)\n</triplets>\n"
    assert rp.parse_response(ok)[1:] == ("up", [("P", -1, "B"), ("B", 0, "G")])
    empty = "<thinking>x</thinking><answer>unchanged</answer><triplets></triplets>"
    assert rp.parse_response(empty)[2] == []
    bad = {
        "<answer>up</answer><triplets></triplets>": "exactly one <thinking>",
        "<thinking>a</thinking><answer>up</answer><answer>up</answer><triplets></triplets>": "exactly one <answer>",
        "<thinking>a</thinking><answer>maybe</answer><triplets></triplets>": "answer must be one of",
        "<thinking>a</thinking><answer>up</answer><triplets>P activates G</triplets>": "not a .SOURCE, SIGN, TARGET. triplet",
        "<thinking>a</thinking><answer>up</answer><triplets>(P, +, G)</triplets>": "not a .SOURCE, SIGN, TARGET. triplet",
        "So: <thinking>a</thinking><answer>up</answer><triplets></triplets>": "text outside",
        "<answer>up</answer><thinking>a</thinking><triplets></triplets>": "order",
    }
    for text, message in bad.items():
        with pytest.raises(rp.ResponseFormatError, match=message):
            rp.parse_response(text)


def test_edge_recall_signs_compared():
    ref = [[("P", 1, "A"), ("A", 1, "G")], [("P", -1, "B"), ("B", 0, "G")]]
    assert rp.edge_recall([("P", 1, "A"), ("A", 1, "G"), ("P", -1, "B"), ("B", 1, "G")], ref) == 1.0
    assert rp.edge_recall([("P", -1, "A"), ("a", 1, "g")], ref) == 0.25  # wrong sign on P-A; case-insensitive
    assert rp.edge_recall([], ref) == 0.0
    assert np.isnan(rp.edge_recall([("P", 1, "A")], []))


def test_path_connectivity():
    assert rp.path_connectivity([("A", 1, "G"), ("P", 1, "A")], ["P"], "G") == 1.0
    assert rp.path_connectivity([("P", 1, "A"), ("B", 1, "G")], ["P"], "G") == 0.0  # broken chain
    assert rp.path_connectivity([("G", 1, "P")], ["P"], "G") == 0.0  # direction matters
    assert rp.path_connectivity([], ["P"], "G") == 0.0


def test_go_similarity_idf_cosine():
    sets = {"t1": ["A", "B"], "t2": ["B", "C"], "t3": ["A", "B", "C", "D"]}
    prof = rp.GOProfiles.from_gene_sets(sets)
    # 4 annotated genes: idf t1 = t2 = log 2, t3 = log 1 = 0 (a term of every gene carries nothing)
    assert np.allclose(prof.idf, [np.log(2), np.log(2), 0.0])
    ref = [[("P", 1, "A"), ("A", 1, "G")]]
    assert rp.go_similarity([("P", 1, "A"), ("A", 1, "G")], ref, ["P"], "G", prof) == 1.0
    # A = (l2, 0, 0), C = (0, l2, 0): orthogonal; B = (l2, l2, 0): cosine 1/sqrt(2) with A
    assert rp.go_similarity([("P", 1, "C"), ("C", 1, "G")], ref, ["P"], "G", prof) == 0.0
    assert rp.go_similarity([("P", 1, "B"), ("B", 1, "G")], ref, ["P"], "G", prof) == pytest.approx(1 / np.sqrt(2))
    assert rp.go_similarity([], ref, ["P"], "G", prof) == 0.0
    assert rp.go_similarity([("P", 1, "G")], [[("P", 1, "G")]], ["P"], "G", prof) == 1.0  # direct edge both
    assert np.isnan(rp.go_similarity([("P", 1, "G")], [], ["P"], "G", prof))


def test_balanced_accuracy_items_mean():
    truth = ["up", "up", "up", "down", "unchanged", "unchanged"]
    pred = ["up", "down", "up", "down", "up", "unchanged"]
    per_item = rp.balanced_accuracy_items(truth, pred)
    # recalls: up 2/3, down 1, unchanged 1/2 -> (2/3 + 1 + 1/2) / 3
    assert per_item.mean() == pytest.approx((2 / 3 + 1 + 0.5) / 3)
    from sklearn.metrics import balanced_accuracy_score
    assert per_item.mean() == pytest.approx(balanced_accuracy_score(truth, pred))
    assert np.allclose(rp.balanced_accuracy_items(truth, truth), 1.0)  # perfect: no spread, CI [1, 1]
    # influence values BA + N / (K n_k) (correct - recall_k): up n=3 recall 2/3, down n=1 recall 1,
    # unchanged n=2 recall 1/2
    ba = (2 / 3 + 1 + 0.5) / 3
    expected = [ba + 2 / 9, ba - 4 / 9, ba + 2 / 9, ba, ba - 0.5, ba + 0.5]
    assert np.allclose(per_item, expected)
