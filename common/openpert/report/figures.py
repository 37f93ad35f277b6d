"""Figures drawn as hand-written SVG at report time.

Hand-written SVG (rather than a plotting library's output) is small, byte-for-byte deterministic,
inherits the page's system font, and lets every mark carry its own ``<title>`` tooltip. Text widths
are estimated from character counts: labels are truncated to fit, their full text kept in the
tooltip.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from openpert.report.formatting import (
    failure_label,
    format_duration,
    format_memory,
    format_number,
)
from openpert.report.leaderboards import dataset_rows, method_kind
from openpert.report.markup import esc, short_label
from openpert.report.task_results import TaskResults

_FONT = 12
_CHAR_W = 6.9  # average advance of a 12 px sans-serif character
_TEXT = "#1c2430"
_MUTED = "#5b6675"
_GRID = "#e3e8ef"
#: Sequential palette for scaled scores, 0 (light) to 1 (dark), in perceptual steps.
_SCORE_STOPS = ["#f3f6fb", "#cfdff2", "#9ec0e6", "#6a9bd3", "#3f74b9", "#1f4f95", "#0d2f66"]
#: Categorical colours for datasets, distinguishable for common colour-vision deficiencies.
_CATEGORY = ["#3b6fb6", "#e08a2c", "#3f9a6e", "#b5508f", "#7d6bc4", "#8a6d3b", "#2a9bb3", "#c04a3a"]
_FAIL = "#b42318"


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


def text_colour(fill: str) -> str:
    """The text colour readable on a fill: white on dark fills, the page's text colour otherwise.

    Parameters
    ----------
    fill
        A ``#rrggbb`` colour.

    Returns
    -------
    str
        ``"#ffffff"`` or the text colour.
    """
    return "#ffffff" if _luminance(fill) < 0.45 else _TEXT


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


# -- heatmap ----------------------------------------------------------------------------------


def dataset_heatmap(results: TaskResults, dataset_id: str, fig_id: str) -> str:
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
    str
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
    return heatmap_svg(fig_id, title, desc, columns, groups)


def heatmap_svg(
    fig_id: str,
    title: str,
    desc: str,
    columns: Sequence[str],
    groups: Sequence[tuple[str, Sequence[HeatRow]]],
) -> str:
    """Draw a heatmap whose last column is set apart as a summary.

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
    str
        An inline ``<svg>``.
    """
    cell_w, cell_h, gap = 86, 30, 12
    label_w = _label_width([r.label for _, rows in groups for r in rows], 110, 260)
    per_line = int((cell_w - 6) / _CHAR_W)
    header_lines = [_wrap(c, per_line, 3) for c in columns]
    header_h = 14 * max((len(h) for h in header_lines), default=1) + 12
    col_x = [label_w + i * cell_w + (gap if i == len(columns) - 1 else 0) for i in range(len(columns))]
    grid_w = col_x[-1] + cell_w if columns else label_w
    width = max(grid_w + 8, 440)

    parts: list[str] = []
    hatch = f"{fig_id}-hatch"
    grad = f"{fig_id}-grad"
    parts.append(
        "<defs>"
        f'<pattern id="{hatch}" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#f6e3e1"/>'
        f'<line x1="0" y1="0" x2="0" y2="6" stroke="{_FAIL}" stroke-width="1.6"/></pattern>'
        f'<linearGradient id="{grad}" x1="0" x2="1" y1="0" y2="0">'
        + "".join(
            f'<stop offset="{_f(i / (len(_SCORE_STOPS) - 1))}" stop-color="{c}"/>'
            for i, c in enumerate(_SCORE_STOPS)
        )
        + "</linearGradient></defs>"
    )
    for x, lines in zip(col_x, header_lines):
        y0 = header_h - 8 - 14 * (len(lines) - 1)
        spans = "".join(
            f'<tspan x="{_f(x + cell_w / 2)}" y="{_f(y0 + 14 * k)}">{esc(line)}</tspan>'
            for k, line in enumerate(lines)
        )
        parts.append(f'<text text-anchor="middle" font-weight="600" fill="{_TEXT}">{spans}</text>')

    y = header_h
    for group, rows in groups:
        parts.append(
            f'<text x="0" y="{_f(y + 16)}" font-size="11" font-weight="700" fill="{_MUTED}" '
            f'letter-spacing="0.06em">{esc(group.upper())}</text>'
        )
        y += 22
        for row in rows:
            shown = _truncate(row.label, int((label_w - 10) / _CHAR_W))
            parts.append(
                f'<text x="{_f(label_w - 8)}" y="{_f(y + cell_h / 2 + 4)}" text-anchor="end" '
                f'fill="{_TEXT}"><title>{esc(row.label)}</title>{esc(shown)}</text>'
            )
            for x, cell in zip(col_x, row.cells):
                if cell.failed:
                    fill, text, colour = f"url(#{hatch})", "failed", _FAIL
                else:
                    fill = score_colour(cell.value)
                    text = _cell_text(cell.value)
                    colour = "#ffffff" if _luminance(fill) < 0.45 else _TEXT
                parts.append(
                    f'<g><title>{esc(cell.tooltip)}</title>'
                    f'<rect x="{_f(x + 1)}" y="{_f(y + 1)}" width="{cell_w - 2}" height="{cell_h - 2}" '
                    f'rx="3" fill="{fill}"/>'
                    f'<text x="{_f(x + cell_w / 2)}" y="{_f(y + cell_h / 2 + 4)}" text-anchor="middle" '
                    f'fill="{colour}" font-variant-numeric="tabular-nums">{esc(text)}</text></g>'
                )
            y += cell_h
        y += 6

    # Legend: the colour scale, then what hatched and empty cells mean.
    y += 10
    lx = 0
    parts.append(f'<text x="{lx}" y="{_f(y + 11)}" fill="{_MUTED}">Scaled score</text>')
    gx = lx + 86
    parts.append(f'<rect x="{gx}" y="{_f(y + 1)}" width="150" height="12" rx="2" fill="url(#{grad})"/>')
    for t in (0.0, 0.5, 1.0):
        tx = gx + 150 * t
        parts.append(
            f'<text x="{_f(tx)}" y="{_f(y + 28)}" text-anchor="middle" font-size="11" '
            f'fill="{_MUTED}">{format_number(t, 1)}</text>'
        )
    sx = gx + 176
    parts.append(f'<rect x="{sx}" y="{_f(y + 1)}" width="18" height="12" rx="2" fill="url(#{hatch})"/>')
    parts.append(f'<text x="{sx + 24}" y="{_f(y + 11)}" fill="{_MUTED}">failed</text>')
    sx += 80
    parts.append(f'<rect x="{sx}" y="{_f(y + 1)}" width="18" height="12" rx="2" fill="{score_colour(None)}"/>')
    parts.append(f'<text x="{sx + 24}" y="{_f(y + 11)}" fill="{_MUTED}">no value</text>')
    height = y + 34
    return _svg(fig_id, title, desc, width, height, "".join(parts))


# -- resource chart ---------------------------------------------------------------------------


def resource_chart(results: TaskResults, fig_id: str) -> str:
    """Bar charts of run time and peak memory of every method's job, per dataset.

    Parameters
    ----------
    results
        The task's results.
    fig_id
        Prefix of the ids inside the SVG.

    Returns
    -------
    str
        An inline ``<svg>``, or ``""`` when no resource was recorded.
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
            times.append(
                Bar(series[did], dur, _bar_text(format_duration(dur), job, failed),
                    f"{label} on {dname}: {format_duration(dur)}{cached}{note}", failed)
            )
            mems.append(
                Bar(series[did], mem, _bar_text(format_memory(mem), job, failed),
                    f"{label} on {dname}: peak {format_memory(mem)}{cached}{note}", failed)
            )
        if times:
            kind = method_kind(method)
            rows.append(BarRow(label if kind == "method" else f"{label} ({kind})", times, mems))
    if not rows:
        return ""
    n = len(rows)
    title = "Resource use per method"
    names = [results.dataset_label(d.get("dataset_id")) for d in datasets]
    desc = (
        f"Two bar charts, run time (left) and peak memory (right), of the jobs of {n} methods "
        f"and controls, one bar per dataset ({', '.join(names)}). Bars outlined in red are "
        "failed jobs, labelled with their exit code. The same numbers are in the resource table."
    )
    return bar_chart_svg(fig_id, title, desc, rows, names)


def bar_chart_svg(
    fig_id: str, title: str, desc: str, rows: Sequence[BarRow], series_names: Sequence[str]
) -> str:
    """Draw two grouped horizontal bar charts (time, memory) sharing their row labels.

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
    str
        An inline ``<svg>``.
    """
    label_w = _label_width([r.label for r in rows], 110, 250)
    panel_w, panel_gap, bar_h, bar_gap, row_pad = 300, 40, 10, 3, 10
    value_room = 116  # keeps each bar's value label inside its panel
    panels = [
        ("Run time", [b for r in rows for b in r.time], _time_unit),
        ("Peak memory", [b for r in rows for b in r.memory], _memory_unit),
    ]
    top = 46
    parts: list[str] = []
    scales = []
    for k, (name, bars, unit_of) in enumerate(panels):
        x0 = label_w + k * (panel_w + panel_gap)
        vmax = max((b.value for b in bars if b.value is not None), default=0.0)
        unit, factor = unit_of(vmax)
        ticks = nice_ticks(vmax / factor)
        span = (panel_w - value_room) / (ticks[-1] or 1.0)
        scales.append((x0, factor, span, ticks))
        parts.append(
            f'<text x="{_f(x0)}" y="14" font-weight="600" fill="{_TEXT}">{esc(name)} '
            f'<tspan fill="{_MUTED}" font-weight="400">({esc(unit)})</tspan></text>'
        )
        for t in ticks:
            parts.append(
                f'<text x="{_f(x0 + t * span)}" y="{top - 10}" text-anchor="middle" font-size="11" '
                f'fill="{_MUTED}">{t:g}</text>'
            )
    y = top
    row_boxes = []
    for row in rows:
        n = max(len(row.time), len(row.memory), 1)
        h = n * bar_h + (n - 1) * bar_gap + 2 * row_pad
        row_boxes.append((row, y, h))
        y += h
    body_bottom = y
    # Stripes first, grid lines over them, bars on top.
    for i, (_, ry, h) in enumerate(row_boxes):
        if i % 2 == 0:
            parts.append(
                f'<rect x="0" y="{_f(ry)}" width="{_f(label_w + 2 * panel_w + panel_gap)}" '
                f'height="{_f(h)}" fill="#f7f9fc"/>'
            )
    for x0, _, span, ticks in scales:
        for t in ticks:
            tx = x0 + t * span
            parts.append(
                f'<line x1="{_f(tx)}" x2="{_f(tx)}" y1="{top - 4}" y2="{_f(body_bottom)}" '
                f'stroke="{_GRID}" stroke-width="1"/>'
            )
    for row, ry, h in row_boxes:
        shown = _truncate(row.label, int((label_w - 12) / _CHAR_W))
        parts.append(
            f'<text x="{_f(label_w - 10)}" y="{_f(ry + h / 2 + 4)}" text-anchor="end" fill="{_TEXT}">'
            f"<title>{esc(row.label)}</title>{esc(shown)}</text>"
        )
        for k, bars in enumerate((row.time, row.memory)):
            x0, factor, span, _ = scales[k]
            for j, bar in enumerate(bars):
                by = ry + row_pad + j * (bar_h + bar_gap)
                colour = _CATEGORY[bar.series % len(_CATEGORY)]
                length = 0.0 if bar.value is None else max(1.5, bar.value / factor * span)
                stroke = f' stroke="{_FAIL}" stroke-width="1.5"' if bar.failed else ""
                text_colour = _FAIL if bar.failed else _MUTED
                parts.append(
                    f"<g><title>{esc(bar.tooltip)}</title>"
                    f'<rect x="{_f(x0)}" y="{_f(by)}" width="{_f(length)}" height="{bar_h}" rx="2" '
                    f'fill="{colour}"{stroke}/>'
                    f'<text x="{_f(x0 + length + 5)}" y="{_f(by + bar_h - 1)}" font-size="10.5" '
                    f'fill="{text_colour}">{esc(bar.text)}</text></g>'
                )
    # Legend: short dataset labels (full names in their tooltips), wrapped to the chart's width.
    width = label_w + 2 * panel_w + panel_gap + 12
    y = body_bottom + 22
    x = 0.0
    entries = [(short_label(name), name, _CATEGORY[i % len(_CATEGORY)], False) for i, name in enumerate(series_names)]
    entries.append(("failed job", "failed job", "#ffffff", True))
    for shown, full, colour, failed in entries:
        step = 18 + len(shown) * _CHAR_W + 22
        if x > 0 and x + step - 22 > width:
            x, y = 0.0, y + 20
        stroke = f' stroke="{_FAIL}" stroke-width="1.5"' if failed else ""
        parts.append(
            f"<g><title>{esc(full)}</title>"
            f'<rect x="{_f(x)}" y="{_f(y - 10)}" width="12" height="12" rx="2" fill="{colour}"{stroke}/>'
            f'<text x="{_f(x + 18)}" y="{_f(y)}" fill="{_TEXT}">{esc(shown)}</text></g>'
        )
        x += step
    return _svg(fig_id, title, desc, width, y + 10, "".join(parts))


# -- helpers ----------------------------------------------------------------------------------


def _svg(fig_id: str, title: str, desc: str, width: float, height: float, body: str) -> str:
    w, h = _f(width), _f(height)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="figure-svg" viewBox="0 0 {w} {h}" '
        f'width="{w}" height="{h}" role="img" aria-labelledby="{fig_id}-title {fig_id}-desc" '
        f'font-size="{_FONT}">'
        f'<title id="{fig_id}-title">{esc(title)}</title><desc id="{fig_id}-desc">{esc(desc)}</desc>'
        f"{body}</svg>"
    )


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
    longest = max((len(s) for s in labels), default=0)
    return float(min(hi, max(lo, longest * _CHAR_W + 16)))


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
    if not colour.startswith("#"):
        return 1.0
    r, g, b = (x / 255 for x in _rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _f(x: float) -> str:
    # Fixed precision keeps the SVG byte-identical across runs and platforms.
    text = f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text
