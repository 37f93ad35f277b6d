"""The task overview: escaping, "–" for a missing value, headline-only "Top group", the test matrix."""

from __future__ import annotations

import re
from pathlib import Path

from leaderboard_fixture import hostile_results, parse, small_results
from markupsafe import Markup

from openpert.report import overview as overview_module
from openpert.report.overview import overview
from openpert.report.paths import TaskPaths
from openpert.report.task_results import TaskResults


def _row(html: str, method_id: str) -> str:
    match = re.search(rf'<tr data-method="{method_id}">(.*?)</tr>', html)
    assert match, f"no row of {method_id}"
    return match.group(1)


def test_hostile_texts_reach_the_overview_as_text() -> None:
    results = hostile_results()
    html = overview(results, TaskPaths(results, "t"))
    assert isinstance(html, Markup)
    elements = parse(html)
    assert "script" not in elements.tags and "img" not in elements.tags
    assert not elements.handlers
    assert not [h for h in elements.hrefs if h.lower().startswith("javascript:")]
    assert "Overview of Task &lt;script&gt;" in html
    # The abstention message is in a title, escaped.
    assert "abstains on 1 dataset<" in html


def test_a_metric_a_method_lacks_reads_as_a_dash() -> None:
    results = small_results(headline_metrics=["h", "x"])
    row = _row(str(overview(results, TaskPaths(results, "t"))), "c")
    cells = re.findall(r'<td class="(sc[^"]*)"[^>]*>([^<]*)<', row)
    # Overall, two datasets, then the metrics in their order (x, h): c has no value of x.
    assert cells[3] == ("sc none", "–")
    assert "0.00" not in row


def test_top_group_counts_headline_tests_only() -> None:
    results = small_results()
    html = str(overview(results, TaskPaths(results, "t")))
    # b: worse on d1, tied on d2 on the headline metric; its diagnostic losses do not count.
    assert re.search(r'<td class="tests"[^>]*>1/2</td>', _row(html, "b"))
    assert re.search(r'<td class="tests all-top"[^>]*>2/2</td>', _row(html, "a"))
    matrix = str(overview_module.test_matrix(results, TaskPaths(results, "t"), []))
    assert matrix == ""
    assert "The tests behind the groups (2 dataset and metric pairs)" in html
    assert html.count('class="t t-') == 2 * len(re.findall(r'<tr data-method="[abc]">', html.split("table-tests")[1]))


def test_the_controls_band_and_toggle() -> None:
    results = small_results()
    html = str(overview(results, TaskPaths(results, "t")))
    band = html[html.index('<tbody class="band-controls" data-band="controls">'):]
    assert '<tr data-method="pos">' in band.split("</tbody>")[0]
    assert '<span class="rk">' not in _row(html, "pos")
    assert 'data-controls-for="table-overview"' in html


def test_no_method_run() -> None:
    results = TaskResults({"task": {"name": "t"}, "datasets": [], "metrics": [], "methods": []}, Path("."))
    assert str(overview(results, TaskPaths(results, "t"))) == '<p class="empty">No method was run.</p>'
