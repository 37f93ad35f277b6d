"""The website, its CSV downloads and ``openpert compare`` give every method the same rank.

The run has a tie, a failed method, a method that does not address one dataset and one that
addresses none; it is written without ranks (as an older harness would have left them), so that
every reader depends on the results model for them.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from openpert.report.formatting import MISSING
from openpert.report.leaderboard_html import dataset_table_view
from openpert.report.leaderboards import dataset_csv, overall_csv
from openpert.report.overview import overview_view
from openpert.report.paths import TaskPaths
from openpert.report.task_results import load_results
from openpert.results.archive import read_run
from openpert.results.compare import compare_runs

#: method -> (control role, score on d1, status on d1, score on d2, status on d2)
RUN = {
    "a": (None, 0.8, "succeeded", 0.8, "succeeded"),
    "b": (None, 0.8, "succeeded", 0.8, "succeeded"),  # ties with a everywhere
    "c": (None, 0.0, "failed", 0.4, "succeeded"),
    "n": (None, 0.6, "succeeded", None, "not_applicable"),
    "z": (None, None, "not_applicable", None, "not_applicable"),
    "base": ("baseline", 0.1, "succeeded", 0.1, "succeeded"),
    "pos": ("positive", 1.0, "succeeded", 1.0, "succeeded"),
}
#: What the one rank rule gives, per table.
EXPECTED = {
    "overall": {"a": 1, "b": 1, "n": 3, "c": 4, "base": 5, "z": None, "pos": None},
    "d1": {"a": 1, "b": 1, "n": 3, "base": 4, "c": 5, "z": None, "pos": None},
    "d2": {"a": 1, "b": 1, "c": 3, "base": 4, "n": None, "z": None, "pos": None},
}


def _results() -> dict[str, Any]:
    methods = [{"id": m, "label": m.upper(), "type": "control_method" if role else "method", "control": role}
               for m, (role, *_) in RUN.items()]
    dataset_scores, scores, overall = [], [], []
    for m, (_, s1, st1, s2, st2) in RUN.items():
        for did, score, status in (("d1", s1, st1), ("d2", s2, st2)):
            dataset_scores.append({"dataset_id": did, "method_id": m, "score": score, "status": status})
            if status == "succeeded":
                scores.append({"dataset_id": did, "method_id": m, "metric_id": "h", "raw": score, "scaled": score,
                               "ci_low": None, "ci_high": None, "n_items": None, "n_seeds": 1, "headline": True})
        known = [s for s in (s1, s2) if s is not None]
        overall.append({"method_id": m, "score": sum(known) / len(known) if known else None,
                        "status": "failed" if "failed" in (st1, st2) else "succeeded"})
    return {
        "schema_version": 1, "openpert_version": "0.1.0", "created": "2026-11-28T00:00:00+00:00", "engine": "local",
        "task": {"name": "toy", "label": "Toy"}, "provenance": {},
        "datasets": [{"dataset_id": "d1"}, {"dataset_id": "d2"}],
        "metrics": [{"id": "h", "label": "H", "component": "hc", "maximize": True}], "headline_metrics": ["h"],
        "methods": methods, "scores": scores, "dataset_scores": dataset_scores, "overall": overall,
        "comparisons": [], "failures": [{"job_id": "d1/c", "stage": "method", "component": "c", "dataset_id": "d1",
                                         "method_id": "c", "exit_code": 1, "reason": "boom", "log": None}],
    }


@pytest.fixture()
def run(tmp_path: Path) -> Path:
    folder = tmp_path / "run" / "toy"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(_results()), encoding="utf-8")
    return folder


def _csv_ranks(text: str) -> dict[str, int | None]:
    return {row["method_id"]: int(row["rank"]) if row["rank"] else None for row in csv.DictReader(io.StringIO(text))}


def test_site_csv_and_compare_agree_on_every_rank(run: Path) -> None:
    results = load_results(run)
    paths = TaskPaths(results, "toy")
    # The website: the overview's rank column and each dataset's leaderboard.
    view = overview_view(results, paths)
    shown = {r.method_id: r.rank_text for band in view.bands for r in band.rows}
    assert shown == {m: (None if RUN[m][0] == "positive" else MISSING if r is None else str(r))
                     for m, r in EXPECTED["overall"].items()}
    for did in ("d1", "d2"):
        table = dataset_table_view(results, paths, did, f"table-{did}")
        assert {r.method_id: r.rank for r in table.methods + table.controls} == EXPECTED[did]
        # The CSV download of the same table.
        assert _csv_ranks(dataset_csv(results, did)) == EXPECTED[did]
    assert _csv_ranks(overall_csv(results)) == EXPECTED["overall"]
    # `openpert compare` (and the pull-request summary it writes) on the same run.
    tasks = read_run(run.parent)
    compared = compare_runs(tasks, tasks)["tasks"][0]["methods"]
    assert {m["method_id"]: m["new_rank"] for m in compared} == EXPECTED["overall"]
    assert {m["method_id"]: m["old_rank"] for m in compared} == EXPECTED["overall"]
