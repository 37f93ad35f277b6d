"""Leaderboard rows, built once and written both as HTML tables and as CSV downloads.

Building the rows in one place keeps the page and the CSV from disagreeing about a rank or a
status. Ranks, tiers and per-metric means are read from the results
(:mod:`openpert.results.model` computes them), never computed here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from openpert.report.formatting import csv_text, failure_label
from openpert.report.task_results import TaskResults, control_kind, is_ranked
from openpert.results.model import Standing


@dataclasses.dataclass
class MetricCell:
    """One method's result on one metric of one dataset."""

    metric_id: str
    raw: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    scaled: float | None = None
    n_items: int | None = None
    #: The method is the best on this metric (per ``comparisons``).
    is_best: bool = False
    #: True/False when a comparison with the best method exists (not significant/significant).
    tied_with_best: bool | None = None
    p_value: float | None = None
    best_method_id: str | None = None
    #: The failed metric job, when the metric could not be computed.
    failure: dict[str, Any] | None = None


@dataclasses.dataclass
class MethodRow:
    """One method's line in a leaderboard: its rank, score and status."""

    method: dict[str, Any]
    rank: int | None
    score: float | None
    status: str

    @property
    def control(self) -> bool:
        """True for controls that do not rank, which sit in their own band."""
        return not is_ranked(self.method)


@dataclasses.dataclass
class DatasetRow(MethodRow):
    """One method's line in a dataset's leaderboard."""

    failures: list[dict[str, Any]]
    cells: list[MetricCell]


@dataclasses.dataclass
class OverallRow(MethodRow):
    """One method's line in the task's overall leaderboard."""

    #: dataset_id -> the method's score on that dataset (None when absent).
    dataset_scores: dict[str, float | None]
    #: dataset_id -> ``dataset_scores.status``.
    dataset_status: dict[str, str | None]
    failures: list[dict[str, Any]]


#: A leaderboard's row type.
RowT = TypeVar("RowT", bound=MethodRow)

#: The fields an overview row reads from its standing.
_STANDING_FIELDS = frozenset(f.name for f in dataclasses.fields(Standing)) - {"method_id"}


@dataclasses.dataclass
class OverviewRow(OverallRow):
    """One method's line in the task overview: its overall row, its standing, its resources."""

    #: Per-metric means, headline tests and tier, as the results model computed them.
    standing: Standing
    max_duration_s: float | None
    max_memory_mb: float | None

    def __getattr__(self, name: str) -> Any:
        # metric_scores, metric_failed, tests, tier, top_group, n_tests: the standing's own fields.
        if name in _STANDING_FIELDS:
            return getattr(self.standing, name)
        raise AttributeError(name)


def dataset_rows(results: TaskResults, dataset_id: str) -> list[DatasetRow]:
    """The leaderboard of one dataset: methods by rank, then controls.

    Parameters
    ----------
    results
        The task's results.
    dataset_id
        The dataset.

    Returns
    -------
    list of DatasetRow
        Methods by their rank on the dataset (``dataset_scores.rank``; unranked last), then
        control methods.
    """
    def row(method: dict[str, Any]) -> DatasetRow:
        mid = method.get("id")
        ds = results.dataset_score(dataset_id, mid)
        failures = results.method_failures(dataset_id, mid)
        cells = [_metric_cell(results, dataset_id, mid, m.get("id")) for m in results.metrics]
        status = _row_status(ds.get("status"), failures, cells)
        return DatasetRow(method, ds.get("rank"), ds.get("score"), status, failures, cells)

    return _by_rank(results, row)


def overall_rows(results: TaskResults) -> list[OverallRow]:
    """The overall leaderboard: mean score over datasets, methods by rank, then controls.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    list of OverallRow
        Methods by their rank (``overall.rank``; unranked last), then control methods.
    """
    dataset_ids = [d.get("dataset_id") for d in results.datasets]

    def row(method: dict[str, Any]) -> OverallRow:
        mid = method.get("id")
        overall = results.overall(mid)
        per_dataset = {d: results.dataset_score(d, mid) for d in dataset_ids}
        failures = [f for d in dataset_ids for f in results.method_failures(d, mid)]
        failures += results.scoring_failures(mid)
        status = overall.get("status") or ("failed" if failures else "succeeded")
        return OverallRow(
            method=method,
            rank=overall.get("rank"),
            score=overall.get("score"),
            status=str(status),
            dataset_scores={d: per_dataset[d].get("score") for d in dataset_ids},
            dataset_status={d: per_dataset[d].get("status") for d in dataset_ids},
            failures=failures,
        )

    return _by_rank(results, row)


def overview_rows(results: TaskResults) -> list[OverviewRow]:
    """The task overview: every method's scores by dataset and by metric, its tests and resources.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    list of OverviewRow
        Methods by rank, then control methods (as :func:`overall_rows`), each with its standing
        (per-metric means, headline tests, tier) as the results model computed it.
    """
    out = []
    for row in overall_rows(results):
        mid = str(row.method.get("id"))
        jobs = results.method_resources(mid)
        durations = [float(j["duration_s"]) for j in jobs if isinstance(j.get("duration_s"), (int, float))]
        memory = [float(j["peak_memory_mb"]) for j in jobs if isinstance(j.get("peak_memory_mb"), (int, float))]
        out.append(OverviewRow(**vars(row), standing=results.standing(mid) or Standing(mid, {}, {}, [], None, 0, 0),
                               max_duration_s=max(durations) if durations else None, max_memory_mb=max(memory) if memory else None))
    return out


def overall_csv(results: TaskResults) -> str:
    """The overall leaderboard as CSV, numbers at full precision.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    str
        Columns ``rank, method_id, method_label, type, control, score, status,
        score_<dataset_id>..., metric_<metric_id>..., tier, tests_in_top_group, tests, failures``
        (``metric_<id>``: the metric's mean clipped scaled score over datasets; ``tier`` and the
        test counts as in the overview).
    """
    dataset_ids = [str(d.get("dataset_id")) for d in results.datasets]
    metric_ids = [str(m.get("id")) for m in results.metrics]
    header = [*_CSV_ROW, *[f"score_{d}" for d in dataset_ids], *[f"metric_{m}" for m in metric_ids],
              "tier", "tests_in_top_group", "tests", "failures"]
    lines = [[*_csv_row(o), *[o.dataset_scores.get(d) for d in dataset_ids], *[o.metric_scores.get(m) for m in metric_ids],
              o.tier, o.top_group if o.tests else None, o.n_tests if o.tests else None, failures_text(results, o.failures)]
             for o in overview_rows(results)]
    return csv_text(header, lines)


def dataset_csv(results: TaskResults, dataset_id: str) -> str:
    """One dataset's leaderboard as CSV, numbers at full precision.

    Parameters
    ----------
    results
        The task's results.
    dataset_id
        The dataset.

    Returns
    -------
    str
        Columns ``rank, method_id, method_label, type, control, score, status, failures`` and,
        per metric, ``<metric>_raw, <metric>_ci_low, <metric>_ci_high, <metric>_scaled,
        <metric>_n_items, <metric>_p_value_vs_best, <metric>_tied_with_best``.
    """
    header = [*_CSV_ROW, "failures", *[f"{m.get('id')}_{part}" for m in results.metrics for part in
                                       ("raw", "ci_low", "ci_high", "scaled", "n_items", "p_value_vs_best", "tied_with_best")]]
    lines = [[*_csv_row(r), failures_text(results, r.failures + [c.failure for c in r.cells if c.failure]),
              *[v for c in r.cells for v in (c.raw, c.ci_low, c.ci_high, c.scaled, c.n_items, c.p_value, c.tied_with_best)]]
             for r in dataset_rows(results, dataset_id)]
    return csv_text(header, lines)


def method_kind(method: dict[str, Any]) -> str:
    """A method's kind for the "type" column: ``"method"`` or the kind of control."""
    return control_kind(method) or str(method.get("type") or "method")


# -- helpers ----------------------------------------------------------------------------------


def _by_rank(results: TaskResults, row: Callable[[dict[str, Any]], RowT]) -> list[RowT]:
    """Every leaderboard's order: the methods' rows by rank (unranked last), then the controls'."""
    return sorted(map(row, results.methods), key=lambda r: (r.rank is None, r.rank or 0)) + [row(m) for m in results.controls]


#: The columns both leaderboards' CSVs open with (:func:`_csv_row`).
_CSV_ROW = ("rank", "method_id", "method_label", "type", "control", "score", "status")


def _csv_row(r: MethodRow) -> list[Any]:
    return [r.rank, r.method.get("id"), r.method.get("label"), r.method.get("type"), r.method.get("control"), r.score, r.status]


def _metric_cell(
    results: TaskResults, dataset_id: str, method_id: str, metric_id: str
) -> MetricCell:
    score = results.score(dataset_id, method_id, metric_id)
    cell = (MetricCell(metric_id, **{k: score.get(k) for k in ("raw", "ci_low", "ci_high", "scaled", "n_items")}) if score
            else MetricCell(metric_id, failure=results.metric_failure(dataset_id, method_id, metric_id)))
    best = results.best_method_id(dataset_id, metric_id)
    cell.best_method_id = best
    cell.is_best = best is not None and best == method_id and score is not None
    comparison = results.comparison(dataset_id, metric_id, method_id)
    if comparison and not cell.is_best and score is not None:
        cell.p_value = comparison.get("p_value")
        cell.tied_with_best = comparison.get("significant") is False
    return cell


def _row_status(
    status: str | None, failures: list[dict[str, Any]], cells: list[MetricCell]
) -> str:
    if failures:
        return "failed"
    if any(c.failure for c in cells):
        return "partial"
    if status:
        return str(status)
    if all(c.raw is None for c in cells):
        return "no results"
    return "succeeded"


def failures_text(results: TaskResults, failures: list[dict[str, Any]]) -> str:
    """Failed jobs in one line, each as ``<dataset>: <stage or metric> <failure label>``.

    Parameters
    ----------
    results
        The task's results.
    failures
        Entries of ``failures``.

    Returns
    -------
    str
        The failures joined by ``"; "``.
    """
    parts = []
    for f in failures:
        where = results.dataset_label(f.get("dataset_id"))
        what = f.get("stage") or "job"
        if what == "metric":
            what = f"metric {f.get('component')}"
        parts.append(f"{where}: {what} {failure_label(f.get('exit_code'), f.get('reason'))}")
    return "; ".join(parts)
