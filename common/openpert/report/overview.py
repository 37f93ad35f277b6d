"""The task overview: a heatmap table of every method's scaled scores, read at a glance.

Modelled on Open Problems' "funky heatmap": methods are rows, grouped in tiers of methods that the
permutation tests cannot tell from the best; columns are the overall score, the score on each
dataset, the mean score of each metric, the tests, resource use and status. Scores are coloured
cells; failed cells are hatched. Controls sit in a separate band below the methods.

It is a plain HTML table (no script, no figure): it stays searchable, selectable and readable by
screen readers, and it scrolls inside its own box on narrow screens with the method column pinned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import groupby
from typing import Any

from markupsafe import Markup

from openpert.report.figures import is_dark, score_colour
from openpert.report.formatting import (
    MISSING,
    failure_label,
    format_duration,
    format_duration_short,
    format_memory,
    format_number,
    format_p_value,
    format_rank,
)
from openpert.report.leaderboard_html import MethodCellView, TagView, method_cell_view, metric_tag_views
from openpert.report.leaderboards import OverviewRow, failures_text, overview_rows
from openpert.report.markdown import plain_text
from openpert.report.paths import TaskPaths
from openpert.report.task_results import TaskResults, control_kind
from openpert.report.templating import render
from openpert.report.text_parts import LABEL_MAX, short_label
from openpert.results.model import BEST, TIED, TIERS, UNTESTED, WORSE, TestOutcome
from openpert.results.model import MISSING as NO_VALUE
from openpert.results.scoring import NOT_APPLICABLE

#: Marks of the test matrix: outcome -> (mark, what it means).
TEST_MARKS = {
    BEST: ("★", "best method"),
    TIED: ("≈", "not significantly different from the best"),
    WORSE: ("▼", "significantly worse than the best"),
    NO_VALUE: ("–", "no value (failed, or the metric does not apply to the method)"),
    UNTESTED: ("", "not tested"),
}

# -- view models ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnView:
    """One column of the overview: its group, kind (a class), header text and how a row fills it.

    ``label`` and ``tooltip`` make a dataset's or metric's header (short label, description on
    hover); ``title`` is the hover text of the other headers. A metric's header also carries its
    direction and tags, set under the vertical text (an arrow would turn sideways inside it).
    """

    group: str
    key: str
    kind: str
    label: str
    tooltip: str | None = None
    title: str = ""
    maximize: bool = True
    tags: list[TagView] = field(default_factory=list)
    first: bool = False


@dataclass(frozen=True)
class CellView:
    """One cell of the overview: classes, hover text, text, and optionally a fill colour, a mark hidden
    from screen readers and a note only they read."""

    css: str
    title: str = ""
    text: str = ""
    fill: str = ""
    mark: str = ""
    hidden: str = ""


@dataclass(frozen=True)
class TestCellView:
    """One test of the matrix: its outcome (a class), mark, meaning and the test in words."""

    outcome: str
    mark: str
    meaning: str
    title: str


@dataclass(frozen=True)
class OverviewRowView:
    """A method's row: its id, rank text (``None`` for controls), link, abstentions, prompts too long and cells."""

    method_id: str
    rank_text: str | None
    method: MethodCellView
    cells: Sequence[Any]
    abstains: int = 0
    abstains_title: str = ""
    too_long: int = 0
    too_long_title: str = ""


@dataclass(frozen=True)
class BandView:
    """A ``<tbody>`` band of the overview: classes, heading, note, ``data-band`` and rows."""

    css: str
    title: str
    note: str
    rows: list[OverviewRowView]
    data_band: str = ""


@dataclass(frozen=True)
class TestMatrixView:
    """The test matrix: dataset groups ``(label, span, label limit)``, metric labels, rows, legend."""

    n_pairs: int
    groups: list[tuple[str, int, int]]
    metric_labels: list[str]
    rows: list[OverviewRowView]
    legend: str
    caption: str = "Tests against the best method on each dataset and headline metric"


@dataclass(frozen=True)
class OverviewView:
    """The overview: table id, task label, CSV, column groups and columns, bands, test matrix."""

    table_id: str
    task_label: str
    csv_href: str
    has_controls: bool
    groups: list[tuple[str, int]]
    columns: list[ColumnView]
    bands: list[BandView]
    tests: TestMatrixView | None
    #: Where the test matrix is instead, when each dataset's page holds its part (a split task page).
    tests_href: str | None = None


def overview(results: TaskResults, paths: TaskPaths, *, tests_href: str | None = None) -> Markup:
    """The overview of a task: the heatmap table, its legend and the tests behind its tiers.

    Parameters
    ----------
    results
        The task's results.
    paths
        Where the task's pages and downloads are.
    tests_href
        Where the test matrix is when each dataset's page holds its part (a task page over its
        weight limit): the overview then links there instead of holding it, and the Top group
        cells give their count without listing every test again on hover.

    Returns
    -------
    Markup
        HTML: tools, the table in its scrolling box, the legend, and the test matrix in a
        collapsed ``<details>``.
    """
    return render("leaderboard/overview.html", view=overview_view(results, paths, tests_href=tests_href))


def overview_view(results: TaskResults, paths: TaskPaths, *, tests_href: str | None = None) -> OverviewView | None:
    """The view model of :func:`overview` (``None`` when no method was run); its table's id is ``table-overview``."""
    rows = overview_rows(results)
    if not rows:
        return None
    has_tests = any(r.tests for r in rows)
    has_resources = any(r.max_duration_s is not None or r.max_memory_mb is not None for r in rows)
    columns = _columns(results, has_tests, has_resources, list_tests=tests_href is None)
    groups = [(group, len(list(members))) for group, members in groupby(c.group for c in columns)]
    methods = [r for r in rows if not r.control]
    controls = [r for r in rows if r.control]

    def band(css: str, title: str, note: str, members: list[OverviewRow], data_band: str = "") -> BandView:
        return BandView(css, title, note, [_row_view(r, columns, results, paths) for r in members], data_band)

    bands = []
    if any(r.tier for r in methods):
        for key, title, note in TIERS:
            members = [r for r in methods if r.tier == key]
            if members:
                bands.append(band(f"band-methods tier tier-{key}", title, note, members))
    elif methods:
        bands.append(band("band-methods", "Methods", "", methods))
    if controls:
        bands.append(band("band-controls", "Controls",
                          "positive and negative controls bound the scale; baselines are simple reference methods",
                          controls, data_band="controls"))
    return OverviewView(
        table_id="table-overview",
        task_label=str(results.label),
        csv_href=str(paths.overall_csv()),
        has_controls=bool(controls),
        groups=groups,
        columns=columns,
        bands=bands,
        tests=test_matrix_view(results, paths, rows) if has_tests and tests_href is None else None,
        tests_href=tests_href if has_tests else None,
    )


# -- columns ----------------------------------------------------------------------------------


def _columns(results: TaskResults, has_tests: bool, has_resources: bool, list_tests: bool = True) -> list[ColumnView]:
    cols = [ColumnView("Overall", "overall", "overall", "Overall score", title="Mean of the dataset scores")]
    for d in results.datasets:
        did = str(d.get("dataset_id"))
        cols.append(ColumnView("Datasets", did, "dataset", str(results.dataset_label(did)),
                               tooltip=plain_text(d.get("dataset_summary")) or None))
    # The overview shows what the scores are made of: the headline metrics. Diagnostic metrics are
    # in each dataset's table (a dozen more columns would push the overview off a desktop screen).
    for m in [m for m in results.metrics if results.is_headline(m.get("id"))] or results.metrics:
        cols.append(ColumnView("Metrics", str(m.get("id")), "metric", str(m.get("label") or m.get("id")),
                               tooltip=plain_text(m.get("summary")) or None,
                               maximize=m.get("maximize", True) is not False,
                               tags=metric_tag_views(results, None, m.get("id"))))
    if has_tests:
        cols.append(ColumnView("Tests", "tests", "tests" if list_tests else "tests-count", "Top group",
                               title="Headline tests in which the method is the best or not significantly "
                                     "different from it, of the tests it took part in"))
    if has_resources:
        cols.append(ColumnView("Resources", "time", "time", "Wall time", title="Longest wall time of the method's jobs"))
        cols.append(ColumnView("Resources", "memory", "memory", "Peak memory",
                               title="Largest peak memory of the method's jobs"))
    cols.append(ColumnView("Status", "status", "status", "Status"))
    # The first column of each group opens it with a rule.
    return [replace(c, first=k == 0 or cols[k - 1].group != c.group) for k, c in enumerate(cols)]


# -- rows -------------------------------------------------------------------------------------


def _method_view(r: OverviewRow, paths: TaskPaths, results_qc: Sequence[dict] = ()) -> dict[str, Any]:
    method = r.method
    link = method_cell_view(method, paths, kind=control_kind(method) or "")
    # Its language-model answers were flagged on some datasets (the rank must not read as the model's own), and
    # items whose prompts the model could not take were answered as abstentions: the messages of each flag.
    flagged, too_long = ([str(q.get("message") or "") for q in results_qc if q.get("flag") == flag and q.get("method_id") == method.get("id")]
                         for flag in ("llm_abstentions", "llm_prompt_too_long"))
    return {"method_id": str(method.get("id")), "rank_text": None if r.control else format_rank(r.rank), "method": link,
            "abstains": len(flagged), "abstains_title": " | ".join(flagged), "too_long": len(too_long), "too_long_title": " | ".join(too_long)}


def _row_view(r: OverviewRow, columns: list[ColumnView], results: TaskResults, paths: TaskPaths) -> OverviewRowView:
    label = str(r.method.get("label") or r.method.get("id"))
    failed_datasets = [d for d, status in r.dataset_status.items() if status == "failed"]
    cells: list[CellView] = []
    for c in columns:
        if c.kind == "overall":
            notes = [f"failed on {', '.join(results.dataset_label(d) for d in failed_datasets)}"] if failed_datasets else []
            cells.append(_score_cell(r.score, f"{label}: overall score", partial=bool(r.failures), notes=notes))
        elif c.kind == "dataset":
            name = results.dataset_label(c.key)
            if r.dataset_status.get(c.key) == NOT_APPLICABLE:
                title = f"{label} on {name}: not applicable (does not address this dataset's subtask; not ranked there)"
                cells.append(CellView("sc none na", title, MISSING))
            elif r.dataset_status.get(c.key) == "failed":
                reasons = [failure_label(f.get("exit_code"), f.get("reason"))
                           for f in r.failures if f.get("dataset_id") == c.key and f.get("stage") != "metric"]
                title = f"{label} on {name}: failed, {'; '.join(reasons) or 'no result'}"
                cells.append(CellView("sc failed", title, mark="✕", hidden="failed"))
            else:
                partial = [f for f in r.failures if f.get("dataset_id") == c.key]
                notes = [f"metric job failed: {failure_label(f.get('exit_code'), f.get('reason'))}" for f in partial]
                cells.append(_score_cell(r.dataset_scores.get(c.key), f"{label} on {name}", partial=bool(partial), notes=notes))
        elif c.kind == "metric":
            failed = r.metric_failed.get(c.key) or []
            notes = [f"failed on {', '.join(results.dataset_label(d) for d in failed)} (counted as 0)"] if failed else []
            cells.append(_score_cell(r.metric_scores.get(c.key), f"{label} · {results.metric_label(c.key)}, mean over datasets",
                                     partial=bool(failed), notes=notes))
        elif c.kind in ("tests", "tests-count"):
            cells.append(_tests_cell(r, results, label, listed=c.kind == "tests"))
        elif c.kind == "time":
            value = r.max_duration_s
            title = f"{label}: longest job {format_duration(value)}" if value is not None else ""
            cells.append(CellView("res", title, format_duration_short(value)))
        elif c.kind == "memory":
            value = r.max_memory_mb
            title = f"{label}: largest peak memory {format_memory(value)}" if value is not None else ""
            cells.append(CellView("res", title, format_memory(value)))
        elif c.kind == "status":
            cells.append(_status_cell(r, results))
    return OverviewRowView(cells=cells, **_method_view(r, paths, results.qc))


def _score_cell(value: float | None, what: str, *, partial: bool = False, notes: list[str] | None = None) -> CellView:
    text = format_number(value)
    title = f"{what}: {text}"
    if notes:
        title += " · " + "; ".join(notes)
    if value is None:
        return CellView("sc none", title, MISSING)
    fill = score_colour(value)
    cls = "sc"
    if not is_dark(fill):
        cls += " lt"
    if partial:
        cls += " partial"
    return CellView(cls, title, text, fill=fill, hidden=" (includes a failed job)" if partial else "")


def _tests_cell(r: OverviewRow, results: TaskResults, label: str, listed: bool = True) -> CellView:
    if not r.n_tests:
        return CellView("tests none", f"{label}: not tested", MISSING)
    title = f"{label}: in the top group in {r.top_group} of {r.n_tests} tests"
    if listed:
        # Each outcome on hover, beside the count, where the test matrix is on the same page.
        title += " · " + "; ".join(_test_text(t, results, with_method=False) for t in r.tests if t.outcome != UNTESTED)
    cls = "tests all-top" if r.top_group == r.n_tests else ("tests no-top" if r.top_group == 0 else "tests")
    return CellView(cls, title, f"{r.top_group}/{r.n_tests}")


def _status_cell(r: OverviewRow, results: TaskResults) -> CellView:
    failures = r.failures
    if not failures:
        return CellView("st ok", str(r.status), mark="✓", hidden=str(r.status))
    n = len(failures)
    return CellView("st bad", failures_text(results, failures), mark=f"✕ {n}", hidden=f"{n} failed job{'s' if n != 1 else ''}")


def _test_text(t: TestOutcome, results: TaskResults, *, with_method: bool, method_label: str = "") -> str:
    where = f"{short_label(results.dataset_label(t.dataset_id))} · {results.metric_label(t.metric_id)}"
    prefix = f"{method_label} on " if with_method else ""
    best = results.method_label(t.best_method_id)
    if t.outcome == BEST:
        return f"{prefix}{where}: best"
    if t.outcome == TIED:
        return f"{prefix}{where}: not significantly different from {best} (p = {format_p_value(t.p_value)})"
    if t.outcome == WORSE:
        return f"{prefix}{where}: significantly worse than {best} (p = {format_p_value(t.p_value)})"
    if t.outcome == NO_VALUE:
        return f"{prefix}{where}: no value"
    return f"{prefix}{where}: not tested"


def overview_legend_text(has_tests: bool) -> str:
    """How the overview's scores are averaged and its groups formed, in plain text.

    Parameters
    ----------
    has_tests
        Whether the task has paired tests against the best method.

    Returns
    -------
    str
        Plain text (the caller escapes it), shown once above the overview on demand.
    """
    text = (
        "Dataset scores are the mean over the headline metrics shown; metric scores the mean over the datasets "
        "where the method has a value; the overall score the mean over datasets. Diagnostic metrics are in each "
        "dataset's table. Failed jobs count as 0; a metric a method does not address shows –, not 0. "
        "Hover a cell for details."
    )
    if has_tests:
        text += (
            " Methods are grouped by paired permutation tests against the best method on each dataset and "
            "headline metric (p < 0.05 is significant; tests are not adjusted for multiplicity): “Top group” "
            "counts the headline tests in which a method is the best or not significantly different from it."
        )
    return text


# -- the tests behind the tiers ---------------------------------------------------------------


def test_matrix_view(results: TaskResults, paths: TaskPaths, rows: list[OverviewRow],
                     dataset_id: str | None = None) -> TestMatrixView | None:
    """Every method's outcome in every test against the best, as a compact matrix.

    Parameters
    ----------
    results
        The task's results.
    paths
        Where the task's pages are.
    rows
        The overview rows (their order is kept).
    dataset_id
        Only this dataset's tests (its page's part of the matrix).

    Returns
    -------
    TestMatrixView or None
        The methods x (dataset, metric) matrix of marks; ``None`` when nothing was tested.
    """
    def kept(t: TestOutcome) -> bool:
        return dataset_id is None or t.dataset_id == dataset_id

    pairs = [p for p in results.headline_tested_pairs() if dataset_id is None or p[0] == dataset_id]
    shown = [r for r in rows if any(t.outcome != UNTESTED and kept(t) for t in r.tests)]
    if not pairs or not shown:
        return None
    spans = [(did, len(list(members))) for did, members in groupby(did for did, _ in pairs)]
    groups = [(str(results.dataset_label(did)), span, min(LABEL_MAX, 8 * span + 4)) for did, span in spans]
    body = []
    for r in shown:
        label = str(r.method.get("label") or r.method.get("id"))
        cells = [TestCellView(t.outcome, *TEST_MARKS[t.outcome], _test_text(t, results, with_method=True, method_label=label))
                 for t in r.tests if kept(t)]
        body.append(OverviewRowView(cells=cells, **_method_view(r, paths)))
    legend = " · ".join(f"{mark} {meaning}" for mark, meaning in TEST_MARKS.values() if mark)
    return TestMatrixView(len(pairs), groups, [str(results.metric_label(mid)) for _, mid in pairs], body, legend)


def test_matrix(results: TaskResults, paths: TaskPaths, rows: list[OverviewRow], dataset_id: str | None = None) -> Markup:
    """The test matrix of :func:`test_matrix_view` as HTML: a collapsed ``<details>`` (empty when nothing was tested)."""
    view = test_matrix_view(results, paths, rows, dataset_id)
    if view is None:
        return Markup("")
    return render("leaderboard/test_matrix.html", tests=view)
