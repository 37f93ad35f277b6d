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
    failure_modes,
    faithfulness_table,
    go_similarity,
    path_connectivity,
    start_names,
)
from pertreasonqa_lib.path_serialisation import triplets_to_json


def test_edge_recall_signs_compared():
    ref = [[("P", 1, "A"), ("A", 1, "G")], [("P", -1, "B"), ("B", 0, "G")]]
    assert edge_recall([("P", 1, "A"), ("A", 1, "G"), ("P", -1, "B"), ("B", 1, "G")], ref) == 1.0
    assert edge_recall([("P", -1, "A"), ("a", 1, "g")], ref) == 0.25  # wrong sign on P-A; case-insensitive
    assert edge_recall([], ref) == 0.0
    assert np.isnan(edge_recall([("P", 1, "A")], []))


def test_path_connectivity():
    assert path_connectivity([("A", 1, "G"), ("P", 1, "A")], ["P"], "G") == 1.0
    assert path_connectivity([("P", 1, "A"), ("B", 1, "G")], ["P"], "G") == 0.0  # broken chain
    assert path_connectivity([("G", 1, "P")], ["P"], "G") == 0.0  # direction matters
    assert path_connectivity([], ["P"], "G") == 0.0


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


def test_faithfulness_of_a_chemical_mechanism_starts_at_the_compound():
    reference = [[("ABT-199 (GDC-0199)", -1, "BCL2", "sim"), ("BCL2", -1, "BAX", "OmniPath")]]
    solution = pd.DataFrame({"perturbation": ["ABT-199 (GDC-0199)"], "perturbation_type": ["chemical"], "gene": ["BAX"],
                             "label": ["up"], "reference_paths": [json.dumps(reference)]}, index=["i"])
    text = format_response("x", "up", [("ABT-199 (GDC-0199)", -1, "BCL2"), ("BCL2", -1, "BAX")])
    _, answer, triplets = parse_response(text)
    prediction = pd.DataFrame({"answer": [answer], "triplets": [triplets_to_json(triplets)]}, index=["i"])
    row = faithfulness_table(solution, prediction).loc["i"]
    assert row["edge_recall"] == 1.0 and row["path_connectivity"] == 1.0
    # a chain that skips the compound is not connected, and recovers one of the two reference edges
    partial = pd.DataFrame({"answer": ["up"], "triplets": [triplets_to_json([("BCL2", -1, "BAX")])]}, index=["i"])
    row = faithfulness_table(solution, partial).loc["i"]
    assert row["path_connectivity"] == 0.0 and row["edge_recall"] == 0.5


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
