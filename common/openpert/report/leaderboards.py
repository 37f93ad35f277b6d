"""Leaderboard rows, built once and written both as HTML tables and as CSV downloads.

Building the rows in one place keeps the page and the CSV from disagreeing about a rank or a
status.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from typing import Any

from openpert.report.formatting import failure_label
from openpert.report.task_results import TaskResults, control_kind, is_ranked


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
class DatasetRow:
    """One method's line in a dataset's leaderboard."""

    method: dict[str, Any]
    rank: int | None
    score: float | None
    status: str
    failures: list[dict[str, Any]]
    cells: list[MetricCell]

    @property
    def control(self) -> bool:
        """True for controls that do not rank, which sit in their own band."""
        return not is_ranked(self.method)


@dataclasses.dataclass
class OverallRow:
    """One method's line in the task's overall leaderboard."""

    method: dict[str, Any]
    rank: int | None
    score: float | None
    status: str
    #: dataset_id -> the method's score on that dataset (None when absent).
    dataset_scores: dict[str, float | None]
    #: dataset_id -> ``dataset_scores.status``.
    dataset_status: dict[str, str | None]
    failures: list[dict[str, Any]]

    @property
    def control(self) -> bool:
        """True for controls that do not rank, which sit in their own band."""
        return not is_ranked(self.method)


#: ``dataset_scores.status`` of a method on a dataset whose subtask it does not address.
NOT_APPLICABLE = "not_applicable"

#: Outcomes of one method on one tested (dataset, metric), from ``comparisons``.
BEST, TIED, WORSE, MISSING, UNTESTED = "best", "tied", "worse", "missing", "untested"

#: Tiers of the overview, in display order: key, heading, what puts a method there.
TIERS: tuple[tuple[str, str, str], ...] = (
    ("top", "Indistinguishable from the best",
     "on every tested dataset and metric, the best method or not significantly different from it"),
    ("some", "Behind the best on some tests",
     "significantly worse than the best (p < 0.05), or without a value, on some tested datasets and metrics"),
    ("all", "Behind the best on every test",
     "significantly worse than the best (p < 0.05), or without a value, on every tested dataset and metric"),
    ("untested", "Not tested",
     "no paired test against the best was possible"),
)


@dataclasses.dataclass
class TestOutcome:
    """How one method fared in the permutation test against the best on one (dataset, metric)."""

    dataset_id: str
    metric_id: str
    #: :data:`BEST`, :data:`TIED`, :data:`WORSE`, :data:`MISSING` (no value) or :data:`UNTESTED`.
    outcome: str
    best_method_id: str | None = None
    p_value: float | None = None
    mean_difference: float | None = None

    @property
    def in_top_group(self) -> bool:
        """True when the method is the best or not significantly different from it."""
        return self.outcome in (BEST, TIED)


@dataclasses.dataclass
class OverviewRow:
    """One method's line in the task overview: scores by dataset and by metric, tests, resources."""

    row: OverallRow
    #: metric_id -> mean over datasets of the clipped scaled score (None when never scored).
    metric_scores: dict[str, float | None]
    #: metric_id -> datasets on which the method's value of the metric is missing by a failure.
    metric_failed: dict[str, list[str]]
    tests: list[TestOutcome]
    tier: str | None
    max_duration_s: float | None
    max_memory_mb: float | None

    @property
    def method(self) -> dict[str, Any]:
        """The method entry."""
        return self.row.method

    @property
    def control(self) -> bool:
        """True for control methods."""
        return self.row.control

    @property
    def top_group(self) -> int:
        """Tests in which the method is the best or not significantly different from it."""
        return sum(t.in_top_group for t in self.tests)

    @property
    def n_tests(self) -> int:
        """Tested (dataset, metric) pairs that count for the method (untested ones left out)."""
        return sum(t.outcome != UNTESTED for t in self.tests)


def competition_ranks(scores: list[float | None]) -> list[int | None]:
    """Rank scores, higher first, ties sharing a rank ("1224" ranking); None stays unranked.

    Parameters
    ----------
    scores
        One score per method.

    Returns
    -------
    list of int or None
        The rank of each score, in input order.
    """
    present = sorted((s for s in scores if s is not None), reverse=True)
    first = {}
    for i, s in enumerate(present):
        first.setdefault(s, i + 1)
    return [None if s is None else first[s] for s in scores]


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
        Methods first (best score first, unscored last), then control methods. Ranks are
        computed over methods only: controls bound the scale, they do not compete.
    """
    def row(method: dict[str, Any]) -> DatasetRow:
        mid = method.get("id")
        ds = results.dataset_score(dataset_id, mid)
        failures = results.method_failures(dataset_id, mid)
        cells = [_metric_cell(results, dataset_id, mid, m.get("id")) for m in results.metrics]
        status = _row_status(ds.get("status"), failures, cells)
        return DatasetRow(method, None, ds.get("score"), status, failures, cells)

    methods = [row(m) for m in results.methods]
    for r, rank in zip(methods, competition_ranks([r.score for r in methods])):
        r.rank = rank
    methods.sort(key=lambda r: (r.rank is None, r.rank or 0))
    return methods + [row(m) for m in results.controls]


def overall_rows(results: TaskResults) -> list[OverallRow]:
    """The overall leaderboard: mean score over datasets, methods by rank, then controls.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    list of OverallRow
        Methods by rank, then control methods. Ranks are competition ranks of ``overall.score``
        among methods only: ``overall.rank`` also ranks the controls, and a positive control
        that outranks every method would push the best method down to rank 2.
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
            rank=None,
            score=overall.get("score"),
            status=str(status),
            dataset_scores={d: per_dataset[d].get("score") for d in dataset_ids},
            dataset_status={d: per_dataset[d].get("status") for d in dataset_ids},
            failures=failures,
        )

    methods = [row(m) for m in results.methods]
    for r, rank in zip(methods, competition_ranks([r.score for r in methods])):
        r.rank = rank
    methods.sort(key=lambda r: (r.rank is None, r.rank or 0))
    return methods + [row(m) for m in results.controls]


def method_tests(results: TaskResults, method_id: str) -> list[TestOutcome]:
    """A method's outcome in every permutation test against the best.

    Parameters
    ----------
    results
        The task's results.
    method_id
        The method.

    Returns
    -------
    list of TestOutcome
        One per tested (dataset, metric), in page order. A method without a value where others
        were tested is :data:`MISSING` (it failed, or does not address that metric); a method
        with a value but no comparison (positive and negative controls) is :data:`UNTESTED`.
    """
    out = []
    for dataset_id, metric_id in results.tested_pairs():
        best = results.best_method_id(dataset_id, metric_id)
        score = results.score(dataset_id, method_id, metric_id)
        has_value = bool(score) and score.get("raw") is not None
        comparison = results.comparison(dataset_id, metric_id, method_id) or {}
        p_value = comparison.get("p_value")
        diff = comparison.get("mean_difference")
        if results.dataset_score(dataset_id, method_id).get("status") == NOT_APPLICABLE:
            # The method does not address this dataset's subtask: no test counts for or against it.
            outcome = UNTESTED
        elif not has_value:
            outcome = MISSING
        elif best == method_id:
            outcome = BEST
        elif comparison:
            significant = comparison.get("significant")
            if not isinstance(significant, bool):
                significant = isinstance(p_value, (int, float)) and p_value < 0.05
            outcome = WORSE if significant else TIED
        else:
            outcome = UNTESTED
        out.append(TestOutcome(dataset_id, metric_id, outcome, best, p_value, diff))
    return out


def headline_tested_pairs(results: TaskResults) -> list[tuple[str, str]]:
    """The tested (dataset, metric) pairs that count towards a method's groups: headline metrics.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    list of tuple of str
        :meth:`TaskResults.tested_pairs` on headline metrics, in page order. Diagnostic metrics
        are shown but never ranked, so their tests do not place a method in a group either.
    """
    return [(d, m) for d, m in results.tested_pairs() if results.is_headline(m)]


def tier_of(tests: list[TestOutcome]) -> str:
    """The overview tier of a method from its test outcomes (a key of :data:`TIERS`).

    Parameters
    ----------
    tests
        The method's outcomes (:func:`method_tests`).

    Returns
    -------
    str
        ``"top"`` when it is in the top group (best or p >= 0.05) of every tested pair,
        ``"all"`` when of none, ``"some"`` in between, ``"untested"`` without any test.
    """
    counted = [t for t in tests if t.outcome != UNTESTED]
    if not counted:
        return "untested"
    top = sum(t.in_top_group for t in counted)
    if top == len(counted):
        return "top"
    return "all" if top == 0 else "some"


def overview_rows(results: TaskResults) -> list[OverviewRow]:
    """The task overview: every method's scores by dataset and by metric, its tests and resources.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    list of OverviewRow
        Methods by rank, then control methods (as :func:`overall_rows`). A metric's score is
        the mean over datasets of its scaled value clipped to [0, 1], over the datasets where the
        metric has scaled values at all, a failed job counting 0; a dataset where the method has
        no value without failing (it does not address the metric) is left out, and a metric the
        method never addresses has no score (None), not 0. Tests, the tier and the "top group"
        count headline metrics only (:func:`headline_tested_pairs`); methods get a tier only when
        the task has such tests.
    """
    dataset_ids = [str(d.get("dataset_id")) for d in results.datasets]
    counted = set(headline_tested_pairs(results))
    has_tests = bool(counted)
    out = []
    for row in overall_rows(results):
        mid = str(row.method.get("id"))
        metric_scores: dict[str, float | None] = {}
        metric_failed: dict[str, list[str]] = {}
        for metric in results.metrics:
            metric_id = str(metric.get("id"))
            values: list[float] = []
            failed: list[str] = []
            for did in dataset_ids:
                if not results.scalable(did, metric_id):
                    continue
                score = results.score(did, mid, metric_id) or {}
                scaled = score.get("scaled")
                failed_here = row.dataset_status.get(did) == "failed" or bool(results.metric_failure(did, mid, metric_id))
                if failed_here:
                    failed.append(did)
                if isinstance(scaled, (int, float)) and math.isfinite(scaled):
                    values.append(min(1.0, max(0.0, float(scaled))))
                elif failed_here:
                    values.append(0.0)
                # Neither a value nor a failure: the method does not address the metric there (a
                # classifier has no text to score by ROUGE); it is left out, never read as a zero.
            metric_scores[metric_id] = sum(values) / len(values) if values else None
            metric_failed[metric_id] = failed
        tests = [t for t in method_tests(results, mid) if (t.dataset_id, t.metric_id) in counted] if has_tests else []
        jobs = results.method_resources(mid)
        durations = [float(j["duration_s"]) for j in jobs if isinstance(j.get("duration_s"), (int, float))]
        memory = [float(j["peak_memory_mb"]) for j in jobs if isinstance(j.get("peak_memory_mb"), (int, float))]
        out.append(
            OverviewRow(
                row=row,
                metric_scores=metric_scores,
                metric_failed=metric_failed,
                tests=tests,
                tier=None if row.control or not has_tests else tier_of(tests),
                max_duration_s=max(durations) if durations else None,
                max_memory_mb=max(memory) if memory else None,
            )
        )
    return out


@dataclasses.dataclass
class Lead:
    """The top method of a task against the runner-up, for the front page."""

    top: OverallRow
    runner_up: OverallRow | None
    #: Overall score of the top method minus the runner-up's (None without a scored runner-up).
    margin: float | None
    #: Headline tests in which the runner-up is significantly worse than the top method.
    significant: int
    #: Headline tests comparing the two (the top method was the best and the runner-up had a test).
    compared: int


def lead(results: TaskResults) -> Lead | None:
    """The top method, its margin over the next and how many paired tests separate them.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    Lead or None
        None when no method has an overall score. The tests are the paired permutation tests the
        overview uses (headline metrics only): on each (dataset, metric) where the top method is
        the best, the runner-up's test against it; significant at p < 0.05, unadjusted.
    """
    ranked = [r for r in overall_rows(results) if not r.control and r.score is not None]
    if not ranked:
        return None
    top = ranked[0]
    runner_up = ranked[1] if len(ranked) > 1 else None
    if runner_up is None:
        return Lead(top, None, None, 0, 0)
    counted = set(headline_tested_pairs(results))
    top_id = top.method.get("id")
    tests = [t for t in method_tests(results, str(runner_up.method.get("id")))
             if (t.dataset_id, t.metric_id) in counted and t.best_method_id == top_id and t.outcome in (TIED, WORSE)]
    return Lead(top, runner_up, float(top.score) - float(runner_up.score), sum(t.outcome == WORSE for t in tests),
                len(tests))


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
    header = ["rank", "method_id", "method_label", "type", "control", "score", "status"]
    header += [f"score_{d}" for d in dataset_ids] + [f"metric_{m}" for m in metric_ids]
    header += ["tier", "tests_in_top_group", "tests", "failures"]
    lines = []
    for o in overview_rows(results):
        r = o.row
        lines.append(
            [
                r.rank,
                r.method.get("id"),
                r.method.get("label"),
                r.method.get("type"),
                r.method.get("control"),
                r.score,
                r.status,
                *[r.dataset_scores.get(d) for d in dataset_ids],
                *[o.metric_scores.get(m) for m in metric_ids],
                o.tier,
                o.top_group if o.tests else None,
                o.n_tests if o.tests else None,
                _failures_text(results, r.failures),
            ]
        )
    return _to_csv(header, lines)


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
    metric_ids = [str(m.get("id")) for m in results.metrics]
    header = ["rank", "method_id", "method_label", "type", "control", "score", "status", "failures"]
    for m in metric_ids:
        header += [
            f"{m}_raw",
            f"{m}_ci_low",
            f"{m}_ci_high",
            f"{m}_scaled",
            f"{m}_n_items",
            f"{m}_p_value_vs_best",
            f"{m}_tied_with_best",
        ]
    lines = []
    for r in dataset_rows(results, dataset_id):
        failures = r.failures + [c.failure for c in r.cells if c.failure]
        line: list[Any] = [
            r.rank,
            r.method.get("id"),
            r.method.get("label"),
            r.method.get("type"),
            r.method.get("control"),
            r.score,
            r.status,
            _failures_text(results, failures),
        ]
        for c in r.cells:
            line += [c.raw, c.ci_low, c.ci_high, c.scaled, c.n_items, c.p_value, c.tied_with_best]
        lines.append(line)
    return _to_csv(header, lines)


def method_kind(method: dict[str, Any]) -> str:
    """A method's kind for the "type" column: ``"method"`` or the kind of control."""
    return control_kind(method) or str(method.get("type") or "method")


# -- helpers ----------------------------------------------------------------------------------


def _metric_cell(
    results: TaskResults, dataset_id: str, method_id: str, metric_id: str
) -> MetricCell:
    cell = MetricCell(metric_id=metric_id)
    score = results.score(dataset_id, method_id, metric_id)
    if score:
        cell.raw = score.get("raw")
        cell.ci_low = score.get("ci_low")
        cell.ci_high = score.get("ci_high")
        cell.scaled = score.get("scaled")
        cell.n_items = score.get("n_items")
    else:
        cell.failure = results.metric_failure(dataset_id, method_id, metric_id)
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


def _failures_text(results: TaskResults, failures: list[dict[str, Any]]) -> str:
    parts = []
    for f in failures:
        where = results.dataset_label(f.get("dataset_id"))
        what = f.get("stage") or "job"
        if what == "metric":
            what = f"metric {f.get('component')}"
        parts.append(f"{where}: {what} {failure_label(f.get('exit_code'), f.get('reason'))}")
    return "; ".join(parts)


def _to_csv(header: list[str], lines: list[list[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for line in lines:
        writer.writerow(["" if v is None else _csv_value(v) for v in line])
    return buf.getvalue()


def _csv_value(value: Any) -> Any:
    # repr() round-trips floats exactly; str(True) would be fine but lower-case reads better.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return value
