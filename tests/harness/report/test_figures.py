"""The figures: axis ticks, colours, label truncation and wrapping, layout, and escaping in the SVG."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from openpert.report import figures
from openpert.report.figures import (
    Bar,
    BarRow,
    HeatCell,
    HeatRow,
    bar_chart_view,
    dataset_heatmap,
    figure_svg,
    heatmap_view,
    is_dark,
    nice_ticks,
    resource_chart,
    score_colour,
)
from openpert.report.formatting import format_number
from openpert.report.task_results import TaskResults

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert(1)</script> "quoted" & \'single\' onload="x"'
CSS = Path(figures.__file__).parent / "static" / "report.css"
TEMPLATES = Path(figures.__file__).parent / "templates" / "figures"


def _svg(markup: str) -> ET.Element:
    """Parse a figure as XML: it must be well-formed on its own."""
    return ET.fromstring(str(markup))


def _texts(root: ET.Element, tag: str) -> list[str]:
    return ["".join(e.itertext()) for e in root.iter(f"{SVG}{tag}")]


# -- ticks and colours ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vmax", "expected"),
    [
        (7, [0, 2, 4, 6, 8]),
        (100, [0, 25, 50, 75, 100]),
        (3.2, [0, 1, 2, 3, 4]),
        (0.012, [0, 0.005, 0.01, 0.015]),
        (950, [0, 250, 500, 750, 1000]),
    ],
)
def test_nice_ticks_are_round_steps_from_zero_past_the_maximum(vmax: float, expected: list[float]) -> None:
    assert nice_ticks(vmax) == pytest.approx(expected)


@pytest.mark.parametrize("vmax", [0.0, -3.0, math.nan, math.inf])
def test_nice_ticks_of_nothing_to_show_is_the_unit_axis(vmax: float) -> None:
    assert nice_ticks(vmax) == [0.0, 1.0]


def test_nice_ticks_steps_are_one_two_two_and_a_half_or_five_times_a_power_of_ten() -> None:
    for vmax in (0.37, 1.0, 12.5, 61, 299.9, 4321, 1e7 + 1):
        ticks = nice_ticks(vmax)
        step = ticks[1] - ticks[0]
        mantissa = step / 10 ** math.floor(math.log10(step))
        assert any(math.isclose(mantissa, m) for m in (1, 2, 2.5, 5)), (vmax, ticks)
        assert ticks[0] == 0 and ticks[-1] >= vmax > ticks[-2], (vmax, ticks)
        assert all(math.isclose(b - a, step) for a, b in zip(ticks, ticks[1:]))


def test_score_colour_runs_the_palette_and_clips() -> None:
    assert score_colour(0) == "#f3f6fb" and score_colour(1) == "#0d2f66"
    assert score_colour(-2.5) == score_colour(0) and score_colour(7) == score_colour(1)
    # The third of seven stops sits at 2/6 of the scale.
    assert score_colour(2 / 6) == "#9ec0e6"
    assert score_colour(None) == score_colour(math.nan) == "#eceff3"
    # Darker as the score rises.
    lum = [figures._luminance(score_colour(v / 20)) for v in range(21)]
    assert all(a > b for a, b in zip(lum, lum[1:]))


def test_only_dark_fills_take_white_text() -> None:
    assert is_dark(score_colour(1))
    assert not is_dark(score_colour(0)) and not is_dark(score_colour(None))


# -- labels -----------------------------------------------------------------------------------


def test_truncate_keeps_short_labels_and_cuts_long_ones_with_an_ellipsis() -> None:
    assert figures._truncate("MLP", 10) == "MLP"
    assert figures._truncate("exactly10!", 10) == "exactly10!"
    cut = figures._truncate("Prevalence game (adversarial control)", 12)
    assert cut == "Prevalence…" and len(cut) <= 12
    assert figures._truncate("abcdefgh", 1) == "abc…"  # never shorter than four characters


def test_wrap_fills_lines_up_to_the_width_and_cuts_the_last_one() -> None:
    assert figures._wrap("Dataset score", 11, 3) == ["Dataset", "score"]
    assert figures._wrap("Macro AUROC", 11, 3) == ["Macro AUROC"]
    assert figures._wrap("", 11, 3) == [""]
    long = figures._wrap("one two three four five six seven eight nine", 9, 3)
    assert long[:2] == ["one two", "three"] and long[2].endswith("…") and len(long) == 3
    assert all(len(line) <= 9 for line in long)
    assert figures._wrap("supercalifragilistic", 8, 3) == ["superca…"]


def test_label_width_is_whole_pixels_between_its_bounds() -> None:
    assert figures._label_width([], 110, 260) == 110
    width = figures._label_width(["Graph attention"], 110, 260)
    assert width == math.ceil(len("Graph attention") * 6.9 + 16) and width == int(width)
    assert figures._label_width(["x" * 200], 110, 260) == 260


def test_cell_text_prints_two_decimals_and_no_negative_zero() -> None:
    assert figures._cell_text(0.456) == "0.46"
    assert figures._cell_text(-0.001) == "0.00"
    assert figures._cell_text(None) == figures._cell_text(math.nan) == "–"


# -- layout -----------------------------------------------------------------------------------


def _groups() -> list[tuple[str, list[HeatRow]]]:
    cells = [HeatCell(0.9, "dark"), HeatCell(0.1, "light"), HeatCell(None, "failed", failed=True)]
    return [
        ("Methods", [HeatRow("MLP", cells), HeatRow("A method with a very long name " * 4, cells)]),
        ("Controls", [HeatRow("Ground truth (positive control)", cells)]),
    ]


def test_heatmap_view_places_columns_and_rows_on_a_grid() -> None:
    view = heatmap_view("f", "T", "D", ["Macro AUROC", "Accuracy", "Dataset score"], _groups())
    rows = [row for group in view.groups for row in group.rows]
    xs = [float(c.x) for c in rows[0].marks]
    # Cells are 86 apart, the summary column set 12 further off.
    assert xs[1] - xs[0] == 86 and xs[2] - xs[1] == 86 + 12
    assert all(float(r.marks[0].x) == xs[0] for r in rows)
    ys = [float(r.marks[0].y) for r in view.groups[0].rows]
    assert ys[1] - ys[0] == 30
    # Whole-pixel label column: every coordinate prints without decimals.
    assert all("." not in v for r in rows for c in r.marks for v in (c.x, c.y, c.text.x, c.text.y))
    assert [c.text_class for c in rows[0].marks] == ["fig-dark", "", "fig-failed"]
    assert [c.text.text for c in rows[0].marks] == ["0.90", "0.10", "failed"]
    assert rows[0].marks[2].fill == "url(#f-hatch)"
    # The long label is cut to fit its column; its full text stays for the tooltip.
    long = rows[1].label
    assert long.shown.endswith("…") and len(long.shown) * 6.9 <= 260 and long.full.startswith(long.shown[:-1])
    assert [line.text for line in view.headers[2]] == ["Dataset", "score"]
    assert [offset for offset, _ in view.stops] == ["0", "0.167", "0.333", "0.5", "0.667", "0.833", "1"]


def _bar_rows() -> list[BarRow]:
    return [
        BarRow("Fast", [Bar(0, 30.0, "30 s", "Fast on A"), Bar(1, 60.0, "1 min", "Fast on B")],
               [Bar(0, 500.0, "500 MB", "Fast on A"), Bar(1, None, "–", "Fast on B")]),
        BarRow("Slow", [Bar(0, 240.0, "4 min · exit 137", "Slow on A", failed=True)],
               [Bar(0, 4000.0, "4 GB", "Slow on A", failed=True)]),
    ]


def test_bar_chart_view_scales_bars_to_their_panel() -> None:
    view = bar_chart_view("r", "T", "D", _bar_rows(), ["Dataset A", "Dataset B"])
    time, memory = view.panels
    assert (time.name, time.unit, memory.unit) == ("Run time", "minutes", "GB")
    assert [t.text for t in time.ticks] == ["0", "1", "2", "3", "4"]
    bars = [b for row in view.rows for b in row.marks]
    widths = {b.tooltip + str(i): float(b.width) for i, b in enumerate(bars)}
    # Time bars: 30 s, 60 s, 240 s on one scale; memory: 500 MB and 4000 MB on another.
    assert widths["Fast on B1"] == pytest.approx(2 * widths["Fast on A0"], abs=0.1)
    assert widths["Slow on A4"] == pytest.approx(8 * widths["Fast on A0"], abs=0.1)
    assert widths["Slow on A5"] == pytest.approx(8 * widths["Fast on A2"], abs=0.1)
    assert widths["Fast on B3"] == 0  # no value: no bar
    assert [b.failed for b in bars] == [False, False, False, False, True, True]
    assert bars[0].fill != bars[1].fill  # one colour per dataset
    # Every bar starts at its panel's axis, the memory panel right of the time panel.
    assert {b.x for b in bars[:2]} == {time.x} and float(memory.x) > float(time.x) + 300
    assert [e.text.text for e in view.legend] == ["Dataset A", "Dataset B", "failed job"]
    assert [e.failed for e in view.legend] == [False, False, True]
    assert len(view.stripes) == 1  # every other row


def test_long_legends_wrap_to_the_chart_width() -> None:
    names = [f"A dataset with a long name {i}" for i in range(12)]
    view = bar_chart_view("r", "T", "D", _bar_rows(), names)
    width = float(view.frame.width)
    assert len({e.y for e in view.legend}) > 1
    assert all(float(e.text.x) + len(e.text.text) * 6.9 <= width for e in view.legend)


# -- markup -------------------------------------------------------------------------------------


def test_heatmap_svg_is_one_compact_well_formed_svg() -> None:
    markup = figure_svg(heatmap_view("fig-1", "Scaled scores", "A description.", ["Metric", "Dataset score"], _groups()))
    assert not re.search(r">\s*\n\s*<", markup)
    root = _svg(markup)
    assert root.tag == f"{SVG}svg" and root.get("class") == "figure-svg fig-heatmap"
    assert root.get("aria-labelledby") == "fig-1-title fig-1-desc"
    assert root.find(f"{SVG}title").get("id") == "fig-1-title"
    assert len(list(root.iter(f"{SVG}rect"))) == 3 * 2 + 3 + 1  # cells (two columns), legend, hatch tile
    assert {"dark", "light"} <= set(_texts(root, "title")) and "failed" not in _texts(root, "title")


def test_every_figure_class_has_a_rule_in_the_stylesheet() -> None:
    css = CSS.read_text(encoding="utf-8")
    used = set()
    for template in TEMPLATES.glob("*.svg"):
        used |= set(re.findall(r'class="(fig-[a-z-]+)"', template.read_text(encoding="utf-8")))
    used |= {"fig-dark", "fig-failed", "fig-heatmap", "fig-bar-chart"}
    assert {"fig-cells", "fig-bars", "fig-legend"} <= used
    missing = {name for name in used if not re.search(rf"\.{name}\b(?!-)", css)}
    assert not missing


def test_hostile_labels_land_inert_in_the_heatmap() -> None:
    groups = [("Methods", [HeatRow(HOSTILE, [HeatCell(0.5, f"{HOSTILE} · tooltip")])])]
    markup = figure_svg(heatmap_view("fig-x", f"title {HOSTILE}", f"desc {HOSTILE}", [HOSTILE], groups))
    assert "<script" not in markup and 'onload="x"' not in markup
    root = _svg(markup)
    assert not any(el.tag.endswith("script") for el in root.iter())
    assert all(not name.startswith("on") for el in root.iter() for name in el.attrib)
    titles = _texts(root, "title")
    assert f"title {HOSTILE}" in titles and HOSTILE in titles and f"{HOSTILE} · tooltip" in titles
    assert _texts(root, "desc") == [f"desc {HOSTILE}"]
    header = "".join(_texts(root, "tspan"))
    assert header.startswith("<script>") and header.endswith("…")  # wrapped and cut, as text


def test_hostile_labels_land_inert_in_the_bar_chart() -> None:
    rows = [BarRow(HOSTILE, [Bar(0, 5.0, HOSTILE, f"tip {HOSTILE}")], [Bar(0, 50.0, "50 MB", "m")])]
    markup = figure_svg(bar_chart_view('fig-"r"', HOSTILE, HOSTILE, rows, [HOSTILE]))
    assert "<script" not in markup
    root = _svg(markup)
    assert not any(el.tag.endswith("script") for el in root.iter())
    assert root.get("aria-labelledby") == 'fig-"r"-title fig-"r"-desc'
    texts = _texts(root, "title")
    assert HOSTILE in texts and f"tip {HOSTILE}" in texts
    assert HOSTILE in _texts(root, "text")  # the bar's value label


def _results(label: str) -> TaskResults:
    data: dict[str, Any] = {
        "datasets": [{"dataset_id": "d1", "dataset_name": f"Dataset {label}"}],
        "metrics": [{"id": "m1", "label": f"Metric {label}"}],
        "methods": [{"id": "a", "type": "method", "label": label},
                    {"id": "pos", "type": "control_method", "control": "positive", "label": "Truth"}],
        "scores": [{"dataset_id": "d1", "method_id": "a", "metric_id": "m1", "raw": 0.4, "scaled": 0.5},
                   {"dataset_id": "d1", "method_id": "pos", "metric_id": "m1", "raw": 0.9, "scaled": 1.0}],
        "dataset_scores": [{"dataset_id": "d1", "method_id": "a", "score": 0.5},
                           {"dataset_id": "d1", "method_id": "pos", "score": 1.0}],
        "resources": [{"stage": "method", "method_id": "a", "dataset_id": "d1", "status": "failed",
                       "exit_code": 137, "duration_s": 75.0, "peak_memory_mb": 900.0},
                      {"stage": "method", "method_id": "pos", "dataset_id": "d1", "status": "succeeded",
                       "duration_s": 5.0, "peak_memory_mb": 100.0}],
    }
    return TaskResults(data, Path("."))


def test_task_figures_escape_labels_from_results() -> None:
    results = _results(HOSTILE)
    heatmap = dataset_heatmap(results, "d1", "fig-heat-0")
    heat = _svg(heatmap)
    tip = f"{HOSTILE} · Metric {HOSTILE}: scaled {format_number(0.5)} (raw {format_number(0.4)})"
    assert tip in _texts(heat, "title")
    assert _texts(heat, "title")[0] == f"Scaled scores on Dataset {HOSTILE}"
    chart = resource_chart(results, "fig-resources")
    tips = _texts(_svg(chart), "title")
    assert any(t.startswith(f"{HOSTILE} on Dataset {HOSTILE}: 1 min") and "exit 137" in t for t in tips), tips
    assert "<script" not in heatmap and "<script" not in chart


def test_resource_chart_is_empty_without_resources() -> None:
    results = _results("A")
    results.data["resources"] = []
    assert resource_chart(TaskResults(results.data, Path(".")), "fig-resources") == ""
