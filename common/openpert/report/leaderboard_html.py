"""The leaderboard tables of a task page, one per dataset (the overview replaces an overall one).

Methods and controls sit in separate ``<tbody>`` bands, each opened by a heading row, so the page
script can sort inside a band and hide the controls band without touching the ranking. Every cell
that sorts carries its raw value in ``data-sort``; without scripts the tables read as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from openpert.report.formatting import (
    failure_label,
    format_ci,
    format_count,
    format_number,
    format_p_value,
)
from openpert.report.fragments import badge_kind, sort_key
from openpert.report.leaderboards import (
    DatasetRow,
    MetricCell,
    dataset_rows,
    method_kind,
)
from openpert.report.markdown import plain_text
from openpert.report.paths import TaskPaths
from openpert.report.task_results import TaskResults
from openpert.report.templating import render
from openpert.report.text_parts import short_label

# -- view models ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TagView:
    """A tag beside a metric's name: its kind (a class), word, one-character mark and hover text."""

    kind: str
    word: str
    mark: str
    tip: str


@dataclass(frozen=True)
class MetricHeadView:
    """A metric's column head: label, description on hover, direction, diagnostic or not, tags."""

    label: str
    tooltip: str | None
    maximize: bool
    diagnostic: bool
    tags: list[TagView]


@dataclass(frozen=True)
class MethodCellView:
    """A method's link: the full label (sort key), the shown one, its page, hover text and badge."""

    label: str
    short: str
    href: str
    hover: str
    kind: str = ""
    kind_class: str = ""


@dataclass(frozen=True)
class AbstentionView:
    """The tag of a method whose language-model answers were flagged on a dataset."""

    word: str
    message: str


@dataclass(frozen=True)
class MetricCellView:
    """One metric's two cells in a row: the raw value (with CI and marks) and the scaled value.

    ``failed_title`` is set when the value is missing because a job failed; ``value_text`` is
    ``None`` when there is no value.
    """

    diagnostic: bool
    failed_title: str
    value_text: str | None
    ci_text: str
    raw_sort: str
    n_items: str | None
    best: bool
    tied_tip: str
    scaled_sort: str
    scaled_text: str


@dataclass(frozen=True)
class StatusView:
    """A row's status: the word, its badge kind, and one note per distinct failure (with the full reasons on hover)."""

    status: str
    kind: str
    notes: list[str]
    title: str = ""


@dataclass(frozen=True)
class DatasetRowView:
    """One row of a dataset leaderboard."""

    method_id: str
    rank: int | None
    method: MethodCellView
    abstention: AbstentionView | None
    too_long: AbstentionView | None
    score_sort: str
    score_text: str
    score_failed: bool
    metrics: list[MetricCellView]
    status: StatusView


@dataclass(frozen=True)
class DatasetTableView:
    """A dataset leaderboard: its id, the dataset's short name, the CSV, metric heads and the two bands."""

    table_id: str
    dataset_name: str
    csv_href: str
    metrics: list[MetricHeadView]
    methods: list[DatasetRowView]
    controls: list[DatasetRowView]


def dataset_table(results: TaskResults, paths: TaskPaths, dataset_id: str, table_id: str) -> Markup:
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
    Markup
        HTML: tools, the table in a scrollable region, and the legend of its marks.
    """
    return render("leaderboard/dataset_table.html", table=dataset_table_view(results, paths, dataset_id, table_id))


def dataset_table_view(results: TaskResults, paths: TaskPaths, dataset_id: str, table_id: str) -> DatasetTableView:
    """The view model of a dataset's leaderboard (see :func:`dataset_table`)."""
    # Headline metrics first (they make the score), diagnostic ones after, collapsed on a phone.
    order = sorted(range(len(results.metrics)), key=lambda k: not results.is_headline(results.metrics[k].get("id")))
    heads = [MetricHeadView(label=str(m.get("label") or m.get("id")), tooltip=plain_text(m.get("summary")) or None,
                            maximize=m.get("maximize", True) is not False, diagnostic=not results.is_headline(m.get("id")),
                            tags=metric_tag_views(results, dataset_id, m.get("id")))
             for m in (results.metrics[k] for k in order)]
    rows = dataset_rows(results, dataset_id)
    views = [_row_view(r, order, heads, results, paths, dataset_id) for r in rows]
    return DatasetTableView(
        table_id=table_id,
        dataset_name=short_label(results.dataset_label(dataset_id)),
        csv_href=str(paths.dataset_csv(dataset_id)),
        metrics=heads,
        methods=[v for v, r in zip(views, rows) if not r.control],
        controls=[v for v, r in zip(views, rows) if r.control],
    )


def metric_tag_views(results: TaskResults, dataset_id: str | None, metric_id: str | None) -> list[TagView]:
    """Tags of a metric: ``diagnostic`` (not in the score) and ``gameable`` (on this dataset, or any when ``None``).

    Parameters
    ----------
    results
        The task's results.
    dataset_id
        The dataset of the table (``None``: gameable on any dataset).
    metric_id
        The metric.

    Returns
    -------
    list of TagView
        Empty for a headline metric that no adversarial control games.
    """
    tags = []
    if not results.is_headline(metric_id):
        tags.append(TagView("diagnostic", "diagnostic", "○", "shown, not part of the score"))
    rows = [results.gameable(dataset_id, metric_id)] if dataset_id is not None else [
        results.gameable(str(d.get("dataset_id")), str(metric_id)) for d in results.datasets]
    rows = [r for r in rows if r]
    if rows:
        worst = max(rows, key=lambda r: r.get("gameability") or 0)
        tip = (f"{results.method_label(worst.get('adversarial_method_id'))} (adversarial) scales to "
               f"{format_number(worst.get('gameability'))}, above the median method ({format_number(worst.get('method_median'))})")
        tags.append(TagView("gameable", "gameable", "⚠", tip))
    return tags


def abstention_view(results: TaskResults, dataset_id: str | None, method_id: str | None,
                    flag: str = "llm_abstentions") -> AbstentionView | None:
    """The tag of a method whose language-model answers were flagged on a dataset, ``None`` when they were not.

    Of ``llm_abstentions``: that the score is mostly the fallback's when more than half the
    questions fell back, else that answers abstained. Of ``llm_prompt_too_long``: that prompts were
    too long for the model server (those items were answered as abstentions). Its title is the
    flag's message (method, dataset and rate, or the count and the model's context window).
    """
    found = results.abstention_flag(dataset_id, method_id, flag)
    if found is None:
        return None
    message = str(found.get("message") or "")
    if flag == "llm_prompt_too_long":
        return AbstentionView("prompts too long", message)
    return AbstentionView("score mostly fallback" if "mostly the fallback" in message else "abstains", message)


def method_cell_view(method: dict[str, Any], paths: TaskPaths, *, kind: str | None = None) -> MethodCellView:
    """A method's link in a leaderboard: full and short label, page, hover text and kind badge.

    Parameters
    ----------
    method
        The method's entry of ``results.json``.
    paths
        Where the task's pages are.
    kind
        The badge's text; by default the method's kind (``method_kind``), none for a plain method.
    """
    label = str(method.get("label") or method.get("id"))
    summary = plain_text(method.get("summary"))
    hover = f"{label}: {summary}" if summary else (label if short_label(label) != label else "")
    shown_kind = method_kind(method) if kind is None else kind
    shown_kind = "" if shown_kind == "method" else shown_kind
    return MethodCellView(label=label, short=short_label(label), href=str(paths.method_page(method)), hover=hover, kind=shown_kind,
                          kind_class=badge_kind(str(method.get("control") or shown_kind)) if shown_kind else "")


# -- rows -------------------------------------------------------------------------------------


def _row_view(r: DatasetRow, order: list[int], heads: list[MetricHeadView], results: TaskResults,
              paths: TaskPaths, dataset_id: str) -> DatasetRowView:
    failures = r.failures + [c.failure for c in r.cells if c.failure]
    return DatasetRowView(
        method_id=str(r.method.get("id")),
        rank=None if r.control else r.rank,
        method=method_cell_view(r.method, paths),
        abstention=abstention_view(results, dataset_id, r.method.get("id")),
        too_long=abstention_view(results, dataset_id, r.method.get("id"), "llm_prompt_too_long"),
        score_sort=sort_key(r.score),
        score_text=format_number(r.score),
        score_failed=bool(r.failures),
        metrics=[_metric_cell_view(r.cells[k], r, results, head.diagnostic) for k, head in zip(order, heads)],
        status=_status_view(r.status, failures, results),
    )


def _metric_cell_view(c: MetricCell, row: DatasetRow, results: TaskResults, diagnostic: bool) -> MetricCellView:
    failed_title, value_text, ci_text, tied_tip = "", None, "", ""
    if c.raw is None:
        failure = row.failures[0] if row.failures else c.failure
        if failure:
            failed_title = failure_label(failure.get("exit_code"), failure.get("reason"))
    else:
        # The value and its interval stay one contiguous text, as format_ci writes it.
        value_text = format_number(c.raw)
        if c.ci_low is not None and c.ci_high is not None:
            ci_text = format_ci(c.raw, c.ci_low, c.ci_high)[len(value_text):]
        if not c.is_best and c.tied_with_best:
            best = results.method_label(c.best_method_id)
            tied_tip = f"not significantly different from the best method, {best} (p = {format_p_value(c.p_value)})"
    return MetricCellView(
        diagnostic=diagnostic,
        failed_title=failed_title,
        value_text=value_text,
        ci_text=ci_text,
        raw_sort="" if c.raw is None else repr(c.raw),
        n_items=format_count(c.n_items) if c.n_items is not None else None,
        best=bool(c.is_best) and c.raw is not None,
        tied_tip=tied_tip,
        scaled_sort=sort_key(c.scaled),
        scaled_text=format_number(c.scaled),
    )


def _status_view(status: str, failures: list[dict[str, Any]], results: TaskResults) -> StatusView:
    if not failures:
        return StatusView(status, "ok" if status == "succeeded" else "muted", [])
    # One line per distinct failure; the cell's tooltip and the failures section keep the full reasons.
    lines: list[str] = []
    full = []
    for f in failures:
        stage = f.get("stage")
        what = f"metric {f.get('component')}: " if stage == "metric" else ("dataset: " if stage == "dataset" else "")
        label = what + failure_label(f.get("exit_code"), f.get("reason"), limit=72)
        if label not in lines:
            lines.append(label)
        full.append(f"{results.dataset_label(f.get('dataset_id'))}: {what}{failure_label(f.get('exit_code'), f.get('reason'))}")
    return StatusView(status, "failed" if status == "failed" else "warn", lines, "; ".join(full))
