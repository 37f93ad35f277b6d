"""Tests of the pages a heavy task page hands its parts to: sections found, dataset pages in a browser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report_fixture import write_results_dir  # noqa: E402

import openpert.report.site as site_module  # noqa: E402
from openpert.report.dataset_page import page_sections, render_dataset_page, section_content  # noqa: E402
from openpert.report.leaderboards import overview_rows  # noqa: E402
from openpert.report.paths import TaskPaths  # noqa: E402
from openpert.report.task_results import load_results  # noqa: E402


def test_page_sections_finds_top_level_sections_only() -> None:
    page = ('<main><section id="a" aria-labelledby="a-title"><h2 id="a-title">A &amp; B</h2><p>x</p>'
            '<section id="inner"><h3>in</h3></section></section>\n'
            '<section id="b"><h2 id="b-title">B</h2><table></table></section></main>')
    spans = page_sections(page)
    assert list(spans) == ["a", "b"]
    assert page[spans["b"][0]:spans["b"][1]] == '<section id="b"><h2 id="b-title">B</h2><table></table></section>'
    assert str(section_content(page, spans["a"])) == '<p>x</p><section id="inner"><h3>in</h3></section>'


@pytest.mark.parametrize("broken", ['<section id="a"><h2>A</h2>', "<p></p></section>"])
def test_page_sections_refuses_a_page_whose_sections_do_not_nest(broken: str) -> None:
    with pytest.raises(ValueError, match="section"):
        page_sections(broken)


def test_a_dataset_page_links_back_up_to_the_task_folder(tmp_path: Path) -> None:
    results = load_results(write_results_dir(tmp_path / "perturbqa") / "results.json")
    paths = TaskPaths(results, "perturbqa")
    dataset = results.datasets[0]
    page = str(render_dataset_page(results, paths, dataset, 0, overview_rows(results)))
    assert '<a href="../../index.html">All tasks</a>' in page
    assert 'href="../../static/report.css"' in page
    assert f'href="../leaderboard_{paths.dataset_slug(dataset["dataset_id"])}.csv"' in page
    assert 'href="../methods/mlp.html"' in page and 'href="methods/' not in page
    assert 'id="table-tests"' in page and 'id="table-resources"' in page
    # The task page's own paths are unchanged by the page's view of them.
    assert paths.method_page(results.method("mlp")) == "methods/mlp.html"
    with pytest.raises(ValueError, match="one folder"):
        paths.below("a/b")


@pytest.mark.browser
def test_a_dataset_page_works_from_a_file_url(chromium: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(site_module, "PAGE_WEIGHT_LIMIT", 100_000)
    task_dir = site_module.render_site([write_results_dir(tmp_path / "results" / "perturbqa")],
                                       tmp_path / "site").parent / "perturbqa"
    problems: list[str] = []
    page: Any = chromium.new_page()
    try:
        page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: problems.append(f"script error: {e}"))
        page.on("requestfailed", lambda r: problems.append(f"failed: {r.url}"))
        page.goto((task_dir / "datasets" / "k562.html").as_uri(), wait_until="networkidle")
        # The stylesheet and script load from two folders up: the table sorts, the controls toggle shows.
        assert page.eval_on_selector(".site-header", "e => getComputedStyle(e).backgroundColor") == "rgb(20, 35, 61)"
        page.locator("#table-k562 th[data-col='1'] button").click()
        assert page.get_attribute("#table-k562 th[data-col='1']", "aria-sort") == "ascending"
        assert page.locator("label.toggle").first.is_visible()
        page.locator(".breadcrumbs a").nth(1).click()
        page.wait_for_load_state("networkidle")
        assert page.url.endswith("/perturbqa/index.html")
        assert page.locator("#datasets a[href='datasets/k562.html']").count() == 1
    finally:
        page.close()
    assert problems == []
