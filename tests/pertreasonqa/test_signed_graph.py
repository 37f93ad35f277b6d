"""The signed graph (appendix B.2.2, B.2.3): consensus signs, drug-target edges, start sets, hop distances.

Every expected value below is worked out by hand in the comments.
"""

from __future__ import annotations

import pandas as pd
import pytest
from pertreasonqa_lib.signed_graph import (
    SignedGraph,
    build_signed_graph,
    compound_targets,
    hop_distances,
    restrict_graph,
)
from toy_graphs import drug_graph, edges, graph_of


def test_build_signed_graph_consensus_and_provenance():
    df = pd.concat([
        edges([("A", 1, "G"), ("B", 1, "G"), ("C", 1, "G"), ("A", 1, "A")], "OmniPath"),
        edges([("A", 0, "G"), ("B", -1, "G"), ("C", -1, "G")], "TRRUST"),
        edges([("C", -1, "G"), ("D", 0, "G")], "DoRothEA"),
    ])
    g = build_signed_graph(df)
    frame = g.to_frame().set_index(["source", "target"])
    assert ("A", "A") not in frame.index  # self-loop dropped
    assert frame.loc[("A", "G"), "sign"] == 1  # +1 and an abstaining 0
    assert frame.loc[("A", "G"), "databases"] == "OmniPath;TRRUST"
    assert frame.loc[("B", "G"), "sign"] == 0  # +1 vs -1: tie -> ambiguous
    assert frame.loc[("C", "G"), "sign"] == -1  # +1 vs two -1
    assert frame.loc[("C", "G"), "databases"] == "DoRothEA;OmniPath;TRRUST"
    assert frame.loc[("D", "G"), "sign"] == 0  # no signed vote
    assert len(frame) == 4
    again = SignedGraph.from_frame(g.to_frame())
    assert again.to_frame().equals(g.to_frame())


def test_hop_distances_forward_reverse():
    g = graph_of([("P", 1, "A"), ("A", 1, "B"), ("B", 1, "C"), ("X", 1, "A")])
    p = g.nodes.get_loc("P")
    d = pd.Series(hop_distances(g, [p], 2), index=g.nodes)
    assert d.to_dict() == {"A": 1, "B": 2, "C": 3, "P": 0, "X": 3}  # 3 = beyond the limit of 2
    r = pd.Series(hop_distances(g, [g.nodes.get_loc("B")], 4, reverse=True), index=g.nodes)
    assert r["A"] == 1 and r["P"] == 2 and r["X"] == 2 and r["C"] == 5
    # Each direction's last answer is kept, read-only, and answers only the same start set and depth.
    again = hop_distances(g, [p], 2)
    assert again is hop_distances(g, [p], 2) and not again.flags.writeable and again.tolist() == d.tolist()
    assert hop_distances(g, [p], 1).tolist() == [1, 2, 2, 0, 2] and hop_distances(g, [g.nodes.get_loc("X")], 2)[p] == 3


def test_restrict_graph_keeps_paths_only():
    g = graph_of([("P", 1, "A"), ("A", 1, "G"), ("A", 1, "X"), ("Y", 1, "G"), ("G", 1, "Z")])
    sub = restrict_graph(g, ["P"], ["G"], max_hops=4)
    assert sorted(map(tuple, sub.to_frame()[["source", "target"]].to_numpy())) == [("A", "G"), ("P", "A")]


def test_drug_edges_round_trip_and_validation():
    g = drug_graph()
    frame = g.to_frame()
    assert frame.loc[frame["interaction"] == "drug_target", ["source", "target", "sign"]].values.tolist() == [
        ["D", "T1", -1], ["D", "T2", 1]]
    again = SignedGraph.from_frame(frame)
    assert again.drug_edge.sum() == 2 and again.to_frame().equals(frame)
    # a graph file without the column is all regulation
    assert not SignedGraph.from_frame(frame.drop(columns="interaction")).drug_edge.any()
    with pytest.raises(ValueError, match="compound 'D' is the target of an edge"):
        SignedGraph.from_frame(pd.concat([frame, pd.DataFrame([{"source": "A", "target": "D", "sign": 1, "databases": "x",
                                                                   "interaction": "regulation"}])]))
    with pytest.raises(ValueError, match="compound 'D' has a regulation edge"):
        SignedGraph.from_frame(pd.concat([frame, pd.DataFrame([{"source": "D", "target": "E", "sign": 1, "databases": "x",
                                                                   "interaction": "regulation"}])]))
    with pytest.raises(ValueError, match="interaction must be"):
        SignedGraph.from_frame(frame.assign(interaction="binds"))


def test_start_nodes_of_compounds_genes_and_combinations():
    g = drug_graph()
    assert sorted(g.nodes[g.start_nodes("D")]) == ["T1", "T2"]
    assert list(g.nodes[g.start_nodes("A")]) == ["A"]
    assert sorted(g.nodes[g.start_nodes("A+T2")]) == ["A", "T2"]
    assert g.start_nodes("NOT_A_NODE") is None
    assert compound_targets(g, "D") == [("T1", -1), ("T2", 1)] and compound_targets(g, "A") == []


def test_node_positions_are_the_index_positions():
    g = drug_graph()
    names = ["T2", "NOT_A_NODE", "D", "A", "T2"]
    assert g.node_positions(names).tolist() == g.nodes.get_indexer(names).tolist()
    assert g.node_positions([]).tolist() == []
