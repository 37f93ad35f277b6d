"""Dataset leaderboards: escaping, headline columns first, "–" for a missing value, the controls band."""

from __future__ import annotations

import re

from leaderboard_fixture import HOSTILE, HOSTILE_URL, hostile_results, parse, small_results
from markupsafe import Markup

from openpert.report.leaderboard_html import dataset_table, metric_tag_views
from openpert.report.paths import TaskPaths
from openpert.report.templating import macro


def _row(html: str, method_id: str) -> str:
    match = re.search(rf'<tr data-method="{method_id}">(.*?)</tr>', html)
    assert match, f"no row of {method_id}"
    return match.group(1)


def test_hostile_texts_reach_the_table_as_text() -> None:
    results = hostile_results()
    html = dataset_table(results, TaskPaths(results, "t"), "d1", "table-d1")
    assert isinstance(html, Markup)
    elements = parse(html)
    assert "script" not in elements.tags and "img" not in elements.tags
    assert not elements.handlers
    assert not [h for h in elements.hrefs if h.lower().startswith("javascript:")]
    # The texts are still there, escaped: the method's label and the QC message of its abstentions.
    assert "A &lt;script&gt;" in html
    assert '</a> <span class="tag tag-abstains" title="&lt;script&gt;' in _row(html, "a")


def test_headline_columns_come_first_and_diagnostic_cells_are_marked() -> None:
    results = small_results()
    html = str(dataset_table(results, TaskPaths(results, "t"), "d1", "table-d1"))
    heads = re.findall(r'<th scope="colgroup" colspan="2" class="metric-head( diag)?">(\w+)', html)
    assert heads == [("", "Head"), (" diag", "Diag")]
    cells = re.findall(r'<td class="([^"]*)"', _row(html, "a"))
    # rank, score, then the headline metric's two cells, then the diagnostic one's.
    assert cells[2:4] == ["num best", "num scaled"]
    assert cells[4].startswith("diag num") and cells[5] == "diag num scaled"


def test_a_missing_value_reads_as_a_dash_never_as_zero() -> None:
    results = small_results()
    row = _row(str(dataset_table(results, TaskPaths(results, "t"), "d1", "table-d1")), "c")
    assert '<td class="diag num" data-sort="">–</td><td class="diag num scaled" data-sort="">–</td>' in row
    assert "0.00" not in row


def test_controls_sit_in_their_own_band_with_a_toggle() -> None:
    results = small_results()
    html = str(dataset_table(results, TaskPaths(results, "t"), "d1", "table-d1"))
    assert html.index('<tbody class="band-methods">') < html.index('<tr data-method="a">')
    controls = html[html.index('<tbody class="band-controls" data-band="controls">'):]
    assert '<tr data-method="pos">' in controls and '<tr data-method="a">' not in controls
    assert '<td class="num rank" data-sort="">–</td>' in _row(html, "pos")
    toggle_tools = macro("controls_toggle", "leaderboard/macros.html")
    tools = str(toggle_tools("table-d1", "x.csv", True))
    assert 'data-controls-for="table-d1"' in tools and 'href="x.csv"' in tools
    assert "toggle" not in str(toggle_tools("table-d1", "x.csv", False))


def test_metric_tags_are_escaped_and_empty_for_a_plain_headline_metric() -> None:
    results = small_results()

    def metric_tags(results, dataset_id, metric_id, compact=False):
        return macro("metric_tags", "leaderboard/macros.html")(metric_tag_views(results, dataset_id, metric_id), compact)

    assert str(metric_tags(results, "d1", "h")) == ""
    assert str(metric_tags(results, "d1", "x")).startswith(' <span class="tag tag-diagnostic"')
    compact = str(metric_tags(results, None, "x", compact=True))
    assert 'class="tag tag-diagnostic tag-mark"' in compact and "(diagnostic)" in compact
    assert HOSTILE not in compact and HOSTILE_URL not in compact


def test_prompts_too_long_are_marked_beside_the_method_on_its_dataset_and_in_the_overview() -> None:
    from openpert.report.overview import overview

    message = "b on d1: 3 of 40 prompts were longer than the context window of 4,096 tokens"
    results = small_results(qc=[{"flag": "llm_prompt_too_long", "dataset_id": "d1", "method_id": "b", "message": message},
                                {"flag": "llm_judge_prompt_too_long", "dataset_id": "d1", "method_id": "c",
                                 "message": "the judge's prompts"}])
    d1 = str(dataset_table(results, TaskPaths(results, "t"), "d1", "table-d1"))
    assert f'<span class="tag tag-abstains" title="{message}">prompts too long</span>' in _row(d1, "b")
    d2 = str(dataset_table(results, TaskPaths(results, "t"), "d2", "table-d2"))
    # Only where it was flagged, and never for a judge's prompts about the method's outputs.
    assert "prompts too long" not in _row(d2, "b") and "prompts too long" not in _row(d1, "c")
    html = str(overview(results, TaskPaths(results, "t")))
    assert f'title="{message}">prompts too long on 1 dataset</span>' in _row(html, "b")
    assert "prompts too long" not in _row(html, "c")
