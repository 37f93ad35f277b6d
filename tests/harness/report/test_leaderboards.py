"""Leaderboard rows: metric scores of a metric a method does not address, headline-only groups, the lead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openpert.report.leaderboards import overview_rows
from openpert.report.task_results import TaskResults
from openpert.results.model import BEST, TIED, WORSE


def _results(**extra: Any) -> TaskResults:
    """Two datasets, a headline metric ``h`` and a diagnostic ``x``; ``a`` best, ``b`` second, ``c`` text-free."""
    scores = []
    for did in ("d1", "d2"):
        for mid, scaled in (("a", 0.8), ("b", 0.6), ("c", 0.3)):
            scores.append({"dataset_id": did, "method_id": mid, "metric_id": "h", "raw": scaled, "scaled": scaled})
            # c does not address x (no row at all, and no failure): it must not read as 0.
            if mid != "c":
                scores.append({"dataset_id": did, "method_id": mid, "metric_id": "x", "raw": scaled, "scaled": scaled})
    data = {
        "datasets": [{"dataset_id": "d1"}, {"dataset_id": "d2"}],
        "metrics": [{"id": "h"}, {"id": "x"}],
        "headline_metrics": ["h"],
        "methods": [{"id": i, "type": "method"} for i in ("a", "b", "c")],
        "scores": scores,
        "overall": [{"method_id": "a", "score": 0.8}, {"method_id": "b", "score": 0.6}, {"method_id": "c", "score": 0.3}],
        "comparisons": [
            # Headline: b is significantly worse than a on d1, not on d2.
            {"dataset_id": "d1", "metric_id": "h", "method_id": "b", "best_method_id": "a", "p_value": 0.01,
             "significant": True},
            {"dataset_id": "d2", "metric_id": "h", "method_id": "b", "best_method_id": "a", "p_value": 0.4,
             "significant": False},
            # Diagnostic: c loses everywhere; these tests must not count in any group.
            {"dataset_id": "d1", "metric_id": "x", "method_id": "b", "best_method_id": "a", "p_value": 0.001,
             "significant": True},
            {"dataset_id": "d2", "metric_id": "x", "method_id": "b", "best_method_id": "a", "p_value": 0.001,
             "significant": True},
        ],
    }
    data.update(extra)
    return TaskResults(data, Path("."))


def test_a_metric_a_method_does_not_address_has_no_score() -> None:
    rows = {r.method["id"]: r for r in overview_rows(_results())}
    assert rows["c"].metric_scores["x"] is None
    assert rows["a"].metric_scores["x"] == pytest.approx(0.8)
    assert rows["c"].metric_scores["h"] == pytest.approx(0.3)


def test_a_failed_job_still_counts_as_zero() -> None:
    failures = [{"dataset_id": "d2", "method_id": "c", "stage": "method", "exit_code": 1, "reason": "boom"}]
    scores = [s for s in _results().data["scores"] if (s["dataset_id"], s["method_id"]) != ("d2", "c")]
    results = _results(failures=failures, scores=scores, dataset_scores=[
        {"dataset_id": "d2", "method_id": "c", "score": 0.0, "status": "failed"}])
    rows = {r.method["id"]: r for r in overview_rows(results)}
    # h: 0.3 on d1, 0 for the failure on d2; x: never addressed on d1, failed on d2 -> 0.
    assert rows["c"].metric_scores["h"] == pytest.approx(0.15)
    assert rows["c"].metric_scores["x"] == pytest.approx(0.0)


def test_top_group_counts_headline_tests_only() -> None:
    results = _results()
    assert results.headline_tested_pairs() == [("d1", "h"), ("d2", "h")]
    rows = {r.method["id"]: r for r in overview_rows(results)}
    assert [t.outcome for t in rows["b"].tests] == [WORSE, TIED]
    assert (rows["b"].top_group, rows["b"].n_tests) == (1, 2)
    assert [t.outcome for t in rows["a"].tests] == [BEST, BEST]
    assert rows["b"].tier == "some"


def test_lead_gives_margin_and_significant_tests() -> None:
    top = _results().lead
    assert top is not None and (top.top_method_id, top.runner_up_method_id) == ("a", "b")
    assert top.margin == pytest.approx(0.2)
    assert (top.significant, top.compared) == (1, 2)


def test_lead_without_scores_or_runner_up() -> None:
    assert _results(overall=[]).lead is None
    alone = _results(methods=[{"id": "a", "type": "method"}], overall=[{"method_id": "a", "score": 0.8}]).lead
    assert alone is not None and alone.runner_up_method_id is None and alone.margin is None
