"""Tests of a task's page rendered from its templates: sections, navigation, scale, coverage, escaping."""

from __future__ import annotations

import copy
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from report_fixture import HOSTILE, build_results  # noqa: E402

from openpert.report.paths import TaskPaths
from openpert.report.task_page import coverage_note, render_task_page, scale_details
from openpert.report.task_results import TaskResults

JS_URL = "javascript:alert(1)"


class _Tags(HTMLParser):
    """Every start tag of a document with its attributes, every id, and its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def tags(document: str) -> _Tags:
    parser = _Tags()
    parser.feed(document)
    parser.close()
    return parser


def render(data: dict[str, Any], log_links: dict[str, str] | None = None,
           extra_sections: tuple[tuple[str, str, str, str], ...] = ()) -> str:
    results = TaskResults(data, Path("/nonexistent/results"))
    return str(render_task_page(results, TaskPaths(results, data["task"]["name"]), log_links or {}, extra_sections))


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    return build_results()


def test_navigation_lists_every_section_in_page_order(data: dict[str, Any]) -> None:
    page = render(data, extra_sections=(("changes", "Changes since the last run", "<p>none</p>", ""),))
    parsed = tags(page)
    nav = re.search(r'<nav class="toc" aria-label="On this page">(.*?)</nav>', page, re.S)
    assert nav, "the page has its on-this-page navigation"
    linked = re.findall(r'href="#([^"]+)"', nav.group(1))
    sections = [a["id"] for t, a in parsed.tags if t == "section"]
    assert linked == sections
    assert sections[:3] == ["overview", "changes", "scale"]
    assert sections[-4:] == ["resources", "components", "provenance", "downloads"]
    for dataset in data["datasets"]:
        assert f"dataset-{dataset['dataset_id']}" in sections
    # Each section is labelled by its own heading.
    for t, a in parsed.tags:
        if t == "section":
            assert a["aria-labelledby"] == f"{a['id']}-title"
    assert page.count('id="headline-coverage"') == 0  # every headline metric has a value in the fixture


def test_scale_is_explained_once_in_one_line(data: dict[str, Any]) -> None:
    results = TaskResults(data, Path("/nonexistent"))
    details = str(scale_details(results))
    summary = re.search(r'<details class="scale-details">\s*<summary>(.*?)</summary>', details, re.S).group(1)
    assert summary == ('<span class="scale-note">Scaled scores: 0 = strongest negative control, 1 = positive '
                       'control.</span> <span class="more">How the scores are made</span>')
    page = render(data)
    assert page.count('class="scale-details"') == 1
    # The scale's sentence sits in the details, nowhere else on the page.
    assert "".join(tags(page).text).count(data["scale"]["description"]) == 1


def test_scale_table_lists_only_the_cells_that_set_a_scale(data: dict[str, Any]) -> None:
    changed = copy.deepcopy(data)
    bounds = changed["scale"]["bounds"]
    setting = len(bounds)
    bounds.append({"dataset_id": "k562", "metric_id": "accuracy", "hi": None, "lo": None})
    bounds.append({"dataset_id": "k562", "metric_id": "brier", "hi": 0.5, "lo": 0.5})
    bounds.append({"dataset_id": "rpe1", "metric_id": "accuracy", "hi": float("nan"), "lo": 0.1})
    page = render(changed)
    table = re.search(r'<table class="data sortable" id="table-scale">(.*?)</table>', page, re.S).group(1)
    assert f"Raw values that set the scale ({setting})" in table
    assert table.count("<tr>") == setting + 1  # the header row and one row per setting cell


def test_coverage_note_says_how_many_headline_metrics_are_averaged_and_why(data: dict[str, Any]) -> None:
    changed = copy.deepcopy(data)
    changed["headline_metrics"] = [*changed["headline_metrics"], "factuality", "hallucination", "novelty"]
    changed["skipped"] = [{"id": "mechanism_judge", "type": "metric", "reason": "needs a language model",
                           "metrics": [{"id": "factuality", "label": "Factuality <judge>"},
                                       {"id": "hallucination", "label": "Hallucination"}]}]
    results = TaskResults(changed, Path("/nonexistent"))
    averaged = len(data["headline_metrics"])
    note = str(coverage_note(results))
    assert f"<strong>The scores average {averaged} of {averaged + 3} headline metrics.</strong>" in note
    # The metrics a skipped component would compute are named by their labels, with the one reason.
    left_out = "Factuality &lt;judge&gt;, Hallucination (needs a language model); novelty (no method has a value)"
    assert f"Left out: {left_out}." in note
    assert '<a href="#qc">Quality-control flags</a>' in note
    page = render(changed)
    qc = re.search(r'<section id="qc".*?</section>', page, re.S).group(0)
    assert (f'<p class="qc-note">Scores average {averaged} of {averaged + 3} headline metrics; left out: '
            f"{left_out}.</p>") in qc
    # Without a skip reason, the note says the metrics have no value.
    del changed["skipped"]
    note = str(coverage_note(TaskResults(changed, Path("/nonexistent"))))
    assert "factuality, hallucination, novelty (no method has a value)" in note
    assert str(coverage_note(TaskResults(data, Path("/nonexistent")))) == ""


def test_failures_log_links_and_empty_sections(data: dict[str, Any]) -> None:
    failure = data["failures"][0]
    page = render(data, log_links={failure["log"]: "logs/first.log"})
    failures = re.search(r'<section id="failures".*?</section>', page, re.S).group(0)
    assert '<a href="logs/first.log">log</a>' in failures
    assert f"<code>{data['failures'][1]['log']}</code>" in failures  # a log not copied shows its path
    bare = render({"schema_version": 1, "task": {"name": "bare"}})
    assert '<p class="empty">No job failed.</p>' in bare
    assert '<p class="empty">No quality-control flag was raised.</p>' in bare
    assert '<p class="empty">No resource use was recorded.</p>' in bare
    assert 'id="about"' not in bare and 'id="skipped"' not in bare


def test_hostile_text_reaches_the_page_inert(data: dict[str, Any]) -> None:
    hostile = copy.deepcopy(data)
    hostile["task"]["label"] = "Task " + HOSTILE
    hostile["task"]["summary"] = "Summary " + HOSTILE + f" [link]({JS_URL})"
    hostile["task"]["description"] = "Lead " + HOSTILE + f"\n\nMore [x]({JS_URL})"
    hostile["task"]["links"] = {"repository": JS_URL}
    dataset = hostile["datasets"][0]
    dataset.update(dataset_name="Data " + HOSTILE, dataset_license="Licence " + HOSTILE, dataset_reference=JS_URL,
                   dataset_url=JS_URL, dataset_organism=HOSTILE, dataset_summary=HOSTILE)
    dataset["source_files"][0]["path"] = HOSTILE
    hostile["methods"][0]["label"] = "Method " + HOSTILE
    hostile["metrics"][0]["label"] = "Metric " + HOSTILE
    for row in hostile["failures"]:
        row.update(reason=HOSTILE, stage=HOSTILE, component=HOSTILE, job_id=HOSTILE)
    for row in hostile["qc"]:
        row["message"] = HOSTILE
    for row in hostile["resources"]:
        row.update(job_id=HOSTILE, component=HOSTILE, status=HOSTILE)
    hostile["skipped"] = [{"id": HOSTILE, "type": HOSTILE, "reason": HOSTILE}]
    hostile["config_errors"] = [{"component": HOSTILE, "type": "metric", "config": HOSTILE, "reason": HOSTILE}]
    hostile["dynamic_range"][0].update(small=None, reason=HOSTILE)
    page = render(hostile)
    parsed = tags(page)
    scripts = [a for t, a in parsed.tags if t == "script"]
    assert scripts == [{"src": "../static/report.js", "defer": None}]
    for tag, attrs in parsed.tags:
        for name, value in attrs.items():
            assert not (value or "").strip().lower().startswith("javascript:"), (tag, name, value)
    text = "".join(parsed.text)
    assert text.count(HOSTILE) >= 10  # shown as text, in every section that got it
    assert '<a href="' + JS_URL not in page


def test_render_task_page_returns_a_document(data: dict[str, Any]) -> None:
    page = render(data)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<title>PerturbQA · " in page
    assert '<nav class="breadcrumbs" aria-label="Breadcrumb"><ol><li><a href="../index.html">All tasks</a></li>' in page


def test_a_dynamic_range_row_without_a_verdict_shows_its_reason(data: dict[str, Any]) -> None:
    unknown = copy.deepcopy(data)
    unknown["dynamic_range"][0].update(small=None, reason="no ceiling control on this dataset")
    table = re.search(r'<table[^>]*id="table-dynamic-range".*?</table>', render(unknown), re.S).group(0)
    assert '<span class="reason">no ceiling control on this dataset</span>' in table
    assert "Cell(" not in table
