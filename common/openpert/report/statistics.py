"""Task-specific analyses (``results.json``'s ``statistics``): tables and pairwise-test matrices.

Entries are free-form tables, so each column is formatted by what it holds (counts as integers,
p-values in scientific notation, booleans as marks, scores to three significant digits) and id
columns are shown by their labels. A table of pairwise tests (``method_a``, ``method_b``,
``p_value``) is drawn as a method x method matrix per dataset and metric, controls left out; the
full table stays one click away, in a collapsed ``<details>`` and as a CSV download.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from openpert.report.formatting import (
    MISSING,
    format_p_value,
    format_parameter,
    format_score,
    format_value,
    value_kind,
)
from openpert.report.markdown import render_markdown
from openpert.report.markup import esc, label_span, short_label, simple_table, table_region
from openpert.report.paths import TaskPaths
from openpert.report.task_results import TaskResults, is_ranked

#: Tables longer than this are collapsed under a summary line.
MAX_OPEN_ROWS = 12

#: Headers of well-known columns; others are written from their names.
_HEADERS = {
    "dataset_id": "Dataset",
    "method_id": "Method",
    "method_a": "Method A",
    "method_b": "Method B",
    "metric_id": "Metric",
    "p_value": "p-value",
    "n_items": "Items",
    "ci_low": "CI low",
    "ci_high": "CI high",
}


def is_pairwise(rows: list[dict[str, Any]]) -> bool:
    """Tell whether a statistic's table holds tests between pairs of methods."""
    return bool(rows) and all("method_a" in r and "method_b" in r for r in rows)


def statistic_section(results: TaskResults, paths: TaskPaths, key: str, entry: dict[str, Any]) -> str:
    """The content of one statistic's section.

    Parameters
    ----------
    results
        The task's results.
    paths
        Where the task's pages and downloads are.
    key
        The statistic's key in ``statistics``.
    entry
        ``{"label", "description", "table"}``.

    Returns
    -------
    str
        HTML.
    """
    rows = table_rows(entry)
    parts = [render_markdown(entry.get("description"))]
    if not rows:
        parts.append('<p class="empty">No rows: the analysis had nothing to report for this run.</p>')
        return "".join(parts)
    label = str(entry.get("label") or key)
    table = _full_table(results, rows, label, f"table-stat-{paths.statistic_slug(key)}")
    download = (
        f'<div class="table-tools"><a class="download" href="{esc(paths.statistic_csv(key))}" download>'
        "Download CSV</a></div>"
    )
    if is_pairwise(rows):
        parts.append(pairwise_matrices(results, rows))
        parts.append(download)
        parts.append(f"<details><summary>All {len(rows)} tests, controls included</summary>{table}</details>")
    elif len(rows) > MAX_OPEN_ROWS:
        parts.append(download)
        parts.append(f"<details><summary>Table ({len(rows)} rows)</summary>{table}</details>")
    else:
        parts.append(download)
        parts.append(table)
    return "".join(parts)


def table_rows(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of a statistic's table (dicts only)."""
    table = entry.get("table")
    return [r for r in table if isinstance(r, dict)] if isinstance(table, list) else []


def statistic_csv(entry: dict[str, Any]) -> str:
    """A statistic's table as CSV, numbers at full precision.

    Parameters
    ----------
    entry
        ``{"label", "description", "table"}``.

    Returns
    -------
    str
        CSV with one column per key (in order of first appearance).
    """
    rows = table_rows(entry)
    columns = _columns(rows)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for r in rows:
        writer.writerow([_csv_value(r.get(c)) for c in columns])
    return buf.getvalue()


# -- the full table ---------------------------------------------------------------------------


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for r in rows:
        columns += [str(k) for k in r if str(k) not in columns]
    return columns


def _header(column: str) -> str:
    if column in _HEADERS:
        return _HEADERS[column]
    words = ["CI" if w == "ci" else w for w in column.replace("_", " ").split()]
    text = " ".join(words)
    return text[:1].upper() + text[1:]


def _full_table(results: TaskResults, rows: list[dict[str, Any]], label: str, table_id: str) -> str:
    columns = _columns(rows)
    kinds = {c: value_kind(c, [r.get(c) for r in rows]) for c in columns}
    numeric = [kinds[c] in ("score", "count", "rank", "p_value") for c in columns]
    body = []
    for r in rows:
        cells: list[Any] = []
        for c in columns:
            value = r.get(c)
            if c == "dataset_id" and value is not None:
                cells.append((label_span(results.dataset_label(value)), str(value)))
            elif c in ("method_id", "method_a", "method_b") and value is not None:
                cells.append((label_span(results.method_label(value)), str(value)))
            elif c == "metric_id" and value is not None:
                cells.append((label_span(results.metric_label(value)), str(value)))
            elif kinds[c] == "bool":
                cells.append(_bool_cell(value))
            elif kinds[c] == "text":
                cells.append(esc(MISSING if value is None else format_parameter(value)))
            else:
                key = "" if not isinstance(value, (int, float)) else repr(float(value))
                cells.append((esc(format_value(value, kinds[c])), key))
        body.append(cells)
    return simple_table(label, [_header(c) for c in columns], body, table_id=table_id, numeric=numeric, row_headers=False)


def _bool_cell(value: Any) -> tuple[str, str]:
    if value is None:
        return MISSING, ""
    word = "yes" if value else "no"
    mark = "✓" if value else "✗"
    return (f'<span class="bool bool-{word}" aria-hidden="true">{mark}</span>'
            f'<span class="visually-hidden">{word}</span>', "1" if value else "0")


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (dict, list)):
        return format_parameter(value)
    return value


# -- pairwise matrices ------------------------------------------------------------------------


def pairwise_matrices(results: TaskResults, rows: list[dict[str, Any]]) -> str:
    """One method x method matrix of test outcomes per (dataset, metric), controls left out.

    Parameters
    ----------
    results
        The task's results.
    rows
        Rows with ``method_a``, ``method_b``, ``p_value`` and optionally ``dataset_id``,
        ``metric_id``, ``mean_difference`` (method A minus method B) and ``significant``.

    Returns
    -------
    str
        HTML: the matrices side by side and their legend; a note instead when fewer than two
        methods (not controls) were tested.
    """
    order = {str(m.get("id")): i for i, m in enumerate(results.methods)}
    groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r.get("dataset_id"), r.get("metric_id")), []).append(r)
    figures = []
    for (dataset_id, metric_id), group in groups.items():
        ids = {str(r.get(k)) for r in group for k in ("method_a", "method_b")}
        methods = sorted((m for m in ids if is_ranked(results.method(m) or {})),
                         key=lambda m: (order.get(m, len(order)), m))
        if len(methods) < 2:
            continue
        figures.append(_matrix(results, dataset_id, metric_id, methods, group))
    if not figures:
        return '<p class="empty">Fewer than two methods were tested against each other (controls left out).</p>'
    legend = (
        '<p class="legend"><span class="pm pm-better" aria-hidden="true">▲</span> the row method is significantly '
        'better than the column method (p &lt; 0.05, in the metric\'s direction); '
        '<span class="pm pm-worse" aria-hidden="true">▼</span> significantly worse; '
        '<span class="pm pm-tie" aria-hidden="true">≈</span> not significantly different. Hover a cell for the mean '
        "difference and the p-value. Control methods are left out here; the full table below lists every test.</p>"
    )
    return f'<div class="matrices">{"".join(figures)}</div>{legend}'


def _matrix(
    results: TaskResults, dataset_id: Any, metric_id: Any, methods: list[str], rows: list[dict[str, Any]]
) -> str:
    metric = results.metric(metric_id) if metric_id is not None else None
    maximize = None if metric is None else metric.get("maximize", True) is not False
    tests: dict[tuple[str, str], tuple[float | None, float | None, bool]] = {}
    for r in rows:
        a, b = str(r.get("method_a")), str(r.get("method_b"))
        diff = r.get("mean_difference")
        diff = float(diff) if isinstance(diff, (int, float)) and math.isfinite(diff) else None
        p = r.get("p_value") if isinstance(r.get("p_value"), (int, float)) else None
        significant = r.get("significant")
        if not isinstance(significant, bool):
            significant = p is not None and p < 0.05
        tests[(a, b)] = (diff, p, significant)
        tests[(b, a)] = (None if diff is None else -diff, p, significant)
    where = []
    if dataset_id is not None:
        where.append(short_label(results.dataset_label(dataset_id)))
    if metric_id is not None:
        arrow = "" if maximize is None else (" ↑" if maximize else " ↓")
        where.append(f"{results.metric_label(metric_id)}{arrow}")
    caption = " · ".join(where) or "All items"
    labels = {m: results.method_label(m) for m in methods}
    head = ['<th scope="col" class="m corner">Row vs column</th>'] + [
        f'<th scope="col" class="v"><span class="vl">{label_span(labels[m])}</span></th>' for m in methods
    ]
    body = []
    for a in methods:
        cells = [f'<th scope="row" class="m">{label_span(labels[a])}</th>']
        for b in methods:
            if a == b:
                cells.append('<td class="pm pm-self" aria-label="same method"></td>')
                continue
            test = tests.get((a, b))
            if test is None:
                cells.append(f'<td class="pm pm-none" title="{esc(labels[a])} vs {esc(labels[b])}: not tested">{MISSING}</td>')
                continue
            diff, p, significant = test
            detail = f"mean difference ({labels[a]} − {labels[b]}) {format_score(diff)}, p = {format_p_value(p)}"
            if not significant:
                cls, mark, word = "pm-tie", "≈", "not significantly different from"
            elif maximize is None or diff is None:
                cls, mark, word = "pm-diff", "≠", "significantly different from"
            elif (diff > 0) == maximize:
                cls, mark, word = "pm-better", "▲", "significantly better than"
            else:
                cls, mark, word = "pm-worse", "▼", "significantly worse than"
            title = f"{labels[a]} is {word} {labels[b]}: {detail}"
            cells.append(
                f'<td class="pm {cls}" title="{esc(title)}"><span aria-hidden="true">{mark}</span>'
                f'<span class="visually-hidden">{esc(word)}</span></td>'
            )
        body.append(f"<tr>{''.join(cells)}</tr>")
    table = (
        f'<table class="pairwise"><caption>{esc(caption)}</caption><thead><tr>{"".join(head)}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )
    return table_region(table, f"Pairwise tests, {caption}", css_class="table-wrap matrix-wrap")
