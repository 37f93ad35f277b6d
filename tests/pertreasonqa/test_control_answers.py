"""Answers that model nothing (the random and adversarial controls): nearby edges, graph paths, copies."""

from __future__ import annotations

import pandas as pd
import pytest
from pertreasonqa_lib.control_answers import graph_paths, nearby_edges, nearest_training_items, shortest_hop_path
from toy_graphs import drug_graph, graph_of

#: P reaches G by P -> A -> G, P -| B -> G and P -> A -> B -> G; X hangs off A and leads nowhere near G.
GRAPH = [("P", 1, "A"), ("A", 1, "G"), ("P", -1, "B"), ("B", 1, "G"), ("A", 1, "B"), ("A", 1, "X"), ("X", 1, "Y")]


def test_nearby_edges_are_the_edges_of_walks_to_the_gene():
    got = set(nearby_edges(graph_of(GRAPH), "P", "G"))
    assert got == {("P", 1, "A"), ("A", 1, "G"), ("P", -1, "B"), ("B", 1, "G"), ("A", 1, "B")}
    assert set(nearby_edges(graph_of(GRAPH), "P", "G", max_hops=1)) == set()
    assert nearby_edges(graph_of(GRAPH), "NOT_A_NODE", "G") == []


def test_graph_paths_enumerate_simple_paths_within_the_hop_limit():
    paths = graph_paths(graph_of(GRAPH), "P", "G")
    assert sorted(paths) == sorted([(("P", 1, "A"), ("A", 1, "G")), (("P", -1, "B"), ("B", 1, "G")),
                                    (("P", 1, "A"), ("A", 1, "B"), ("B", 1, "G"))])
    assert len(graph_paths(graph_of(GRAPH), "P", "G", max_hops=2)) == 2
    # a compound's paths start at the compound, through its drug-target edges
    assert graph_paths(drug_graph(), "D", "E") == [(("D", 1, "T2"), ("T2", 1, "B"), ("B", 1, "C"), ("C", 1, "E"))]


def test_shortest_hop_path_ignores_everything_but_hops():
    assert shortest_hop_path(graph_of(GRAPH), "P", "G") == [("P", 1, "A"), ("A", 1, "G")]
    assert shortest_hop_path(graph_of(GRAPH), "P", "Y") == [("P", 1, "A"), ("A", 1, "X"), ("X", 1, "Y")]
    assert shortest_hop_path(graph_of(GRAPH), "P", "Y", max_hops=2) == []
    assert shortest_hop_path(graph_of(GRAPH), "G", "P") == []


def test_nearest_training_item_same_gene_nearest_perturbation():
    graph = graph_of([("P", 1, "A"), ("Q", 1, "A"), ("R", 1, "S"), ("S", 1, "T"), ("T", 1, "U"), ("U", 1, "P")])
    train = pd.DataFrame({"perturbation": ["R", "Q", "Q", "R"], "gene": ["G", "G", "H", "Z"],
                          "n_reference_paths": [1, 0, 1, 1]}, index=["r_g", "q_g", "q_h", "r_z"])
    test = pd.DataFrame({"perturbation": ["P", "P", "P"], "gene": ["G", "H", "W"]}, index=["g", "h", "w"])
    chosen = nearest_training_items(train, test, graph)
    # G: Q is 2 undirected hops from P (via A), R is 4: Q wins although R's item has a reference path
    # W unseen: every item counts; of the nearest (Q, 2 hops) the one with a reference path wins the tie
    assert chosen.to_dict() == {"g": "q_g", "h": "q_h", "w": "q_h"}
    # A double perturbation is as near as its nearer gene; a name the graph lacks is beyond the hop
    # limit, and a test perturbation the graph lacks leaves every item tied (a reference path wins).
    train = pd.DataFrame({"perturbation": ["NOPE", "R+A", "S"], "gene": ["K"] * 3, "n_reference_paths": [1, 0, 1]},
                         index=["nope", "r_a", "s"])
    test = pd.DataFrame({"perturbation": ["P", "ABSENT"], "gene": ["K", "K"]}, index=["p", "absent"])
    assert nearest_training_items(train, test, graph).to_dict() == {"p": "r_a", "absent": "nope"}
    with pytest.raises(ValueError, match="no training item"):
        nearest_training_items(train.iloc[:0], test, graph)


def test_answers_on_one_graph_queried_many_times_are_those_of_a_fresh_graph():
    # The graph keeps what the queries share (node positions, out-edges, the last perturbation's
    # hop distances): whatever was asked before, each answer is the one a fresh graph gives.
    shared = graph_of(GRAPH)
    queries = [("P", "G", 3), ("P", "Y", 3), ("P", "G", 1), ("A", "G", 3), ("P", "B", 2), ("X", "G", 3), ("P", "Y", 2)]
    for pert, gene, hops in queries * 2:
        for answer in (nearby_edges, graph_paths, shortest_hop_path):
            assert answer(shared, pert, gene, hops) == answer(graph_of(GRAPH), pert, gene, hops), (answer.__name__, pert, gene, hops)
