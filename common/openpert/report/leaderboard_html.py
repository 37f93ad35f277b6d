"""The leaderboard tables of a task page, one per dataset (the overview replaces an overall one).

Methods and controls sit in separate ``<tbody>`` bands, each opened by a heading row, so the page
script can sort inside a band and hide the controls band without touching the ranking. Every cell
that sorts carries its raw value in ``data-sort``; without scripts the tables read as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from openpert.report.formatting import (
    MISSING,
    brief_failure_label,
    failure_label,
    format_ci,
    format_count,
    format_number,
    format_p_value,
    format_rank,
)
from openpert.report.leaderboards import (
    DatasetRow,
    MetricCell,
    dataset_rows,
    method_kind,
)
from openpert.report.markdown import plain_text
from openpert.report.markup import badge, esc, label_span, short_label, table_region
from openpert.report.paths import TaskPaths
from openpert.report.task_results import TaskResults

#: Legend of the marks used in dataset leaderboards.
SIGNIFICANCE_LEGEND = (
    '<p class="legend"><span class="mark-best">Bold</span>: best method on the metric. '
    '<span class="mark" aria-hidden="true">≈</span> not significantly different from the best '
    "method (paired sign-flip permutation test, p ≥ 0.05; hover for the p-value). Raw values are "
    "shown with their 95% bootstrap confidence interval; ↑ higher is better, ↓ lower is better. "
    "Scaled scores put the strongest negative control at 0 and the positive control at 1. "
    '<span class="tag tag-diagnostic">diagnostic</span> metrics are shown but do not enter the score; '
    '<span class="tag tag-gameable">gameable</span> marks a metric on which an adversarial control beats '
    "the median method.</p>"
)


def dataset_table(results: TaskResults, paths: TaskPaths, dataset_id: str, table_id: str) -> str:
    """A dataset's leaderboard: every metric's raw value with CI and its scaled value.

    Parameters
    ----------
    results
        The task's results.
    paths
        Where the task's pages are.
    dataset_id
        The dataset.
    table_id
        The table's id.

    Returns
    -------
    str
        HTML: tools, the table in a scrollable region, and the legend of its marks.
    """
    # Headline metrics first (they make the score), diagnostic ones after, collapsed on a phone.
    order = sorted(range(len(results.metrics)), key=lambda k: not results.is_headline(results.metrics[k].get("id")))
    metrics = [results.metrics[k] for k in order]
    diagnostic = [not results.is_headline(metric.get("id")) for metric in metrics]
    rows = dataset_rows(results, dataset_id)
    m = len(metrics)
    top = [
        '<th scope="col" rowspan="2" class="num" data-col="0" data-type="number" aria-sort="ascending">Rank</th>',
        '<th scope="col" rowspan="2" data-col="1">Method</th>',
        '<th scope="col" rowspan="2" class="num" data-col="2" data-type="number" data-first="desc">Score</th>',
    ]
    sub = []
    for k, metric in enumerate(metrics):
        maximize = metric.get("maximize", True) is not False
        arrow = "↑" if maximize else "↓"
        direction = "higher is better" if maximize else "lower is better"
        tip = plain_text(metric.get("summary")) or None
        diag = " diag" if diagnostic[k] else ""
        top.append(
            f'<th scope="colgroup" colspan="2" class="metric-head{diag}">'
            f"{label_span(metric.get('label') or metric.get('id'), tip)} "
            f'<span class="dir" title="{direction}" aria-hidden="true">{arrow}</span>'
            f'<span class="visually-hidden">({direction})</span>'
            f"{metric_tags(results, dataset_id, metric.get('id'))}</th>"
        )
        first = "desc" if maximize else "asc"
        sub.append(
            f'<th scope="col" class="num sub{diag}" data-col="{3 + 2 * k}" data-type="number" '
            f'data-first="{first}">raw [95% CI]</th>'
        )
        sub.append(
            f'<th scope="col" class="num sub{diag}" data-col="{4 + 2 * k}" data-type="number" '
            f'data-first="desc">scaled</th>'
        )
    top.append(f'<th scope="col" rowspan="2" data-col="{3 + 2 * m}">Status</th>')
    header = f"{''.join(top)}</tr><tr>{''.join(sub)}"
    ncols = 4 + 2 * m
    colgroups = '<colgroup span="3"></colgroup>' + "".join(
        f'<colgroup span="2" class="metric{" diag" if d else ""}"></colgroup>' for d in diagnostic)
    colgroups += '<colgroup span="1"></colgroup>'

    def render(r: DatasetRow) -> str:
        cells = [_rank_cell(r.rank, r.control),
                 _method_cell(r.method, paths, abstention_tag(results, dataset_id, r.method.get("id")))]
        cells.append(_score_cell(r.score, bar=False, failed=bool(r.failures)))
        for k, is_diag in zip(order, diagnostic):
            metric_cells = _metric_cells(r.cells[k], r, results)
            if is_diag:
                # Every metric cell opens with '<td class="'; marking it lets a phone collapse the column.
                metric_cells = [cell.replace('<td class="', '<td class="diag ', 1) if cell.startswith('<td class="')
                                else cell.replace("<td ", '<td class="diag" ', 1) for cell in metric_cells]
            cells += metric_cells
        failures = r.failures + [c.failure for c in r.cells if c.failure]
        cells.append(_status_cell(r.status, failures, results, with_dataset=False))
        return f'<tr data-method="{esc(r.method.get("id"))}">{"".join(cells)}</tr>'

    name = short_label(results.dataset_label(dataset_id))
    caption = f"Leaderboard on {esc(name)}: raw metric values with 95% CI and scaled scores"
    table = _table(table_id, caption, header, rows, render, ncols, colgroups)
    tools = controls_toggle_tools(table_id, paths.dataset_csv(dataset_id), any(r.control for r in rows))
    return tools + table_region(table, f"Leaderboard on {name}") + SIGNIFICANCE_LEGEND


def metric_tags(results: TaskResults, dataset_id: str | None, metric_id: str | None, *, compact: bool = False) -> str:
    """Tags of a metric's column head: ``diagnostic`` (not in the score) and ``gameable`` (on this dataset).

    Parameters
    ----------
    results
        The task's results.
    dataset_id
        The dataset of the table (``None``: gameable on any dataset).
    metric_id
        The metric.
    compact
        One-character marks (``○`` diagnostic, ``⚠`` gameable) with the word for screen readers and
        on hover, for the narrow columns of the overview.

    Returns
    -------
    str
        HTML, empty for a headline metric that no adversarial control games.
    """
    def tag(kind: str, word: str, mark: str, tip: str) -> str:
        if compact:
            return (f'<span class="tag tag-{kind} tag-mark" title="{esc(word)}: {esc(tip)}" aria-hidden="true">{mark}</span>'
                    f'<span class="visually-hidden">({esc(word)})</span>')
        return f'<span class="tag tag-{kind}" title="{esc(tip)}">{esc(word)}</span>'

    tags = []
    if not results.is_headline(metric_id):
        tags.append(tag("diagnostic", "diagnostic", "○", "shown, not part of the score"))
    rows = [results.gameable(dataset_id, metric_id)] if dataset_id is not None else [
        results.gameable(str(d.get("dataset_id")), str(metric_id)) for d in results.datasets]
    rows = [r for r in rows if r]
    if rows:
        worst = max(rows, key=lambda r: r.get("gameability") or 0)
        tip = (f"{results.method_label(worst.get('adversarial_method_id'))} (adversarial) scales to "
               f"{format_number(worst.get('gameability'))}, above the median method ({format_number(worst.get('method_median'))})")
        tags.append(tag("gameable", "gameable", "⚠", tip))
    return (("" if compact else " ") + " ".join(tags)) if tags else ""


# -- cells ------------------------------------------------------------------------------------


def _table(
    table_id: str,
    caption: str,
    header: str,
    rows: Sequence[Any],
    render: Callable[[Any], str],
    ncols: int,
    colgroups: str = "",
) -> str:
    methods = [r for r in rows if not r.control]
    controls = [r for r in rows if r.control]
    bodies = [
        f'<tbody class="band-methods"><tr class="band"><th scope="rowgroup" colspan="{ncols}">'
        f"Methods</th></tr>{''.join(render(r) for r in methods)}</tbody>"
    ]
    if controls:
        bodies.append(
            f'<tbody class="band-controls" data-band="controls"><tr class="band">'
            f'<th scope="rowgroup" colspan="{ncols}">Controls '
            '<span class="band-note">positive and negative controls set the scale, ceilings bound it from '
            "above and adversarial controls try to game the metrics; none of them ranks</span></th></tr>"
            f"{''.join(render(r) for r in controls)}</tbody>"
        )
    return (
        f'<table class="data sortable leaderboard" id="{esc(table_id)}"><caption>{caption}</caption>'
        f"{colgroups}<thead><tr>{header}</tr></thead>{''.join(bodies)}</table>"
    )


def controls_toggle_tools(table_id: str, csv_href: str, has_controls: bool) -> str:
    """The tools above a leaderboard: the "Show controls" toggle and the CSV download.

    Parameters
    ----------
    table_id
        The table the toggle hides the controls of.
    csv_href
        The table's CSV download.
    has_controls
        Whether there are controls to toggle.

    Returns
    -------
    str
        HTML; the toggle is hidden until the page script shows it.
    """
    toggle = ""
    if has_controls:
        # Hidden until the script runs: without scripts the controls stay visible.
        toggle = (
            f'<label class="toggle" hidden><input type="checkbox" checked '
            f'data-controls-for="{esc(table_id)}" aria-controls="{esc(table_id)}"> Show controls</label>'
        )
    return (
        f'<div class="table-tools">{toggle}'
        f'<a class="download" href="{esc(csv_href)}" download>Download CSV</a></div>'
    )


def _rank_cell(rank: int | None, control: bool) -> str:
    if control or rank is None:
        return f'<td class="num rank" data-sort="">{MISSING}</td>'
    return f'<td class="num rank" data-sort="{rank}">{format_rank(rank)}</td>'


def abstention_tag(results: TaskResults, dataset_id: str | None, method_id: str | None) -> str:
    """A tag beside a method whose language-model answers were flagged on a dataset (``llm_abstentions``).

    It says the score is mostly the fallback's when more than half the questions fell back, else
    that answers abstained; its title is the flag's message (method, dataset and rate). Empty
    when the method was not flagged there.
    """
    flag = results.abstention_flag(dataset_id, method_id)
    if flag is None:
        return ""
    message = str(flag.get("message") or "")
    word = "score mostly fallback" if "mostly the fallback" in message else "abstains"
    return f' <span class="tag tag-abstains" title="{esc(message)}">{esc(word)}</span>'


def _method_cell(method: dict[str, Any], paths: TaskPaths, note: str = "") -> str:
    label = str(method.get("label") or method.get("id"))
    kind = method_kind(method)
    extra = f" {badge(kind, str(method.get('control') or kind))}" if kind != "method" else ""
    extra += note
    summary = plain_text(method.get("summary"))
    hover = f"{label}: {summary}" if summary else (label if short_label(label) != label else "")
    title = f' title="{esc(hover)}"' if hover else ""
    return (
        f'<th scope="row" data-sort="{esc(label)}"><a href="{esc(paths.method_page(method))}"{title}>'
        f"{esc(short_label(label))}</a>{extra}</th>"
    )


def _score_cell(value: float | None, *, bar: bool, failed: bool = False) -> str:
    sort = "" if value is None else repr(float(value))
    cls = "num score failed-score" if failed else "num score"
    meter = ""
    if bar and value is not None:
        width = max(0.0, min(1.0, float(value))) * 100
        meter = f'<span class="meter" aria-hidden="true"><span style="width:{width:.1f}%"></span></span>'
    return f'<td class="{cls}" data-sort="{sort}">{meter}{format_number(value)}</td>'


def _metric_cells(c: MetricCell, row: DatasetRow, results: TaskResults) -> list[str]:
    if c.raw is None:
        failure = row.failures[0] if row.failures else c.failure
        if failure:
            label = failure_label(failure.get("exit_code"), failure.get("reason"))
            raw = f'<td class="num failed-cell" data-sort="" title="{esc(label)}">failed</td>'
        else:
            raw = f'<td class="num" data-sort="">{MISSING}</td>'
    else:
        # The value and its interval stay one contiguous text, as format_ci writes it; the
        # interval only gets its own line through CSS.
        value = format_number(c.raw)
        text = esc(value)
        if c.ci_low is not None and c.ci_high is not None:
            ci = format_ci(c.raw, c.ci_low, c.ci_high)[len(value):]
            text += f'<span class="ci">{esc(ci)}</span>'
        mark, note, cls = "", "", "num"
        if c.is_best:
            cls += " best"
            note = '<span class="visually-hidden"> (best)</span>'
        elif c.tied_with_best:
            best = results.method_label(c.best_method_id)
            p = format_p_value(c.p_value)
            tip = f"not significantly different from the best method, {best} (p = {p})"
            mark = f'<span class="mark" title="{esc(tip)}" aria-hidden="true">≈</span> '
            note = f'<span class="visually-hidden"> ({esc(tip)})</span>'
        n_items = f' data-n="{format_count(c.n_items)}"' if c.n_items is not None else ""
        raw = f'<td class="{cls}" data-sort="{c.raw!r}"{n_items}>{mark}{text}{note}</td>'
    sort = "" if c.scaled is None else repr(float(c.scaled))
    scaled = f'<td class="num scaled" data-sort="{sort}">{format_number(c.scaled)}</td>'
    return [raw, scaled]


def _status_cell(
    status: str,
    failures: list[dict[str, Any]],
    results: TaskResults,
    *,
    with_dataset: bool = True,
) -> str:
    if not failures:
        kind = "ok" if status == "succeeded" else "muted"
        return f'<td data-sort="{esc(status)}">{badge(status.replace("_", " "), kind)}</td>'
    # One line per distinct failure, naming every dataset it happened on; the cell's tooltip and
    # the failures section keep the full reasons.
    lines: dict[str, list[str]] = {}
    full = []
    for f in failures:
        stage = f.get("stage")
        what = f"metric {f.get('component')}: " if stage == "metric" else ("dataset: " if stage == "dataset" else "")
        label = what + brief_failure_label(f.get("exit_code"), f.get("reason"))
        where = results.dataset_label(f.get("dataset_id"))
        names = lines.setdefault(label, [])
        if where not in names:
            names.append(where)
        full.append(f"{where}: {what}{failure_label(f.get('exit_code'), f.get('reason'))}")
    items = "".join(
        f"<li>{esc(', '.join(names) + ': ') if with_dataset else ''}{esc(label)}</li>"
        for label, names in lines.items()
    )
    kind = "failed" if status == "failed" else "warn"
    return (
        f'<td data-sort="{esc(status)}" title="{esc("; ".join(full))}">{badge(status, kind)}'
        f'<ul class="failure-notes">{items}</ul></td>'
    )
