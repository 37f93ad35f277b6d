"""perturbqa_lib.answer_parsing: rule-based parsing of answers, and scores from the parsed samples (A.3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from perturbqa_lib.answer_parsing import (
    ABSTAIN,
    parse_gene_set_description,
    parse_option_answer,
    parse_summer_answer,
    question_scores,
    sample_score,
)


def test_parse_answers():
    yes = "...the pathways overlap.\nYes. Knockdown of AARS2 results in differential expression of AAK1."
    no = "Based on the observed outcomes, it is unlikely that a CRISPRi knockdown of AARS2 in K562 cells will result in " \
         "differential expression of AAK1. Therefore, the answer is:\n\nNo. Knockdown of AARS2 does not impact AAK1.\n[End of Output]"
    unsure = "Final answer: There is insufficient evidence to determine how knockdown of ABCE1 affects CDK11A."
    both = "No. Knockdown of AARS2 does not impact AAK1. Yes. Knockdown of AARS2 results in differential expression of AAK1."
    assert parse_summer_answer(yes, "de", "AARS2", "AAK1") == 1
    assert parse_summer_answer(no, "de", "AARS2", "AAK1") == 0
    assert parse_summer_answer(unsure, "de", "ABCE1", "CDK11A") == ABSTAIN
    assert parse_summer_answer(both, "de", "AARS2", "AAK1") == ABSTAIN
    assert parse_summer_answer("gibberish", "de", "AARS2", "AAK1") == ABSTAIN
    up = "Increase. Knockdown of X results in an increase in expression of Y."
    assert parse_summer_answer(up, "dir", "X", "Y") == 1
    assert parse_option_answer("1) ... 4) Answer: B) Knockdown of the perturbed gene results in up-regulation of the gene of interest.", "dir") == 1
    assert parse_option_answer("4) Answer: A) Knockdown of the perturbed gene does not impact the gene of interest.", "de") == 0
    assert parse_option_answer("4) Answer: C) There is insufficient evidence", "de") == ABSTAIN


def test_parse_gene_set_description():
    text = ("1) Brief overview of gene set: The genes encode respiratory chain subunits.\n\n2) Upstream pathways may affect "
            "this gene set: TCA cycle changes.\n\n3) Name of gene set: Mitochondrial respiratory chain genes\n[End of Output]")
    parsed = parse_gene_set_description(text)
    assert parsed == {"description": "The genes encode respiratory chain subunits.", "name": "Mitochondrial respiratory chain genes"}
    assert parse_gene_set_description("nothing useful") == {"description": "", "name": ""}


def test_sample_score_drops_abstentions():
    assert sample_score([1, ABSTAIN, 0, 1]) == pytest.approx(2 / 3)
    assert np.isnan(sample_score([ABSTAIN, ABSTAIN, ABSTAIN]))


def test_question_scores_fall_back_on_the_gene_prevalence():
    labels = [[1, 1, ABSTAIN], [ABSTAIN, ABSTAIN], [ABSTAIN], [0, 1]]
    scores, stats = question_scores(labels, ["g1", "g2", "unseen", "g1"], pd.Series({"g1": 0.1, "g2": 0.4}), 0.25)
    assert scores.tolist() == pytest.approx([1.0, 0.4, 0.25, 0.5])
    assert stats == {"samples": 8, "abstained": 4, "fallback": 2}
