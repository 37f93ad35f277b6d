"""Paths and triplets as JSON (the task's files) and as the numbered lines of prompts (B.2.5)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from pertreasonqa_lib.path_serialisation import (
    parse_serialized_paths,
    path_triplets,
    paths_from_json,
    paths_to_json,
    serialize_paths,
    triplets_from_json,
    triplets_to_json,
    unique_triplets,
)
from pertreasonqa_lib.signed_graph import build_signed_graph


def small_graph():
    edges = pd.DataFrame({"source": ["P", "A", "P", "B"], "target": ["A", "G", "B", "G"], "sign": [1, -1, 0, 1],
                          "database": ["OmniPath", "TRRUST", "DoRothEA", "OmniPath"]})
    return build_signed_graph(edges)


def test_paths_json_round_trip_keeps_signs_and_drops_databases_on_read():
    g = small_graph()
    e = g.edge_lookup()
    paths = [(e["P", "A"], e["A", "G"]), (e["P", "B"], e["B", "G"])]
    text = paths_to_json(g, paths)
    assert json.loads(text)[0] == [["P", 1, "A", "OmniPath"], ["A", -1, "G", "TRRUST"]]
    assert paths_from_json(text) == [[("P", 1, "A"), ("A", -1, "G")], [("P", 0, "B"), ("B", 1, "G")]]
    assert path_triplets(g, paths[1]) == [["P", 0, "B"], ["B", 1, "G"]]
    assert paths_from_json("") == [] and paths_from_json("[]") == []


def test_triplets_json_and_errors_name_the_place():
    text = triplets_to_json([("P", 1, "A"), ["A", -1, "G", "ignored"]])
    assert text == '[["P",1,"A"],["A",-1,"G"]]'
    assert triplets_from_json(text) == [("P", 1, "A"), ("A", -1, "G")]
    with pytest.raises(ValueError, match="item 7: not valid JSON"):
        triplets_from_json("[[", "item 7")
    with pytest.raises(ValueError, match=r"item 7: \['P', 2, 'A'\] is not a \[source, sign"):
        triplets_from_json('[["P", 2, "A"]]', "item 7")
    with pytest.raises(ValueError, match="expected a JSON list of paths"):
        paths_from_json('{"P": 1}')


def test_unique_triplets_first_seen_order():
    paths = [[("P", 1, "A"), ("A", 1, "G")], [("P", 1, "A"), ("A", -1, "H")]]
    assert unique_triplets(paths) == [("P", 1, "A"), ("A", 1, "G"), ("A", -1, "H")]


def test_serialized_paths_breadth_first_and_parsed_back():
    long = [("P", 1, "A"), ("A", -1, "G")]
    short = [("P", 0, "G")]
    lines = serialize_paths([long, short], {"P": "high", "A": "medium"})
    # shorter paths first (upstream events before downstream ones); unknown states named
    assert lines == ["1. P [high] --(0)--> G [unknown]", "2. P [high] --(+1)--> A [medium] --(-1)--> G [unknown]"]
    parsed = parse_serialized_paths("Candidate paths:\n" + "\n".join(lines) + "\n3. not a path")
    assert parsed == [([("P", 0, "G")], {"P": "high", "G": "unknown"}),
                      ([("P", 1, "A"), ("A", -1, "G")], {"P": "high", "A": "medium", "G": "unknown"})]
