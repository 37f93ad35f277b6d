"""Tests of biome_bench_lib.answer_extraction: reasoning blocks, relation labels, judge and coverage answers.

The relation labels are checked on a table of tricky answers. Expected labels follow the reference
evaluation's rules (extract_relation): the last line that is exactly a label (or ends in ": <label>")
wins, else the last label anywhere in the text; case-folded, markdown bold, backticks and think tags
removed; a label inside a longer word does not count; no label means unparseable (None), which
scores as wrong.
"""

from __future__ import annotations

import numpy as np
import pytest
from biome_bench_lib.answer_extraction import (
    extract_json_object,
    extract_relation,
    normalize_answer,
    parse_judge_answer,
    parse_kg_answer,
    strip_think,
)
from biome_bench_lib.vocabulary import RELATIONS

TABLE = [
    # plain and case
    ("activates", "activates"),
    ("Leads_To", "leads_to"),
    ("ANSWER: DECREASES_LEVEL", "decreases_level"),
    # markdown and quotes
    ("**inhibits**", "inhibits"),
    ("**Answer:** binds", "binds"),
    ("Relation: `phosphorylates`.", "phosphorylates"),
    ("'dissociates_from'", "dissociates_from"),
    ("- **Relation**: upregulates_expression", "upregulates_expression"),
    # trailing explanations
    ("leads_to\n\nExplanation: the source activates the target.", "leads_to"),
    ("The relation is upregulates_expression because the source upregulates the target.", "upregulates_expression"),
    ("activates, not inhibits", "inhibits"),
    ("relation: converts_to (substrate to product)", "converts_to"),
    ("**Relation:** produces\n\nThe enzyme makes the product.", "produces"),
    # labels inside other words never count
    ("downregulates", None),
    ("inactivates", None),
    ("The target becomes dephosphorylated.", None),
    ("It dephosphorylates the target.", "dephosphorylates"),
    ("X upregulates_expression of Y", "upregulates_expression"),  # not 'regulates'
    ("misregulates_levels", None),
    ("upregulates_expressions", None),
    # spaces instead of underscores are not labels
    ("leads to", None),
    ("increases level", None),
    # think blocks: the tags go, their content stays
    ("<think>It could be activates or inhibits.</think>\ninhibits", "inhibits"),
    ("<think>maybe activates</think>", "activates"),
    ("<think>\nactivates\n</think>\n\nThe relation is **binds**.", "activates"),  # a label line beats prose
    ("<THINK>hmm</THINK>\n\n**regulates**", "regulates"),
    # nothing to read
    ("", None),
    (None, None),
    ("I cannot determine the relation.", None),
]


@pytest.mark.parametrize("answer, expected", TABLE)
def test_extract_relation_table(answer, expected):
    assert extract_relation(answer) == expected


def test_every_label_extracts_itself_in_every_dress():
    for label in RELATIONS:
        for dressed in (label, label.upper(), f"**{label}**", f"`{label}`", f"Answer: {label}.", f"<think>x</think>\n{label}"):
            assert extract_relation(dressed) == label, dressed


def test_strip_think():
    assert strip_think("<think>a\nb</think>\nFinal text.") == "Final text."
    assert strip_think("<think>never closed") == ""
    assert strip_think(None) == ""


def test_normalize_answer_keeps_lines_and_think_content():
    assert normalize_answer("  **Answer:**   `Binds`\n<think>x</think>") == "answer: binds \n x"  # lines are kept, not stripped one by one


def test_judge_and_kg_answers_are_parsed_strictly():
    fenced = '<think>let me see {"scores": 1}</think>\n```json\n{"critique": "ok", "scores": {"phenotype_coverage": 4, ' \
             '"causal_reasoning": "5", "factuality": 9, "hallucination": 3.0}}\n```'
    parsed = parse_judge_answer(fenced)
    assert parsed["phenotype_coverage"] == 4 and parsed["causal_reasoning"] == 5 and parsed["hallucination"] == 3
    assert np.isnan(parsed["factuality"])  # outside 1-5
    assert parse_judge_answer("The answer is good, 5/5.") is None
    assert parse_judge_answer('{"scores": {"factuality": 0}}') is None
    assert parse_kg_answer('{"supported_relation_ids": [0, "2", 2, 7, -1, 1.5, "x"]}', 5) == [0, 2]
    assert parse_kg_answer('{"reasoning": "none"}', 5) is None


def test_extract_json_object_skips_what_is_not_an_object():
    assert extract_json_object('Here: [1, 2] then {bad} then {"a": {"b": 1}} and {"c": 2}') == {"a": {"b": 1}}
    assert extract_json_object("no braces") is None
    assert extract_json_object(None) is None
    assert parse_judge_answer('{"factuality": true, "hallucination": "4"}')["hallucination"] == 4  # top-level scores
