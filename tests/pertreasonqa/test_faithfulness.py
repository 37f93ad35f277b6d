"""Mechanistic faithfulness (section 2.4): edge recall, path connectivity, GO similarity, failure modes.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from pertreasonqa_lib.answer_parsing import format_response, parse_response
from pertreasonqa_lib.faithfulness import (
    GOProfiles,
    edge_recall,
    edge_scores,
    failure_modes,
    faithfulness_table,
    go_similarity,
    graph_signs,
    path_connectivity,
    path_coverage,
    predicted_paths,
    start_names,
)
from pertreasonqa_lib.path_serialisation import triplets_to_json
from pertreasonqa_lib.signed_graph import SignedGraph
from toy_graphs import graph_of


def test_edge_recall_signs_compared():
    ref = [[("P", 1, "A"), ("A", 1, "G")], [("P", -1, "B"), ("B", 0, "G")]]
    assert edge_recall([("P", 1, "A"), ("A", 1, "G"), ("P", -1, "B"), ("B", 1, "G")], ref) == 1.0
    assert edge_recall([("P", -1, "A"), ("a", 1, "g")], ref) == 0.25  # wrong sign on P-A; case-insensitive
    assert edge_recall([], ref) == 0.0
    assert np.isnan(edge_recall([("P", 1, "A")], []))


def test_edge_precision_punishes_lists_that_recall_forgives():
    ref = [[("P", 1, "A"), ("A", 1, "G")]]
    exact = edge_scores([("P", 1, "A"), ("A", 1, "G")], ref)
    assert exact == (1.0, 1.0, 1.0)
    # both signs of every edge plus two strangers: recall 1, precision 2/6, F1 = 2 * (1/3) / (4/3) = 0.5
    listed = [("P", 1, "A"), ("P", -1, "A"), ("A", 1, "G"), ("A", -1, "G"), ("X", 1, "Y"), ("P", 1, "G")]
    assert edge_scores(listed, ref) == pytest.approx((1 / 3, 1.0, 0.5))
    assert edge_scores([], ref) == (0.0, 0.0, 0.0)
    # a reference edge of unknown sign is recovered by either sign, and both signs are correct
    assert edge_scores([("B", 1, "G"), ("B", -1, "G")], [[("B", 0, "G")]]) == (1.0, 1.0, 1.0)


def test_predicted_paths_are_signed_simple_chains_within_the_hop_limit():
    trip = [("P", 1, "A"), ("A", 1, "G"), ("P", -1, "A"), ("A", 1, "B"), ("B", 1, "A"), ("B", 1, "G"), ("G", 1, "P")]
    paths = predicted_paths(trip, ["P"], "G", max_hops=4)
    assert sorted(paths) == sorted([(("P", 1, "A"), ("A", 1, "G")), (("P", -1, "A"), ("A", 1, "G")),
                                    (("P", 1, "A"), ("A", 1, "B"), ("B", 1, "G")),
                                    (("P", -1, "A"), ("A", 1, "B"), ("B", 1, "G"))])
    assert len(predicted_paths(trip, ["P"], "G", max_hops=2)) == 2  # the three-edge chains are too long
    assert len(predicted_paths(trip, ["P"], "G", limit=1)) == 2  # stops once it knows there are more than 1


def test_path_coverage_counts_whole_reference_paths():
    ref = [[("P", 1, "A"), ("A", 1, "G")], [("P", -1, "B"), ("B", -1, "G")]]
    both = [("P", 1, "A"), ("A", 1, "G"), ("P", -1, "B"), ("B", -1, "G")]
    assert path_coverage(both, ref, ["P"], "G") == 1.0
    assert path_coverage(both[:2], ref, ["P"], "G") == 0.5  # one of two reference paths
    assert path_coverage([*both, ("X", 1, "Y")], ref, ["P"], "G") == 1.0  # a piece off every chain is not a route
    # every reference pair but two wrong signs: edge recall 0.5, and the chains are wrong routes
    assert path_coverage([("P", 1, "A"), ("A", -1, "G"), ("P", -1, "B"), ("B", 1, "G")], ref, ["P"], "G") == 0.0
    # a route outside the reference bag makes the mechanism wrong, even with both references named
    assert path_coverage([*both, ("P", 1, "G")], ref, ["P"], "G") == 0.0
    assert path_coverage([*both, ("A", 1, "B")], ref, ["P"], "G") == 0.0  # P -> A -> B -| G
    # both signs of every edge: recall 1, and half the chain edges are wrong
    assert path_coverage([(u, s, v) for u, _, v in both for s in (1, -1)], ref, ["P"], "G") == 0.0
    # pieces that chain nothing from P to G cover nothing; no reference path -> NaN
    assert path_coverage([("A", 1, "G")], ref, ["P"], "G") == 0.0
    assert path_coverage([], ref, ["P"], "G") == 0.0
    assert np.isnan(path_coverage(both, [], ["P"], "G"))
    # an unknown-sign reference edge is matched by either sign
    assert path_coverage([("P", -1, "G")], [[("P", 0, "G")]], ["P"], "G") == 1.0
    # two reference paths that cross: their union also chains P -> A -> C -> D -> G, made of reference edges
    crossing = [[("P", 1, "A"), ("A", 1, "C"), ("C", 1, "G")], [("P", 1, "B"), ("B", 1, "C"), ("C", 1, "D"), ("D", 1, "G")]]
    union = [t for path in crossing for t in path]
    assert path_coverage(union, crossing, ["P"], "G") == 1.0
    assert path_coverage(union[:3], crossing, ["P"], "G") == 0.5


def test_path_connectivity_needs_graph_edges_and_an_unbroken_chain():
    edges = graph_signs(graph_of([("P", 1, "A"), ("A", 1, "G"), ("P", 1, "B"), ("B", 0, "G")]))
    assert path_connectivity([("A", 1, "G"), ("P", 1, "A")], ["P"], "G", edges) == 1.0
    assert path_connectivity([("p", 1, "b"), ("B", -1, "G")], ["P"], "G", edges) == 1.0  # ambiguous edge: any sign
    assert path_connectivity([("P", 1, "G")], ["P"], "G", edges) == 0.0  # an invented edge
    assert path_connectivity([("P", -1, "A"), ("A", 1, "G")], ["P"], "G", edges) == 0.0  # the graph's sign is +1
    assert path_connectivity([("P", 1, "A"), ("B", 0, "G")], ["P"], "G", edges) == 0.0  # broken chain
    assert path_connectivity([("P", 1, "A"), ("A", 1, "G"), ("P", 1, "B")], ["P"], "G", edges) == 0.0  # dangling piece
    assert path_connectivity([("G", 1, "P")], ["P"], "G", graph_signs(graph_of([("G", 1, "P")]))) == 0.0  # direction
    assert path_connectivity([], ["P"], "G", edges) == 0.0


def test_go_similarity_idf_cosine():
    sets = {"t1": ["A", "B"], "t2": ["B", "C"], "t3": ["A", "B", "C", "D"]}
    prof = GOProfiles.from_gene_sets(sets)
    # 4 annotated genes: idf t1 = t2 = log 2, t3 = log 1 = 0 (a term of every gene carries nothing)
    assert np.allclose(prof.idf, [np.log(2), np.log(2), 0.0])
    ref = [[("P", 1, "A"), ("A", 1, "G")]]
    assert go_similarity([("P", 1, "A"), ("A", 1, "G")], ref, ["P"], "G", prof) == 1.0
    # A = (l2, 0, 0), C = (0, l2, 0): orthogonal; B = (l2, l2, 0): cosine 1/sqrt(2) with A
    assert go_similarity([("P", 1, "C"), ("C", 1, "G")], ref, ["P"], "G", prof) == 0.0
    assert go_similarity([("P", 1, "B"), ("B", 1, "G")], ref, ["P"], "G", prof) == pytest.approx(1 / np.sqrt(2))
    assert go_similarity([], ref, ["P"], "G", prof) == 0.0
    assert go_similarity([("P", 1, "G")], [[("P", 1, "G")]], ["P"], "G", prof) == 1.0  # direct edge both
    assert np.isnan(go_similarity([("P", 1, "G")], [], ["P"], "G", prof))
    # A membership stored as integers (as a dataset file may hold it) profiles the same.
    stored = GOProfiles(genes=prof.genes, membership=prof.membership.astype(np.int8), idf=prof.idf)
    assert stored.membership.dtype == np.float64
    np.testing.assert_array_equal(stored.profile(["B", "c", "nope"]), prof.profile(["B", "c", "nope"]))
    np.testing.assert_array_equal(stored.profile(["B", "C"]), [np.log(2), 2 * np.log(2), 0.0])


def test_faithfulness_of_a_chemical_mechanism_starts_at_the_compound():
    reference = [[("ABT-199 (GDC-0199)", -1, "BCL2", "sim"), ("BCL2", -1, "BAX", "OmniPath")]]
    solution = pd.DataFrame({"perturbation": ["ABT-199 (GDC-0199)"], "perturbation_type": ["chemical"], "gene": ["BAX"],
                             "label": ["up"], "reference_paths": [json.dumps(reference)]}, index=["i"])
    text = format_response("x", "up", [("ABT-199 (GDC-0199)", -1, "BCL2"), ("BCL2", -1, "BAX")])
    _, answer, triplets = parse_response(text)
    prediction = pd.DataFrame({"answer": [answer], "triplets": [triplets_to_json(triplets)]}, index=["i"])
    graph = SignedGraph.from_frame(pd.DataFrame({
        "source": ["ABT-199 (GDC-0199)", "BCL2"], "target": ["BCL2", "BAX"], "sign": [-1, -1],
        "databases": ["sim", "OmniPath"], "interaction": ["drug_target", "regulation"]}))
    row = faithfulness_table(solution, prediction, graph).loc["i"]
    assert row["edge_recall"] == 1.0 and row["path_connectivity"] == 1.0 and row["path_coverage"] == 1.0
    # a chain that skips the compound is not connected, and recovers one of the two reference edges
    partial = pd.DataFrame({"answer": ["up"], "triplets": [triplets_to_json([("BCL2", -1, "BAX")])]}, index=["i"])
    row = faithfulness_table(solution, partial, graph).loc["i"]
    assert row["path_connectivity"] == 0.0 and row["edge_recall"] == 0.5 and row["path_coverage"] == 0.0
    assert row["edge_precision"] == 1.0 and row["edge_f1"] == pytest.approx(2 / 3)


def test_headline_path_coverage_pays_a_path_only_with_the_right_answer():
    """'Unchanged' with the plausible path earns headline credit only on the items labelled unchanged (Table 3's quadrants)."""
    path = [("P", 1, "A"), ("A", -1, "G")]
    items = ["up", "down", "unchanged"]
    solution = pd.DataFrame({"perturbation": "P", "perturbation_type": "CRISPRi", "gene": "G", "label": items,
                             "reference_paths": json.dumps([path])}, index=items)
    plausible = pd.DataFrame({"answer": "unchanged", "triplets": triplets_to_json(path)}, index=items)
    graph = SignedGraph.from_frame(pd.DataFrame({"source": ["P", "A"], "target": ["A", "G"], "sign": [1, -1],
                                                      "databases": ["OmniPath", "OmniPath"]}))
    table = faithfulness_table(solution, plausible, graph)
    assert table["path_coverage_any_answer"].tolist() == [1.0, 1.0, 1.0]
    assert table["path_coverage"].tolist() == [0.0, 0.0, 1.0]
    # a wrong path stays 0 even with the right answer
    wrong = pd.DataFrame({"answer": items, "triplets": triplets_to_json([("P", 1, "G")])}, index=items)
    assert faithfulness_table(solution, wrong, graph)["path_coverage"].tolist() == [0.0, 0.0, 0.0]
    right = pd.DataFrame({"answer": items, "triplets": triplets_to_json(path)}, index=items)
    assert faithfulness_table(solution, right, graph)["path_coverage"].tolist() == [1.0, 1.0, 1.0]


def test_start_names_compound_or_genes():
    assert start_names("ABT-199 (GDC-0199)", "chemical") == ["ABT-199 (GDC-0199)"]
    assert start_names("A+B", "CRISPRi") == ["A", "B"]


def test_failure_modes_need_chain_and_half_the_edges():
    # a: right answer, chained, recall 1 -> consistent; b: right answer, recall 0.25 -> right answer wrong reason;
    # c: wrong answer, chained, recall 0.5 -> wrong answer right reason; d: wrong answer, broken chain -> consistent;
    # e: no reference path -> not scored
    table = pd.DataFrame({"correct": [True, True, False, False, True], "has_reference": [True, True, True, True, False],
                          "edge_recall": [1.0, 0.25, 0.5, 1.0, np.nan], "path_connectivity": [1.0, 1.0, 1.0, 0.0, np.nan]},
                         index=list("abcde"))
    modes = failure_modes(table)
    assert list(modes.index) == list("abcd")
    assert modes["right_answer_wrong_reason"].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert modes["wrong_answer_right_reason"].tolist() == [0.0, 0.0, 1.0, 0.0]
    # a stricter threshold turns c's reason wrong
    assert failure_modes(table, edge_recall_threshold=0.6)["wrong_answer_right_reason"].sum() == 0.0
