"""The website rendered from a real run of the fixture benchmark (with failing methods)."""

from __future__ import annotations

import html
import re

import pytest

from openpert.report import failure_label, format_number, render_site


@pytest.fixture(scope="module")
def real_site(fixture_runs, tmp_path_factory):
    _, mixed, out, _ = fixture_runs
    site = tmp_path_factory.mktemp("site")
    render_site([out], site)
    return mixed, site


def test_every_method_metric_and_failure_appears(real_site):
    results, site = real_site
    page = html.unescape((site / "tiny" / "index.html").read_text())
    text = re.sub(r"<[^>]+>", " ", page)
    for method in results["methods"]:
        assert method["label"] in text, method["id"]
        assert (site / "tiny" / ("control_methods" if method["control"] else "methods") / f"{method['id']}.html").is_file()
    for metric in results["metrics"]:
        assert metric["label"] in text, metric["id"]
    for score in results["scores"]:
        assert format_number(score["raw"]) in text
    for fail in results["failures"]:
        assert failure_label(fail["exit_code"], fail["reason"]) in text or fail["job_id"] in text
    assert "memory limit" in text and "time limit" in text
    # the data behind the site can be downloaded
    assert (site / "tiny" / "results.json").is_file()
    assert (site / "tiny" / "leaderboard_overall.csv").is_file()


def test_real_run_page_loads_in_chromium(real_site, tmp_path):
    # the browser set-up of the website's own browser tests (skips the same way without chromium)
    from test_browser import CHROMIUM, CHROMIUM_ARGS, Watched, sync_api

    _, site = real_site
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True,
                                                        args=CHROMIUM_ARGS)
        try:
            watched = Watched(context)
            page = watched.open((site / "tiny" / "index.html").as_uri())
            assert watched.problems == []
            assert page.locator("table.sortable").count() > 0
            page.screenshot(path=str(tmp_path / "tiny.png"), full_page=True)
        finally:
            context.close()
