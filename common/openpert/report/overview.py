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

from openpert.report.figures import score_colour, text_colour
from openpert.report.formatting import (
    MISSING,
    failure_label,
    format_duration,
    format_duration_short,
    format_memory,
    format_p_value,
    format_rank,
    format_score,
)
from openpert.report.leaderboard_html import controls_toggle_tools, metric_tags
from openpert.report.leaderboards import (
    BEST,
    NOT_APPLICABLE,
    TIED,
    TIERS,
    UNTESTED,
    WORSE,
    OverviewRow,
    TestOutcome,
    headline_tested_pairs,
    overview_rows,
)
from openpert.report.leaderboards import MISSING as NO_VALUE
from openpert.report.markdown import plain_text
from openpert.report.markup import LABEL_MAX, badge, esc, label_span, short_label, table_region
from openpert.report.paths import TaskPaths
from openpert.report.task_results import TaskResults, control_kind

#: Marks of the test matrix: outcome -> (mark, what it means).
TEST_MARKS = {
    BEST: ("★", "best method"),
    TIED: ("≈", "not significantly different from the best"),
    WORSE: ("▼", "significantly worse than the best"),
    NO_VALUE: ("–", "no value (failed, or the metric does not apply to the method)"),
    UNTESTED: ("", "not tested"),
}


def overview(results: TaskResults, paths: TaskPaths, table_id: str = "table-overview", *,
             tests_href: str | None = None) -> str:
    """The overview of a task: the heatmap table, its legend and the tests behind its tiers.

    Parameters
    ----------
    results
        The task's results.
    paths
        Where the task's pages and downloads are.
    table_id
        The table's id (the controls toggle points at it).
    tests_href
        Where the test matrix is when each dataset's page holds its part (a task page over its
        weight limit): the overview then links there instead of holding it, and the Top group
        cells give their count without listing every test again on hover.

    Returns
    -------
    str
        HTML: tools, the table in its scrolling box, the legend, and the test matrix in a
        collapsed ``<details>``.
    """
    rows = overview_rows(results)
    if not rows:
        return '<p class="empty">No method was run.</p>'
    has_tests = any(r.tests for r in rows)
    has_resources = any(r.max_duration_s is not None or r.max_memory_mb is not None for r in rows)
    columns = _columns(results, has_tests, has_resources, list_tests=tests_href is None)
    table = _table(results, paths, rows, columns, table_id)
    tools = controls_toggle_tools(table_id, paths.overall_csv(), any(r.control for r in rows))
    region = table_region(table, f"Overview of {results.label}", css_class="table-wrap overview-wrap")
    parts = [tools, region, _legend()]
    if has_tests and tests_href is not None:
        parts.append(f'<p class="tests-link">The tests behind the groups, every method against the best on each '
                     f'headline metric, are on <a href="{esc(tests_href)}">each dataset\'s page</a>.</p>')
    elif has_tests:
        parts.append(test_matrix(results, paths, rows))
    return "".join(parts)


# -- columns ----------------------------------------------------------------------------------


class _Column:
    """One column of the overview: its group, header and how a row fills it."""

    def __init__(self, group: str, key: str, header: str, kind: str, note: str = "") -> None:
        # note: HTML set under the (vertical) header, e.g. the metric's direction arrow, which
        # would turn sideways inside vertical text.
        self.group, self.key, self.header, self.kind, self.note = group, key, header, kind, note


def _columns(results: TaskResults, has_tests: bool, has_resources: bool, list_tests: bool = True) -> list[_Column]:
    cols = [_Column("Overall", "overall", '<span title="Mean of the dataset scores">Overall score</span>', "overall")]
    for d in results.datasets:
        did = str(d.get("dataset_id"))
        tip = plain_text(d.get("dataset_summary")) or None
        cols.append(_Column("Datasets", did, label_span(results.dataset_label(did), tip), "dataset"))
    # The overview shows what the scores are made of: the headline metrics. Diagnostic metrics are
    # in each dataset's table (a dozen more columns would push the overview off a desktop screen).
    for m in [m for m in results.metrics if results.is_headline(m.get("id"))] or results.metrics:
        maximize = m.get("maximize", True) is not False
        arrow = "↑" if maximize else "↓"
        direction = "higher is better" if maximize else "lower is better"
        tip = plain_text(m.get("summary")) or None
        label = label_span(m.get("label") or m.get("id"), tip)
        note = (f'<span class="dir" title="{direction}" aria-hidden="true">{arrow}</span>'
                f'<span class="visually-hidden"> ({direction})</span>'
                f"{metric_tags(results, None, m.get('id'), compact=True)}")
        cols.append(_Column("Metrics", str(m.get("id")), label, "metric", note))
    if has_tests:
        cols.append(_Column("Tests", "tests", '<span title="Headline tests in which the method is the best or not '
                            'significantly different from it, of the tests it took part in">Top group</span>',
                            "tests" if list_tests else "tests-count"))
    if has_resources:
        cols.append(_Column("Resources", "time", '<span title="Longest wall time of the method\'s jobs">Wall time</span>', "time"))
        cols.append(_Column("Resources", "memory", '<span title="Largest peak memory of the method\'s jobs">Peak memory</span>',
                            "memory"))
    cols.append(_Column("Status", "status", "Status", "status"))
    return cols


def _table(results: TaskResults, paths: TaskPaths, rows: list[OverviewRow], columns: list[_Column], table_id: str) -> str:
    groups: list[tuple[str, int]] = []
    for c in columns:
        if groups and groups[-1][0] == c.group:
            groups[-1] = (c.group, groups[-1][1] + 1)
        else:
            groups.append((c.group, 1))
    top = ['<th scope="col" rowspan="2" class="m corner">Method</th>']
    for name, span in groups:
        top.append(f'<th scope="colgroup" colspan="{span}" class="group">{esc(name) if span > 1 or name != "Status" else ""}</th>')
    sub = []
    previous = None
    for c in columns:
        first = " first" if c.group != previous else ""
        previous = c.group
        sub.append(f'<th scope="col" class="v {c.kind}{first}"><span class="vl">{c.header}</span>{c.note}</th>')
    colgroups = '<colgroup><col class="m"></colgroup>' + "".join(
        f'<colgroup span="{span}" class="g-{esc(name.lower())}"></colgroup>' for name, span in groups
    )
    ncols = 1 + len(columns)
    bodies = []
    methods = [r for r in rows if not r.control]
    controls = [r for r in rows if r.control]
    if any(r.tier for r in methods):
        for key, title, note in TIERS:
            members = [r for r in methods if r.tier == key]
            if members:
                bodies.append(_band(f"band-methods tier tier-{key}", title, note, members, columns, results, paths, ncols))
    elif methods:
        bodies.append(_band("band-methods", "Methods", "", methods, columns, results, paths, ncols))
    if controls:
        bodies.append(
            _band("band-controls", "Controls",
                  "positive and negative controls bound the scale; baselines are simple reference methods",
                  controls, columns, results, paths, ncols, data_band="controls")
        )
    caption = (
        f"Overview of {esc(results.label)}: scaled scores (0 = negative control, 1 = positive control) "
        "by dataset and by metric, tests against the best, resources and status"
    )
    return (
        f'<table class="overview" id="{esc(table_id)}"><caption>{caption}</caption>{colgroups}'
        f'<thead><tr>{"".join(top)}</tr><tr>{"".join(sub)}</tr></thead>{"".join(bodies)}</table>'
    )


def _band(
    css: str,
    title: str,
    note: str,
    rows: list[OverviewRow],
    columns: list[_Column],
    results: TaskResults,
    paths: TaskPaths,
    ncols: int,
    data_band: str | None = None,
) -> str:
    band_attr = f' data-band="{esc(data_band)}"' if data_band else ""
    note_html = f' <span class="band-note">{esc(note)}</span>' if note else ""
    head = (
        f'<tr class="band"><th scope="rowgroup" colspan="{ncols}"><span class="band-text">'
        f'<span class="band-title">{esc(title)}</span>{note_html}</span></th></tr>'
    )
    body = "".join(_row(r, columns, results, paths) for r in rows)
    return f'<tbody class="{esc(css)}"{band_attr}>{head}{body}</tbody>'


# -- cells ------------------------------------------------------------------------------------


def _row(r: OverviewRow, columns: list[_Column], results: TaskResults, paths: TaskPaths) -> str:
    method = r.method
    label = str(method.get("label") or method.get("id"))
    cells = [_method_cell(r, paths, results.qc)]
    failed_datasets = [d for d, status in r.row.dataset_status.items() if status == "failed"]
    for c in columns:
        if c.kind == "overall":
            notes = [f"failed on {', '.join(results.dataset_label(d) for d in failed_datasets)}"] if failed_datasets else []
            cells.append(_score_cell(r.row.score, f"{label}: overall score", partial=bool(r.row.failures), notes=notes))
        elif c.kind == "dataset":
            name = results.dataset_label(c.key)
            if r.row.dataset_status.get(c.key) == NOT_APPLICABLE:
                title = f"{label} on {name}: not applicable (does not address this dataset's subtask; not ranked there)"
                cells.append(f'<td class="sc none na" title="{esc(title)}">{MISSING}</td>')
            elif r.row.dataset_status.get(c.key) == "failed":
                reasons = [failure_label(f.get("exit_code"), f.get("reason"))
                           for f in r.row.failures if f.get("dataset_id") == c.key and f.get("stage") != "metric"]
                cells.append(_failed_cell(f"{label} on {name}: failed, {'; '.join(reasons) or 'no result'}"))
            else:
                partial = [f for f in r.row.failures if f.get("dataset_id") == c.key]
                notes = [f"metric job failed: {failure_label(f.get('exit_code'), f.get('reason'))}" for f in partial]
                cells.append(_score_cell(r.row.dataset_scores.get(c.key), f"{label} on {name}", partial=bool(partial), notes=notes))
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
            cells.append(_plain_cell(format_duration_short(value), title, "res"))
        elif c.kind == "memory":
            value = r.max_memory_mb
            title = f"{label}: largest peak memory {format_memory(value)}" if value is not None else ""
            cells.append(_plain_cell(format_memory(value), title, "res"))
        elif c.kind == "status":
            cells.append(_status_cell(r, results))
    return f'<tr data-method="{esc(method.get("id"))}">{"".join(cells)}</tr>'


def _method_cell(r: OverviewRow, paths: TaskPaths, results_qc: Sequence[dict] = ()) -> str:
    method = r.method
    label = str(method.get("label") or method.get("id"))
    summary = plain_text(method.get("summary"))
    hover = f"{label}: {summary}" if summary else (label if short_label(label) != label else "")
    title = f' title="{esc(hover)}"' if hover else ""
    kind = control_kind(method)
    extra = f'<span class="kind">{badge(kind, str(method.get("control") or kind))}</span>' if kind else ""
    # Its language-model answers were flagged on some datasets: the rank must not read as the model's own.
    flagged = [q for q in results_qc if q.get("flag") == "llm_abstentions" and q.get("method_id") == method.get("id")]
    if flagged:
        tip = " | ".join(str(q.get("message") or "") for q in flagged)
        extra += (f' <span class="tag tag-abstains" title="{esc(tip)}">abstains on {len(flagged)} '
                  f'dataset{"s" if len(flagged) > 1 else ""}</span>')
    rank = "" if r.control else format_rank(r.row.rank) if r.row.rank is not None else MISSING
    rank_html = f'<span class="rk">{esc(rank)}</span>' if not r.control else ""
    return (
        f'<th scope="row" class="m">{rank_html}<a href="{esc(paths.method_page(method))}"{title}>'
        f"{esc(short_label(label))}</a>{extra}</th>"
    )


def _score_cell(value: float | None, what: str, *, partial: bool = False, notes: list[str] | None = None) -> str:
    text = format_score(value)
    title = f"{what}: {text}"
    if notes:
        title += " · " + "; ".join(notes)
    if value is None:
        return f'<td class="sc none" title="{esc(title)}">{MISSING}</td>'
    fill = score_colour(value)
    cls = "sc"
    if text_colour(fill) != "#ffffff":
        cls += " lt"
    if partial:
        cls += " partial"
    note = '<span class="visually-hidden"> (includes a failed job)</span>' if partial else ""
    return f'<td class="{cls}" style="background:{fill}" title="{esc(title)}">{esc(text)}{note}</td>'


def _failed_cell(title: str) -> str:
    return f'<td class="sc failed" title="{esc(title)}"><span aria-hidden="true">✕</span><span class="visually-hidden">failed</span></td>'


def _plain_cell(text: str, title: str, css: str) -> str:
    title_attr = f' title="{esc(title)}"' if title else ""
    return f'<td class="{css}"{title_attr}>{esc(text)}</td>'


def _tests_cell(r: OverviewRow, results: TaskResults, label: str, listed: bool = True) -> str:
    if not r.n_tests:
        return f'<td class="tests none" title="{esc(label)}: not tested">{MISSING}</td>'
    title = f"{label}: in the top group in {r.top_group} of {r.n_tests} tests"
    if listed:
        # Each outcome on hover, beside the count, where the test matrix is on the same page.
        title += " · " + "; ".join(_test_text(t, results, with_method=False) for t in r.tests if t.outcome != UNTESTED)
    cls = "tests all-top" if r.top_group == r.n_tests else ("tests no-top" if r.top_group == 0 else "tests")
    return f'<td class="{cls}" title="{esc(title)}">{r.top_group}/{r.n_tests}</td>'


def _status_cell(r: OverviewRow, results: TaskResults) -> str:
    failures = r.row.failures
    if not failures:
        return f'<td class="st ok" title="{esc(r.row.status)}"><span aria-hidden="true">✓</span><span class="visually-hidden">{esc(r.row.status)}</span></td>'
    lines = []
    for f in failures:
        stage = f.get("stage")
        what = f"metric {f.get('component')}" if stage == "metric" else str(stage or "job")
        lines.append(f"{results.dataset_label(f.get('dataset_id'))}: {what} {failure_label(f.get('exit_code'), f.get('reason'))}")
    n = len(failures)
    return (
        f'<td class="st bad" title="{esc("; ".join(lines))}"><span aria-hidden="true">✕ {n}</span>'
        f'<span class="visually-hidden">{n} failed job{"s" if n != 1 else ""}</span></td>'
    )


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


def _legend() -> str:
    return (
        '<div class="overview-legend">'
        '<span class="legend-item"><span class="scale-bar" aria-hidden="true"></span>'
        '<span class="scale-ends"><span>0</span><span>1</span></span> scaled score, clipped to [0, 1]</span>'
        '<span class="legend-item"><span class="swatch failed" aria-hidden="true"></span> failed</span>'
        '<span class="legend-item"><span class="swatch partial" aria-hidden="true"></span> includes a failed job</span>'
        f'<span class="legend-item"><span class="swatch none" aria-hidden="true">{MISSING}</span> no value or '
        "not applicable</span>"
        '<span class="legend-item"><span class="tag tag-gameable tag-mark" aria-hidden="true">⚠</span> gameable: an '
        "adversarial control beats the median method</span></div>"
    )


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


def test_matrix(results: TaskResults, paths: TaskPaths, rows: list[OverviewRow], dataset_id: str | None = None) -> str:
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
    str
        A collapsed ``<details>`` holding a methods x (dataset, metric) table of marks.
    """
    pairs = [p for p in headline_tested_pairs(results) if dataset_id is None or p[0] == dataset_id]
    shown = [r for r in rows if any(t.outcome != UNTESTED and (dataset_id is None or t.dataset_id == dataset_id)
                                    for t in r.tests)]
    if not pairs or not shown:
        return ""
    groups: list[tuple[str, int]] = []
    for did, _ in pairs:
        if groups and groups[-1][0] == did:
            groups[-1] = (did, groups[-1][1] + 1)
        else:
            groups.append((did, 1))
    top = ['<th scope="col" rowspan="2" class="m corner">Method</th>']
    for did, span in groups:
        top.append(f'<th scope="colgroup" colspan="{span}" class="group">{label_span(results.dataset_label(did), limit=min(LABEL_MAX, 8 * span + 4))}</th>')
    sub = []
    for _, mid in pairs:
        sub.append(f'<th scope="col" class="v"><span class="vl">{label_span(results.metric_label(mid))}</span></th>')
    body = []
    for r in shown:
        label = str(r.method.get("label") or r.method.get("id"))
        cells = [_method_cell(r, paths)]
        for t in r.tests if dataset_id is None else [t for t in r.tests if t.dataset_id == dataset_id]:
            mark, meaning = TEST_MARKS[t.outcome]
            text = _test_text(t, results, with_method=True, method_label=label)
            cells.append(
                f'<td class="t t-{t.outcome}" title="{esc(text)}"><span aria-hidden="true">{mark}</span>'
                f'<span class="visually-hidden">{esc(meaning)}</span></td>'
            )
        body.append(f'<tr data-method="{esc(r.method.get("id"))}">{"".join(cells)}</tr>')
    caption = "Tests against the best method on each dataset and headline metric"
    table = (
        f'<table class="overview tests-matrix" id="table-tests"><caption>{caption}</caption>'
        f'<thead><tr>{"".join(top)}</tr><tr>{"".join(sub)}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )
    legend = " · ".join(f"{mark} {meaning}" for key, (mark, meaning) in TEST_MARKS.items() if mark)
    return (
        f'<details class="tests"><summary>The tests behind the groups ({len(pairs)} dataset and metric '
        f'pair{"s" if len(pairs) != 1 else ""})</summary>'
        f'{table_region(table, caption, css_class="table-wrap overview-wrap")}'
        f'<p class="legend">{esc(legend)}. Each test compares a method with the best method of that dataset '
        "and metric over the items both share (paired sign-flip permutation test).</p></details>"
    )
