"""The results model: the one rank rule, tiers from the tests, the lead, and the published JSON Schema."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from openpert.results.model import (
    competition_ranks,
    complete,
    is_complete,
    json_schema,
)

REPO = Path(__file__).resolve().parents[3]


def test_ties_share_the_competition_rank_and_a_missing_score_is_unranked() -> None:
    assert competition_ranks([0.5, None, 0.5, 0.2, math.nan, 0.7]) == [2, None, 2, 4, None, 1]
    assert competition_ranks([]) == [] and competition_ranks([None]) == [None]


def _run() -> dict[str, Any]:
    """One dataset where ``b`` and ``c`` tie, ``na`` does not address it, ``bad`` failed; a positive control."""
    methods = [{"id": i, "type": "method"} for i in ("a", "b", "c", "na", "bad")]
    methods += [{"id": "pos", "type": "control_method", "control": "positive"},
                {"id": "base", "type": "control_method", "control": "baseline"}]
    dataset_scores = [{"dataset_id": "d", "method_id": m, "score": s, "status": st} for m, s, st in (
        ("a", 0.9, "succeeded"), ("b", 0.5, "succeeded"), ("c", 0.5, "succeeded"), ("na", None, "not_applicable"),
        ("bad", 0.0, "failed"), ("pos", 1.0, "succeeded"), ("base", 0.2, "succeeded"))]
    overall = [{"method_id": r["method_id"], "score": r["score"],
                "status": "failed" if r["status"] == "failed" else "succeeded",
                # Ranks of the older rule: a method without a score last, controls ranked too.
                "rank": 7 if r["score"] is None else 1} for r in dataset_scores]
    return {"schema_version": 1, "methods": methods, "datasets": [{"dataset_id": "d"}], "metrics": [{"id": "m"}],
            "dataset_scores": dataset_scores, "overall": overall, "scores": [], "comparisons": [], "failures": []}


def test_one_rule_ranks_every_table() -> None:
    data = complete(_run())
    expected = {"a": 1, "b": 2, "c": 2, "base": 4, "bad": 5, "na": None, "pos": None}
    assert {o["method_id"]: o["rank"] for o in data["overall"]} == expected
    assert {s["method_id"]: s["rank"] for s in data["dataset_scores"]} == expected
    assert is_complete(data) and not is_complete(_run())
    assert data["schema_version"] == 2 and "unranked" in data["rank_rule"]


def test_a_not_applicable_method_is_unranked_on_that_dataset_even_with_a_score() -> None:
    run = _run()
    run["dataset_scores"][3]["score"] = 0.95  # a stray score: the status, not the number, decides
    assert next(s for s in complete(run)["dataset_scores"] if s["method_id"] == "na")["rank"] is None


def test_tiers_follow_the_tests() -> None:
    data = {
        "datasets": [{"dataset_id": "d"}],
        "metrics": [{"id": "m1"}, {"id": "m2"}],
        "methods": [{"id": i, "type": "method"} for i in ("a", "b", "c", "e", "f")],
        "scores": [{"dataset_id": "d", "method_id": i, "metric_id": m, "raw": 1.0, "scaled": 0.5}
                   for i in ("a", "b", "c", "f") for m in ("m1", "m2")],
        "comparisons": [
            {"dataset_id": "d", "metric_id": "m1", "method_id": "b", "best_method_id": "a", "p_value": 0.3, "significant": False},
            {"dataset_id": "d", "metric_id": "m2", "method_id": "b", "best_method_id": "a", "p_value": 0.01, "significant": True},
            {"dataset_id": "d", "metric_id": "m1", "method_id": "c", "best_method_id": "a", "p_value": 0.5, "significant": False},
            {"dataset_id": "d", "metric_id": "m2", "method_id": "c", "best_method_id": "a", "p_value": 0.2},
            {"dataset_id": "d", "metric_id": "m1", "method_id": "f", "best_method_id": "a", "p_value": 0.001},
            {"dataset_id": "d", "metric_id": "m2", "method_id": "f", "best_method_id": "a", "p_value": 0.001},
        ],
    }
    standings = {s["method_id"]: s for s in complete(data)["standings"]}
    # a is the best, c never differs from it (significance from p when the flag is absent), b once,
    # e has no value where the others were tested, f is worse everywhere.
    assert {m: s["tier"] for m, s in standings.items()} == {"a": "top", "b": "some", "c": "top", "e": "all", "f": "all"}
    assert (standings["b"]["top_group"], standings["b"]["n_tests"]) == (1, 2)


def test_a_metric_mean_counts_a_failure_as_zero_and_leaves_out_what_a_method_does_not_address() -> None:
    data = {
        "datasets": [{"dataset_id": "d1"}, {"dataset_id": "d2"}],
        "metrics": [{"id": "h", "component": "hc"}, {"id": "x", "component": "xc"}],
        "methods": [{"id": "a", "type": "method"}, {"id": "c", "type": "method"}],
        "scores": [{"dataset_id": d, "method_id": "a", "metric_id": m, "raw": 1.0, "scaled": 1.4}
                   for d in ("d1", "d2") for m in ("h", "x")]
        + [{"dataset_id": "d1", "method_id": "c", "metric_id": "h", "raw": 0.3, "scaled": 0.3}],
        "failures": [{"dataset_id": "d2", "method_id": "c", "stage": "metric", "component": "hc"}],
    }
    standings = {s["method_id"]: s for s in complete(data)["standings"]}
    assert standings["a"]["metric_scores"] == {"h": 1.0, "x": 1.0}  # clipped to 1
    assert standings["c"]["metric_scores"]["h"] == pytest.approx(0.15)  # 0.3 and a failed job's 0
    assert standings["c"]["metric_scores"]["x"] is None and standings["c"]["metric_failed"] == {"h": ["d2"], "x": []}


def test_the_lead_is_the_top_ranked_method_against_the_runner_up() -> None:
    data = complete({
        "datasets": [{"dataset_id": "d"}], "metrics": [{"id": "h"}], "headline_metrics": ["h"],
        "methods": [{"id": "pos", "type": "control_method", "control": "positive"}]
        + [{"id": i, "type": "method"} for i in ("a", "b")],
        "scores": [{"dataset_id": "d", "method_id": i, "metric_id": "h", "raw": v, "scaled": v}
                   for i, v in (("a", 0.8), ("b", 0.6), ("pos", 1.0))],
        "overall": [{"method_id": "pos", "score": 1.0}, {"method_id": "a", "score": 0.8}, {"method_id": "b", "score": 0.6}],
        "comparisons": [{"dataset_id": "d", "metric_id": "h", "method_id": "b", "best_method_id": "a",
                         "p_value": 0.01, "significant": True}],
    })
    # The positive control has the highest score but never ranks, so never leads.
    assert data["lead"] == {"top_method_id": "a", "top_score": 0.8, "runner_up_method_id": "b",
                            "margin": pytest.approx(0.2), "significant": 1, "compared": 1}
    assert complete({"methods": [], "overall": []})["lead"] is None


def test_the_published_schema_is_the_models() -> None:
    published = json.loads((REPO / "docs" / "results_schema.json").read_text(encoding="utf-8"))
    assert published == json_schema(), ("docs/results_schema.json is out of date: regenerate it with "
                                        "openpert.results.model.write_json_schema")


def test_a_real_run_validates_against_the_schema_and_a_broken_one_does_not(fixture_runs) -> None:
    _, mixed, out, _ = fixture_runs
    written = json.loads((out / "results.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(json_schema())
    validator.validate(written)
    assert is_complete(written) and any(o["rank"] is None for o in written["overall"])
    broken = dict(written, overall=[dict(o, rank="first") for o in written["overall"]])
    assert not validator.is_valid(broken)
    assert not validator.is_valid({k: v for k, v in written.items() if k != "standings"})
