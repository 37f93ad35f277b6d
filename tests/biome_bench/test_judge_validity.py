"""Tests of biome_bench_lib.judge_validity: corrupted references and the drop of the judge's scores."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from biome_bench_lib.judge_validity import perturb_mechanism, swappable_entities, validity_scores
from biome_bench_lib.vocabulary import JUDGE_DIMENSIONS


def test_perturbation_swaps_entities_and_inverts_relations_once():
    text = "SGK1 activates STAT3, and STAT3 increased MYCL expression. Activation of MYCL promotes CTSK; p-STAT3 is higher."
    perturbed, n_entities, n_words = perturb_mechanism(text, ["SGK1", "STAT3", "MYCL", "CTSK"])
    assert perturbed == ("STAT3 inhibits SGK1, and SGK1 decreased CTSK expression. Inhibition of CTSK suppresses MYCL; "
                         "p-SGK1 is lower.")
    assert n_entities == 7 and n_words == 5
    assert perturb_mechanism("Nothing to change here.", ["XYZ"]) == ("Nothing to change here.", 0, 0)


def test_swappable_entities_are_observed_then_graph_entities():
    triples = [{"source": "SGK1", "target": "STAT3"}, {"source": "STAT3", "target": "apoptosis"}]
    assert swappable_entities("MYCL (reduced), CTSK", triples) == ["MYCL", "CTSK", "SGK1", "STAT3", "STAT3", "apoptosis"]


def test_validity_scores_are_means_and_the_relative_drop():
    rewrite = pd.DataFrame({d: [5.0, 4.0] for d in JUDGE_DIMENSIONS}, index=["a", "b"])
    perturb = pd.DataFrame({d: [2.0, np.nan] for d in JUDGE_DIMENSIONS}, index=["a", "b"])
    perturb.loc["b", "factuality"] = 3.0
    values, per_item, per_dimension = validity_scores(rewrite, perturb)
    assert values["validity_rewrite_score"] == 4.5
    assert values["validity_perturb_score"] == pytest.approx((2.0 + 3.0) / 2)
    assert values["validity_relative_drop"] == pytest.approx(1 - 2.5 / 4.5)
    assert per_item.loc["b"].tolist() == pytest.approx([4.0, 3.0, 0.25])
    assert per_dimension["factuality"] == pytest.approx([4.5, 2.5, 1 - 2.5 / 4.5])
    assert per_dimension["hallucination"] == pytest.approx([4.5, 2.0, 1 - 2.0 / 4.5])
    zero = validity_scores(rewrite * np.nan, perturb)[0]
    assert np.isnan(zero["validity_relative_drop"])
