"""Task-specific analyses on a task page: tables formatted by kind, pairwise tests as matrices, hostile text inert."""

from __future__ import annotations

from pathlib import Path

from markupsafe import Markup
from report_fixture import HOSTILE
from test_site import norm, parse

from openpert.report.formatting import MISSING
from openpert.report.paths import TaskPaths
from openpert.report.statistics import MAX_OPEN_ROWS, pairwise_matrices, statistic_section
from openpert.report.task_results import TaskResults

#: A method label short enough to show whole: markup and an ampersand, as text.
SHORT_HOSTILE = "A <b>&amp;"


def _results() -> TaskResults:
    data = {
        "task": {"name": "t"},
        "datasets": [{"dataset_id": "d", "dataset_name": "Data"}],
        "metrics": [{"id": "acc", "label": "Accuracy", "maximize": True}],
        "methods": [{"id": "a", "label": SHORT_HOSTILE}, {"id": "b", "label": "B"}, {"id": "c", "label": "C"},
                    {"id": "pos", "label": "Positive", "type": "control_method", "control": "positive"}],
    }
    return TaskResults(data, Path("."))


def _doc(tmp_path: Path, html: str):
    page = tmp_path / "page.html"
    page.write_text(f"<html><body>{html}</body></html>")
    return parse(page)


def _test(a: str, b: str, diff: float, p: float) -> dict:
    return {"dataset_id": "d", "metric_id": "acc", "method_a": a, "method_b": b, "mean_difference": diff, "p_value": p}


def test_matrix_marks_follow_the_tests_and_leave_controls_out(tmp_path: Path) -> None:
    rows = [_test("a", "b", 0.2, 0.001), _test("a", "pos", -0.5, 0.001), _test("b", "c", 0.01, 0.4)]
    html = pairwise_matrices(_results(), rows)
    assert isinstance(html, Markup) and SHORT_HOSTILE not in html and "A &lt;b&gt;&amp;amp;" in html
    table = _doc(tmp_path, html).find("table", class_="pairwise")
    assert norm(table.find("caption").text()) == "Data · Accuracy ↑"
    header = [norm(th.text()) for th in table.find("thead").find_all("th")]
    assert header == ["Row vs column", SHORT_HOSTILE, "B", "C"]  # no positive control
    cells = {norm(r.elements()[0].text()): r.elements()[1:] for r in table.find("tbody").find_all("tr")}
    a_row, b_row = cells[SHORT_HOSTILE], cells["B"]
    assert [c.attrs["class"] for c in a_row] == ["pm pm-self", "pm pm-better", "pm pm-none"]
    assert b_row[0].attrs["class"] == "pm pm-worse" and b_row[2].attrs["class"] == "pm pm-tie"
    assert a_row[1].attrs["title"].startswith(f"{SHORT_HOSTILE} is significantly better than B: mean difference")
    assert a_row[2].attrs["title"] == f"{SHORT_HOSTILE} vs C: not tested" and norm(a_row[2].text()) == MISSING
    assert norm(a_row[1].find("span", class_="visually-hidden").text()) == "significantly better than"
    assert 'class="legend"' in html


def test_matrices_need_two_methods() -> None:
    html = pairwise_matrices(_results(), [_test("a", "pos", 0.1, 0.01)])
    assert "Fewer than two methods" in html and "<table" not in html


def test_section_formats_columns_and_collapses_long_tables(tmp_path: Path) -> None:
    results = _results()
    paths = TaskPaths(results, "t")
    rows = [{"dataset_id": "d", "method_id": "a", "n_items": i, "agrees": i % 2 == 0, "note": HOSTILE, "p_value": 1e-5}
            for i in range(MAX_OPEN_ROWS + 1)]
    entry = {"label": f"Check {HOSTILE}", "description": "Per *item*.", "table": rows}
    html = statistic_section(results, paths, "check", entry)
    assert isinstance(html, Markup) and HOSTILE not in html
    doc = _doc(tmp_path, html)
    assert norm(doc.find("em").text()) == "item"
    assert doc.find("a", class_="download").attrs["href"] == paths.statistic_csv("check")
    assert norm(doc.find("summary").text()) == f"Table ({MAX_OPEN_ROWS + 1} rows)"
    table = doc.find("table", id=f"table-stat-{paths.statistic_slug('check')}")
    assert norm(table.find("caption").text()) == f"Check {HOSTILE}"
    first = table.find("tbody").find("tr").elements()
    assert [norm(c.text()) for c in first][:3] == ["Data", SHORT_HOSTILE, "0"]
    assert first[3].find_all("span", class_="bool-yes") and first[3].attrs["data-sort"] == "1"
    assert norm(first[4].text()) == HOSTILE


def test_short_tables_stay_open_and_empty_ones_say_so(tmp_path: Path) -> None:
    results = _results()
    paths = TaskPaths(results, "t")
    html = statistic_section(results, paths, "s", {"table": [{"x": 1.5}]})
    assert "<details>" not in html and 'class="data sortable"' in html
    empty = statistic_section(results, paths, "s", {"table": []})
    assert "No rows: the analysis had nothing to report" in empty and "<table" not in empty
    pairs = statistic_section(results, paths, "p", {"table": [_test("a", "b", 0.2, 0.001)]})
    assert "All 1 tests, controls included" in pairs and 'class="pairwise"' in pairs


def test_matrix_caption_cuts_a_long_dataset_name_and_pools_without_ids(tmp_path: Path) -> None:
    results = _results()
    results.data["datasets"][0]["dataset_name"] = "A dataset name far longer than any label the tables show whole"
    html = pairwise_matrices(TaskResults(results.data, Path(".")), [_test("a", "b", 0.2, 0.001)])
    caption = norm(_doc(tmp_path, html).find("caption").text())
    assert caption.endswith("… · Accuracy ↑") and len(caption) < 60
    pooled = {"method_a": "a", "method_b": "b", "mean_difference": 0.1, "p_value": 0.2}
    doc = _doc(tmp_path, pairwise_matrices(results, [pooled]))
    assert norm(doc.find("caption").text()) == "All items"
    assert doc.find("div", class_="matrix-wrap").attrs["aria-label"] == "Pairwise tests, All items"
