"""Figures drawn as SVG at report time: Python lays them out, templates write the markup.

Hand-written SVG (rather than a plotting library's output) is small, byte-for-byte deterministic,
inherits the page's system font, and lets every mark carry its own ``<title>`` tooltip. Text widths
are estimated from character counts: labels are truncated to fit, their full text kept in the
tooltip. The functions here compute every position, size, colour and label into plain views
(:class:`HeatmapView`, :class:`BarChartView`); ``templates/figures/*.svg`` turn them into markup,
escaping every text.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from openpert.report.formatting import (
    failure_label,
    format_duration,
    format_memory,
    format_number,
)
from openpert.report.leaderboards import dataset_rows, method_kind
from openpert.report.task_results import TaskResults
from openpert.report.templating import render
from openpert.report.text_parts import short_label

_FONT = 12
_CHAR_W = 6.9  # average advance of a 12 px sans-serif character
#: Sequential palette for scaled scores, 0 (light) to 1 (dark), in perceptual steps.
_SCORE_STOPS = ["#f3f6fb", "#cfdff2", "#9ec0e6", "#6a9bd3", "#3f74b9", "#1f4f95", "#0d2f66"]
#: Categorical colours for datasets, distinguishable for common colour-vision deficiencies.
_CATEGORY = ["#3b6fb6", "#e08a2c", "#3f9a6e", "#b5508f", "#7d6bc4", "#8a6d3b", "#2a9bb3", "#c04a3a"]
_FAIL = "#b42318"
#: Drawn once per figure (the hatch of failed cells); what every mark of a kind shares (text
#: colours, anchors, strokes) is in the figure rules of ``static/report.css`` instead.
_COLOURS = {"fail": _FAIL, "fail_fill": "#f6e3e1"}
#: Newlines and indentation between two tags of a rendered template (never inside a text).
_BETWEEN_TAGS = re.compile(r">\s*\n\s*<")


@dataclasses.dataclass
class HeatCell:
    """One cell of the heatmap."""

    value: float | None
    tooltip: str
    failed: bool = False


@dataclasses.dataclass
class HeatRow:
    """One method's row of the heatmap."""

    label: str
    cells: list[HeatCell]


@dataclasses.dataclass
class Bar:
    """One bar of the resource chart: one method's job on one dataset."""

    series: int
    value: float | None
    text: str
    tooltip: str
    failed: bool = False


@dataclasses.dataclass
class BarRow:
    """One method's bars of the resource chart (one per dataset) for time and memory."""

    label: str
    time: list[Bar]
    memory: list[Bar]


# -- views: what the templates draw, every number already formatted -------------------------


@dataclasses.dataclass(frozen=True)
class Text:
    """A line of text at a position."""

    x: str
    y: str
    text: str


@dataclasses.dataclass(frozen=True)
class Label:
    """A row label: its full text (in its tooltip) and the part shown, ending at ``x``."""

    x: str
    y: str
    full: str
    shown: str


@dataclasses.dataclass(frozen=True)
class FrameView:
    """The ``<svg>`` element of a figure: its size and accessible name and description."""

    fig_id: str
    kind: str
    title: str
    desc: str
    width: str
    height: str
    font_size: int


@dataclasses.dataclass(frozen=True)
class HeatCellView:
    """A heatmap cell: its rectangle, fill, printed value and tooltip.

    ``text_class`` is ``"fig-dark"`` (white text on a dark fill), ``"fig-failed"`` or empty.
    """

    tooltip: str
    x: str
    y: str
    fill: str
    text: Text
    text_class: str


@dataclasses.dataclass(frozen=True)
class RowView:
    """A row of a figure: its label and its marks (a heatmap's cells, or a method's bars across both panels)."""

    label: Label
    marks: list[Any]


@dataclasses.dataclass(frozen=True)
class HeatGroupView:
    """A group of heatmap rows under a heading."""

    heading: Text
    rows: list[RowView]


@dataclasses.dataclass(frozen=True)
class HeatLegendView:
    """The heatmap's legend: the colour scale and its ticks, the failed and empty swatches."""

    y: str
    text_y: str
    scale_x: str
    scale_width: str
    ticks: list[Text]
    failed_x: str
    failed_text_x: str
    empty_x: str
    empty_text_x: str
    empty_fill: str


@dataclasses.dataclass(frozen=True)
class HeatmapView:
    """Everything ``figures/heatmap.svg`` draws."""

    frame: FrameView
    cell_width: str
    cell_height: str
    hatch_id: str
    gradient_id: str
    stops: list[tuple[str, str]]
    headers: list[list[Text]]
    groups: list[HeatGroupView]
    legend: HeatLegendView
    colours: dict[str, str]


@dataclasses.dataclass(frozen=True)
class BarPanelView:
    """One panel of the resource chart: its heading, unit, ticks and grid lines."""

    x: str
    name: str
    unit: str
    ticks: list[Text]
    grid_x: list[str]
    grid_top: str
    grid_bottom: str


@dataclasses.dataclass(frozen=True)
class BarView:
    """A bar with its value label, or a legend swatch with its name; ``tooltip`` holds the full text."""

    tooltip: str
    x: str
    y: str
    fill: str
    failed: bool
    text: Text
    #: A bar's length (a swatch's size is the template's).
    width: str = ""


@dataclasses.dataclass(frozen=True)
class BarChartView:
    """Everything ``figures/bar_chart.svg`` draws."""

    frame: FrameView
    bar_height: str
    panels: list[BarPanelView]
    stripe_width: str
    stripes: list[tuple[str, str]]
    rows: list[RowView]
    legend: list[BarView]


def score_colour(value: float | None) -> str:
    """The fill colour of a scaled score, clipped to [0, 1].

    Parameters
    ----------
    value
        A scaled score.

    Returns
    -------
    str
        A ``#rrggbb`` colour; light grey for None.
    """
    if value is None or not math.isfinite(value):
        return "#eceff3"
    v = min(1.0, max(0.0, float(value))) * (len(_SCORE_STOPS) - 1)
    i = min(int(v), len(_SCORE_STOPS) - 2)
    t = v - i
    a, b = _rgb(_SCORE_STOPS[i]), _rgb(_SCORE_STOPS[i + 1])
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def is_dark(fill: str) -> bool:
    """Tell whether white text reads better on a fill than the page's text colour.

    Parameters
    ----------
    fill
        A ``#rrggbb`` colour.

    Returns
    -------
    bool
        True when the fill's relative luminance is under 0.45.
    """
    return _luminance(fill) < 0.45


def nice_ticks(vmax: float, target: int = 4) -> list[float]:
    """Round axis ticks from 0 to at least ``vmax``.

    Parameters
    ----------
    vmax
        The largest value to show.
    target
        About how many intervals to make.

    Returns
    -------
    list of float
        Evenly spaced ticks starting at 0, steps of 1, 2, 2.5 or 5 times a power of ten.
    """
    if not vmax or vmax <= 0 or not math.isfinite(vmax):
        return [0.0, 1.0]
    raw = vmax / target
    magnitude = 10 ** math.floor(math.log10(raw))
    step = magnitude * 10
    for m in (1, 2, 2.5, 5, 10):
        if m * magnitude >= raw:
            step = m * magnitude
            break
    count = math.ceil(vmax / step - 1e-9)
    return [round(i * step, 10) for i in range(count + 1)]


def figure_svg(view: HeatmapView | BarChartView) -> Markup:
    """Draw a figure from its geometry.

    Parameters
    ----------
    view
        A heatmap's (:func:`heatmap_view`) or a resource chart's (:func:`bar_chart_view`).

    Returns
    -------
    Markup
        An inline ``<svg>`` rendered from ``figures/heatmap.svg`` or ``figures/bar_chart.svg``.
    """
    template = "figures/heatmap.svg" if isinstance(view, HeatmapView) else "figures/bar_chart.svg"
    # Templates put one element a line for reading; the page gets them without the indentation.
    return Markup(_BETWEEN_TAGS.sub("><", render(template, view=view)).strip())


# -- heatmap ----------------------------------------------------------------------------------


def dataset_heatmap(results: TaskResults, dataset_id: str, fig_id: str) -> Markup:
    """Heatmap of scaled scores, methods by metrics, of one dataset.

    Parameters
    ----------
    results
        The task's results.
    dataset_id
        The dataset.
    fig_id
        Unique prefix for ids inside the SVG (several figures share a page).

    Returns
    -------
    Markup
        An inline ``<svg>``, labelled by its ``<title>`` and ``<desc>``.
    """
    rows = dataset_rows(results, dataset_id)
    metrics = results.metrics
    columns = [short_label(m.get("label") or m.get("id")) for m in metrics] + ["Dataset score"]
    groups: list[tuple[str, list[HeatRow]]] = []
    for group, members in (
        ("Methods", [r for r in rows if not r.control]),
        ("Controls", [r for r in rows if r.control]),
    ):
        heat_rows = []
        for r in members:
            label = str(r.method.get("label") or r.method.get("id"))
            failed = bool(r.failures)
            cells = []
            for metric, c in zip(metrics, r.cells):
                name = metric.get("label") or metric.get("id")
                if failed or c.failure:
                    f = r.failures[0] if failed else c.failure
                    tip = f"{label} · {name}: failed, {failure_label(f.get('exit_code'), f.get('reason'))}"
                    cells.append(HeatCell(None, tip, failed=True))
                else:
                    tip = f"{label} · {name}: scaled {format_number(c.scaled)} (raw {format_number(c.raw)})"
                    cells.append(HeatCell(c.scaled, tip))
            tip = f"{label} · dataset score: {format_number(r.score)}"
            cells.append(HeatCell(r.score, tip, failed=failed and r.score in (None, 0)))
            heat_rows.append(HeatRow(f"{label} ({method_kind(r.method)})" if r.control else label, cells))
        if heat_rows:
            groups.append((group, heat_rows))
    name = results.dataset_label(dataset_id)
    n_methods = sum(len(g[1]) for g in groups)
    title = f"Scaled scores on {name}"
    desc = (
        f"Heatmap of scaled scores of {n_methods} methods and controls (rows) on {len(metrics)} "
        f"metrics and the dataset score (columns) for the dataset {name}. Darker cells score "
        "higher; 0 is the strongest negative control's level and 1 the positive control's. Each cell "
        "prints its value; hatched cells mark failed jobs. The same numbers are in the "
        "leaderboard table."
    )
    return figure_svg(heatmap_view(fig_id, title, desc, columns, groups))


def heatmap_view(
    fig_id: str,
    title: str,
    desc: str,
    columns: Sequence[str],
    groups: Sequence[tuple[str, Sequence[HeatRow]]],
) -> HeatmapView:
    """The geometry of a heatmap whose last column is set apart as a summary: where every header, label, cell and legend entry goes.

    Parameters
    ----------
    fig_id
        Prefix of the ids inside the SVG.
    title, desc
        Accessible name and description.
    columns
        Column labels.
    groups
        Row groups (e.g. methods, controls), each with a heading.

    Returns
    -------
    HeatmapView
        What ``figures/heatmap.svg`` draws (:func:`figure_svg`).
    """
    cell_w, cell_h, gap = 86, 30, 12
    label_w = _label_width([r.label for _, rows in groups for r in rows], 110, 260)
    per_line = int((cell_w - 6) / _CHAR_W)
    header_lines = [_wrap(c, per_line, 3) for c in columns]
    header_h = 14 * max((len(h) for h in header_lines), default=1) + 12
    col_x = [label_w + i * cell_w + (gap if i == len(columns) - 1 else 0) for i in range(len(columns))]
    grid_w = col_x[-1] + cell_w if columns else label_w
    width = max(grid_w + 8, 440)
    hatch = f"{fig_id}-hatch"

    headers = []
    for x, lines in zip(col_x, header_lines):
        y0 = header_h - 8 - 14 * (len(lines) - 1)
        headers.append([Text(_f(x + cell_w / 2), _f(y0 + 14 * k), line) for k, line in enumerate(lines)])

    group_views = []
    y = header_h
    for group, rows in groups:
        heading = Text("0", _f(y + 16), group.upper())
        y += 22
        row_views = []
        for row in rows:
            label = Label(_f(label_w - 8), _f(y + cell_h / 2 + 4), row.label,
                          _truncate(row.label, int((label_w - 10) / _CHAR_W)))
            cells = []
            for x, cell in zip(col_x, row.cells):
                if cell.failed:
                    fill, text, text_class = f"url(#{hatch})", "failed", "fig-failed"
                else:
                    fill = score_colour(cell.value)
                    text, text_class = _cell_text(cell.value), "fig-dark" if is_dark(fill) else ""
                cells.append(HeatCellView(
                    tooltip=cell.tooltip, x=_f(x + 1), y=_f(y + 1), fill=fill,
                    text=Text(_f(x + cell_w / 2), _f(y + cell_h / 2 + 4), text), text_class=text_class,
                ))
            row_views.append(RowView(label, cells))
            y += cell_h
        group_views.append(HeatGroupView(heading, row_views))
        y += 6

    # Legend: the colour scale, then what hatched and empty cells mean.
    y += 10
    scale_x, scale_w = 86, 150
    failed_x = scale_x + 176
    empty_x = failed_x + 80
    legend = HeatLegendView(
        y=_f(y + 1),
        text_y=_f(y + 11),
        scale_x=_f(scale_x),
        scale_width=_f(scale_w),
        ticks=[Text(_f(scale_x + scale_w * t), _f(y + 28), format_number(t, 1)) for t in (0.0, 0.5, 1.0)],
        failed_x=_f(failed_x),
        failed_text_x=_f(failed_x + 24),
        empty_x=_f(empty_x),
        empty_text_x=_f(empty_x + 24),
        empty_fill=score_colour(None),
    )
    # Three decimals: one would move the inner stops (1/6, 2/6, ...) off score_colour's palette.
    stops = [(f"{i / (len(_SCORE_STOPS) - 1):.3g}", c) for i, c in enumerate(_SCORE_STOPS)]
    return HeatmapView(
        frame=_frame(fig_id, "fig-heatmap", title, desc, width, y + 34),
        cell_width=_f(cell_w - 2),
        cell_height=_f(cell_h - 2),
        hatch_id=hatch,
        gradient_id=f"{fig_id}-grad",
        stops=stops,
        headers=headers,
        groups=group_views,
        legend=legend,
        colours=_COLOURS,
    )


# -- resource chart ---------------------------------------------------------------------------


def resource_chart(results: TaskResults, fig_id: str) -> Markup:
    """Bar charts of run time and peak memory of every method's job, per dataset.

    Parameters
    ----------
    results
        The task's results.
    fig_id
        Prefix of the ids inside the SVG.

    Returns
    -------
    Markup
        An inline ``<svg>``, or an empty string when no resource was recorded.
    """
    datasets = results.datasets
    series = {d.get("dataset_id"): i for i, d in enumerate(datasets)}
    rows: list[BarRow] = []
    for method in results.methods + results.controls:
        mid = method.get("id")
        label = str(method.get("label") or mid)
        jobs = {r.get("dataset_id"): r for r in results.method_resources(mid)}
        times, mems = [], []
        for d in datasets:
            did = d.get("dataset_id")
            job = jobs.get(did)
            if job is None:
                continue
            dname = results.dataset_label(did)
            failed = job.get("status") == "failed"
            note = f" · failed, {failure_label(job.get('exit_code'), None)}" if failed else ""
            cached = " (cached)" if job.get("cached") else ""
            dur, mem = job.get("duration_s"), job.get("peak_memory_mb")
            for bars, value, text, what in ((times, dur, format_duration(dur), ""), (mems, mem, format_memory(mem), "peak ")):
                bars.append(Bar(series[did], value, _bar_text(text, job, failed), f"{label} on {dname}: {what}{text}{cached}{note}",
                                failed))
        if times:
            kind = method_kind(method)
            rows.append(BarRow(label if kind == "method" else f"{label} ({kind})", times, mems))
    if not rows:
        return Markup("")
    n = len(rows)
    title = "Resource use per method"
    names = [results.dataset_label(d.get("dataset_id")) for d in datasets]
    desc = (
        f"Two bar charts, run time (left) and peak memory (right), of the jobs of {n} methods "
        f"and controls, one bar per dataset ({', '.join(names)}). Bars outlined in red are "
        "failed jobs, labelled with their exit code. The same numbers are in the resource table."
    )
    return figure_svg(bar_chart_view(fig_id, title, desc, rows, names))


def bar_chart_view(
    fig_id: str, title: str, desc: str, rows: Sequence[BarRow], series_names: Sequence[str]
) -> BarChartView:
    """The geometry of two grouped horizontal bar charts (time, memory) sharing their row labels.

    Parameters
    ----------
    fig_id
        Prefix of the ids inside the SVG.
    title, desc
        Accessible name and description.
    rows
        One group of bars per method.
    series_names
        Legend entry of each series (dataset).

    Returns
    -------
    BarChartView
        Its panels, axes, stripes, bars and legend: what ``figures/bar_chart.svg`` draws (:func:`figure_svg`).
    """
    label_w = _label_width([r.label for r in rows], 110, 250)
    panel_w, panel_gap, bar_h, bar_gap, row_pad = 300, 40, 10, 3, 10
    value_room = 116  # keeps each bar's value label inside its panel
    panels = [
        ("Run time", [b for r in rows for b in r.time], _time_unit),
        ("Peak memory", [b for r in rows for b in r.memory], _memory_unit),
    ]
    top = 46
    scales = []
    for k, (name, bars, unit_of) in enumerate(panels):
        x0 = label_w + k * (panel_w + panel_gap)
        vmax = max((b.value for b in bars if b.value is not None), default=0.0)
        unit, factor = unit_of(vmax)
        ticks = nice_ticks(vmax / factor)
        span = (panel_w - value_room) / (ticks[-1] or 1.0)
        scales.append((name, unit, x0, factor, span, ticks))
    row_boxes = []
    y = top
    for row in rows:
        n = max(len(row.time), len(row.memory), 1)
        h = n * bar_h + (n - 1) * bar_gap + 2 * row_pad
        row_boxes.append((row, y, h))
        y += h
    body_bottom = y
    stripe_w = _f(label_w + 2 * panel_w + panel_gap)
    stripes = [(_f(ry), _f(h)) for i, (_, ry, h) in enumerate(row_boxes) if i % 2 == 0]

    panel_views = []
    for name, unit, x0, _, span, ticks in scales:
        panel_views.append(BarPanelView(
            x=_f(x0),
            name=name,
            unit=unit,
            ticks=[Text(_f(x0 + t * span), _f(top - 10), f"{t:g}") for t in ticks],
            grid_x=[_f(x0 + t * span) for t in ticks],
            grid_top=_f(top - 4),
            grid_bottom=_f(body_bottom),
        ))

    row_views = []
    for row, ry, h in row_boxes:
        label = Label(_f(label_w - 10), _f(ry + h / 2 + 4), row.label,
                      _truncate(row.label, int((label_w - 12) / _CHAR_W)))
        bar_views = []
        for k, bars in enumerate((row.time, row.memory)):
            _, _, x0, factor, span, _ = scales[k]
            for j, bar in enumerate(bars):
                by = ry + row_pad + j * (bar_h + bar_gap)
                length = 0.0 if bar.value is None else max(1.5, bar.value / factor * span)
                bar_views.append(BarView(
                    tooltip=bar.tooltip, x=_f(x0), y=_f(by), width=_f(length),
                    fill=_CATEGORY[bar.series % len(_CATEGORY)], failed=bar.failed,
                    text=Text(_f(x0 + length + 5), _f(by + bar_h - 1), bar.text),
                ))
        row_views.append(RowView(label, bar_views))

    # Legend: short dataset labels (full names in their tooltips), wrapped to the chart's width.
    width = label_w + 2 * panel_w + panel_gap + 12
    y = body_bottom + 22
    x = 0.0
    entries = [(short_label(name), name, _CATEGORY[i % len(_CATEGORY)], False) for i, name in enumerate(series_names)]
    entries.append(("failed job", "failed job", "#ffffff", True))
    legend = []
    for shown, full, colour, failed in entries:
        step = 18 + len(shown) * _CHAR_W + 22
        if x > 0 and x + step - 22 > width:
            x, y = 0.0, y + 20
        legend.append(BarView(tooltip=full, x=_f(x), y=_f(y - 10), fill=colour, failed=failed,
                                  text=Text(_f(x + 18), _f(y), shown)))
        x += step
    return BarChartView(
        frame=_frame(fig_id, "fig-bar-chart", title, desc, width, y + 10),
        bar_height=_f(bar_h),
        panels=panel_views,
        stripe_width=stripe_w,
        stripes=stripes,
        rows=row_views,
        legend=legend,
    )


# -- helpers ----------------------------------------------------------------------------------


def _frame(fig_id: str, kind: str, title: str, desc: str, width: float, height: float) -> FrameView:
    return FrameView(fig_id=fig_id, kind=kind, title=title, desc=desc, width=_f(width), height=_f(height),
                     font_size=_FONT)


def _cell_text(value: float | None) -> str:
    # Fixed two decimals: cells have room for four characters, and equal widths scan better.
    if value is None or not math.isfinite(value):
        return format_number(None)
    text = f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def _bar_text(value: str, job: dict, failed: bool) -> str:
    if failed:
        code = job.get("exit_code")
        return f"{value} · exit {code}" if code is not None else f"{value} · failed"
    return f"{value} (cached)" if job.get("cached") else value


def _time_unit(vmax_s: float) -> tuple[str, float]:
    if vmax_s < 120:
        return "seconds", 1.0
    if vmax_s < 7200:
        return "minutes", 60.0
    return "hours", 3600.0


def _memory_unit(vmax_mb: float) -> tuple[str, float]:
    return ("MB", 1.0) if vmax_mb < 2000 else ("GB", 1000.0)


def _label_width(labels: Sequence[str], lo: float, hi: float) -> float:
    # Whole pixels: every x of a heatmap is then whole, and prints without decimals.
    longest = max((len(s) for s in labels), default=0)
    return float(min(hi, max(lo, math.ceil(longest * _CHAR_W + 16))))


def _truncate(text: str, limit: int) -> str:
    limit = max(limit, 4)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _wrap(text: str, width: int, max_lines: int) -> list[str]:
    lines: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}".strip()
        if len(candidate) <= width or not current:
            current = candidate
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    lines = [_truncate(line, width) for line in lines] or [""]
    if len(lines) > max_lines:
        lines = lines[: max_lines - 1] + [_truncate(" ".join(lines[max_lines - 1 :]), width)]
    return lines


def _rgb(colour: str) -> tuple[int, int, int]:
    c = colour.lstrip("#")
    return int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16)


def _luminance(colour: str) -> float:
    r, g, b = (x / 255 for x in _rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _f(x: float) -> str:
    # Fixed precision keeps the SVG byte-identical across runs and platforms.
    text = f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text
