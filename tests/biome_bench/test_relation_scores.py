"""Tests of biome_bench_lib.relation_scores: Task A accuracy, macro-F1 and their bootstrap intervals."""

from __future__ import annotations

import numpy as np
import pytest
from biome_bench_lib.answer_extraction import extract_relation
from biome_bench_lib.relation_scores import macro_f1_bootstrap_ci, relation_scores
from biome_bench_lib.vocabulary import RELATIONS
from sklearn.metrics import f1_score


def test_relation_scores_match_sklearn():
    rng = np.random.default_rng(0)
    gold = list(rng.choice(RELATIONS[:6], size=300))
    pred = [g if rng.random() < 0.5 else (None if rng.random() < 0.3 else str(rng.choice(RELATIONS[:9]))) for g in gold]
    scores = relation_scores(gold, pred)
    as_text = [p if p is not None else "<unparseable>" for p in pred]
    present = sorted(set(gold))
    assert scores["accuracy"] == pytest.approx(np.mean([g == p for g, p in zip(gold, pred)]))
    assert scores["macro_f1"] == pytest.approx(f1_score(gold, as_text, labels=present, average="macro", zero_division=0))
    assert scores["macro_f1_all"] == pytest.approx(f1_score(gold, as_text, labels=list(RELATIONS), average="macro", zero_division=0))
    assert scores["n_unparseable"] == sum(p is None for p in pred)


def test_unparseable_answers_are_wrong():
    gold = ["activates", "inhibits", "binds"]
    answers = ["activates", "I do not know", "leads to"]
    scores = relation_scores(gold, [extract_relation(a) for a in answers])
    assert scores["n_unparseable"] == 2
    assert scores["accuracy"] == pytest.approx(1 / 3)
    assert list(scores["correct"]) == [1.0, 0.0, 0.0]


def test_gold_labels_must_be_relations_and_match_the_predictions():
    with pytest.raises(ValueError, match="gold labels outside the vocabulary"):
        relation_scores(["promotes"], ["activates"])
    with pytest.raises(ValueError, match="2 gold labels but 1 predictions"):
        relation_scores(["binds", "binds"], ["binds"])
    empty = relation_scores([], [])
    assert np.isnan(empty["accuracy"]) and np.isnan(empty["macro_f1"]) and empty["n_items"] == 0


def test_macro_f1_bootstrap_matches_a_plain_loop():
    rng = np.random.default_rng(1)
    gold = list(rng.choice(RELATIONS[:5], size=60))
    pred = [g if rng.random() < 0.6 else str(rng.choice(RELATIONS[:5])) for g in gold]
    ci = macro_f1_bootstrap_ci(gold, pred, n_boot=200, seed=7)
    draws = np.random.default_rng(7).integers(0, len(gold), size=(200, len(gold)))
    loop = [relation_scores([gold[i] for i in row], [pred[i] for i in row])["macro_f1"] for row in draws]
    assert ci["macro_f1"] == pytest.approx(tuple(np.percentile(loop, [2.5, 97.5])))
    point = relation_scores(gold, pred)["macro_f1"]
    assert ci["macro_f1"][0] <= point <= ci["macro_f1"][1]


def test_bootstrap_without_items_is_nan():
    ci = macro_f1_bootstrap_ci([], [])
    assert all(np.isnan(v) for pair in ci.values() for v in pair)
