"""The relation label extraction of BIOME-Bench on a table of tricky answers.

Expected labels follow the reference evaluation's rules (biome_bench_lib.biome.extract_relation): the last
line that is exactly a label (or ends in ": <label>") wins, else the last label anywhere in the text;
case-folded, markdown bold, backticks and think tags removed; a label inside a longer word does not
count; no label means unparseable (None), which scores as wrong.
"""

from __future__ import annotations

import pytest
from biome_bench_lib.biome import RELATIONS, extract_relation, relation_scores

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


def test_unparseable_answers_are_wrong():
    gold = ["activates", "inhibits", "binds"]
    answers = ["activates", "I do not know", "leads to"]
    scores = relation_scores(gold, [extract_relation(a) for a in answers])
    assert scores["n_unparseable"] == 2
    assert scores["accuracy"] == pytest.approx(1 / 3)
    assert list(scores["correct"]) == [1.0, 0.0, 0.0]
