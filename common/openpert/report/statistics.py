"""Task-specific analyses (``results.json``'s ``statistics``): tables and pairwise-test matrices.

Entries are free-form tables, so each column is formatted by what it holds (counts as integers,
p-values in scientific notation, booleans as marks, scores to three significant digits) and id
columns are shown by their labels. A table of pairwise tests (``method_a``, ``method_b``,
``p_value``) is drawn as a method x method matrix per dataset and metric, controls left out; the
full table stays one click away, in a collapsed ``<details>`` and as a CSV download.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from openpert.report.formatting import (
    MISSING,
    csv_text,
    format_number,
    format_p_value,
    format_parameter,
    format_value,
    value_kind,
)
from openpert.report.fragments import fragment, label, table
from openpert.report.markdown import render_markdown
from openpert.report.paths import TaskPaths
from openpert.report.task_results import TaskResults, is_ranked
from openpert.report.templating import render
from openpert.report.views import Table

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


@dataclass(frozen=True)
class PairCell:
    """One cell of a pairwise-test matrix: the row method against the column method.

    Attributes
    ----------
    css
        ``pm-self`` (the diagonal), ``pm-none`` (not tested), ``pm-tie``, ``pm-diff``,
        ``pm-better`` or ``pm-worse``.
    title
        Hover text: the outcome, the mean difference and the p-value.
    mark
        The symbol shown.
    word
        The outcome in words, for screen readers.
    """

    css: str
    title: str = ""
    mark: str = ""
    word: str = ""


@dataclass(frozen=True)
class MatrixRow:
    """A row of a pairwise-test matrix: its method's label and its cells."""

    label: str
    cells: tuple[PairCell, ...]


@dataclass(frozen=True)
class MatrixView:
    """One method x method matrix: its dataset and metric (the caption), column labels and rows.

    Attributes
    ----------
    dataset
        The dataset's label (shown cut to the label length), None when the tests pool datasets.
    metric
        The metric's label with its direction (↑ or ↓), None when the tests name no metric.
    labels
        The methods' labels, in column order.
    rows
        One row per method, in the same order.
    """

    dataset: str | None
    metric: str | None
    labels: tuple[str, ...]
    rows: tuple[MatrixRow, ...]


def statistic_section(results: TaskResults, paths: TaskPaths, key: str, entry: dict[str, Any]) -> Markup:
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
    Markup
        Its description, matrices and table (``sections/statistic.html``).
    """
    rows = table_rows(entry)
    view = _full_table(results, rows, str(entry.get("label") or key),
                       f"table-stat-{paths.statistic_slug(key)}") if rows else None
    return render(
        "sections/statistic.html",
        description=Markup(render_markdown(entry.get("description"))),
        table=view,
        csv=paths.statistic_csv(key),
        # A table of tests between pairs of methods is also drawn as matrices.
        matrices=pairwise_matrices(results, rows) if rows and all("method_a" in r and "method_b" in r for r in rows) else None,
        collapsed=len(rows) > MAX_OPEN_ROWS,
    )


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
    return csv_text(columns, [[r.get(c) for c in columns] for r in rows])


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


def _full_table(results: TaskResults, rows: list[dict[str, Any]], caption: str, table_id: str) -> Table:
    columns = _columns(rows)
    kinds = {c: value_kind(c, [r.get(c) for r in rows]) for c in columns}
    numeric = [kinds[c] in ("score", "count", "rank", "p_value") for c in columns]
    # Id columns show the labels of what they name, sorted by the id.
    labels = {"dataset_id": results.dataset_label, "metric_id": results.metric_label,
              **dict.fromkeys(("method_id", "method_a", "method_b"), results.method_label)}
    body = []
    for r in rows:
        cells: list[Any] = []
        for c in columns:
            value = r.get(c)
            if c in labels and value is not None:
                cells.append((label(labels[c](value)), str(value)))
            elif kinds[c] == "bool":
                cells.append(_bool_cell(value))
            elif kinds[c] == "text":
                cells.append(MISSING if value is None else format_parameter(value))
            else:
                sort = "" if not isinstance(value, (int, float)) else repr(float(value))
                cells.append((format_value(value, kinds[c]), sort))
        body.append(cells)
    return table(caption, [_header(c) for c in columns], body, table_id=table_id, numeric=numeric, row_headers=False)


def _bool_cell(value: Any) -> tuple[Any, str]:
    if value is None:
        return MISSING, ""
    return fragment("bool_mark")(value, "✓" if value else "✗"), "1" if value else "0"


# -- pairwise matrices ------------------------------------------------------------------------


def pairwise_matrices(results: TaskResults, rows: list[dict[str, Any]]) -> Markup:
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
    Markup
        The matrices side by side and their legend; a note instead when fewer than two methods
        (not controls) were tested (``sections/pairwise.html``).
    """
    order = {str(m.get("id")): i for i, m in enumerate(results.methods)}
    groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r.get("dataset_id"), r.get("metric_id")), []).append(r)
    matrices = []
    for (dataset_id, metric_id), group in groups.items():
        ids = {str(r.get(k)) for r in group for k in ("method_a", "method_b")}
        methods = sorted((m for m in ids if is_ranked(results.method(m) or {})),
                         key=lambda m: (order.get(m, len(order)), m))
        if len(methods) < 2:
            continue
        matrices.append(_matrix(results, dataset_id, metric_id, methods, group))
    return render("sections/pairwise.html", matrices=matrices)


def _matrix(
    results: TaskResults, dataset_id: Any, metric_id: Any, methods: list[str], rows: list[dict[str, Any]]
) -> MatrixView:
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
    arrow = "" if maximize is None else (" ↑" if maximize else " ↓")
    labels = {m: results.method_label(m) for m in methods}
    body = []
    for a in methods:
        cells = []
        for b in methods:
            if a == b:
                cells.append(PairCell("pm-self"))
                continue
            test = tests.get((a, b))
            if test is None:
                cells.append(PairCell("pm-none", f"{labels[a]} vs {labels[b]}: not tested"))
                continue
            diff, p, significant = test
            detail = f"mean difference ({labels[a]} − {labels[b]}) {format_number(diff)}, p = {format_p_value(p)}"
            if not significant:
                cls, mark, word = "pm-tie", "≈", "not significantly different from"
            elif maximize is None or diff is None:
                cls, mark, word = "pm-diff", "≠", "significantly different from"
            elif (diff > 0) == maximize:
                cls, mark, word = "pm-better", "▲", "significantly better than"
            else:
                cls, mark, word = "pm-worse", "▼", "significantly worse than"
            cells.append(PairCell(cls, f"{labels[a]} is {word} {labels[b]}: {detail}", mark, word))
        body.append(MatrixRow(labels[a], tuple(cells)))
    return MatrixView(None if dataset_id is None else results.dataset_label(dataset_id),
                      None if metric_id is None else f"{results.metric_label(metric_id)}{arrow}",
                      tuple(labels[m] for m in methods), tuple(body))
