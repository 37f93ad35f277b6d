"""The website rendered from a real run of the fixture benchmark (with failing methods)."""

from __future__ import annotations

import html
import os
import re
import warnings
from pathlib import Path

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


def test_real_run_page_weight(real_site):
    from openpert.report.site import PAGE_WEIGHT_LIMIT, page_weight

    _, site = real_site
    assert page_weight(site / "tiny" / "index.html") < PAGE_WEIGHT_LIMIT


def test_real_run_pages_in_chromium(real_site, chromium, tmp_path):
    # the browser set-up of the website's own browser tests (skips the same way without chromium)
    from test_browser import WIDTHS, Watched, check_layout, screenshot_dir, shoot

    _, site = real_site
    folder = screenshot_dir(tmp_path)
    pages = (("index.html", False), ("tiny/index.html", True))
    opened = [Watched(chromium) for _ in pages]
    for watched, (name, _) in zip(opened, pages):
        watched.start((site / name).as_uri())
    for watched, (_, task_page) in zip(opened, pages):
        page = watched.settle()
        assert watched.problems == []
        if task_page:
            assert page.locator("table.sortable").count() > 0
            # Failed methods are marked in the overview.
            assert page.locator("#table-overview td.sc.failed").count() > 0
        for label, width in WIDTHS.items():
            check_layout(page, width, task_page=task_page)
            shoot(page, folder, f"real-run-{'task' if task_page else 'index'}-{label}")
        assert watched.problems == []
        page.close()


@pytest.mark.skipif(not os.environ.get("OPENPERT_REPORT_RESULTS"),
                    reason="set OPENPERT_REPORT_RESULTS to a results/ folder of a benchmark run")
def test_benchmark_results_site(tmp_path, capsys, chromium):
    """The site of a full benchmark run (``$OPENPERT_REPORT_RESULTS``): page weight, layout, no external request.

    Prints each task page's weight (HTML and the assets it loads) so CI logs keep the figure.
    """
    from test_browser import WIDTHS, Watched, check_layout, screenshot_dir, shoot

    from openpert.report.site import PAGE_WEIGHT_LIMIT, page_weight

    results = Path(os.environ["OPENPERT_REPORT_RESULTS"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a page over the weight limit fails here
        site = render_site([results], tmp_path / "site").parent
    pages = sorted(site.glob("*/index.html"))
    weights = {p.parent.name: page_weight(p) for p in pages}
    with capsys.disabled():
        for task, weight in sorted(weights.items(), key=lambda kv: -kv[1]):
            print(f"\npage weight {task}: {weight:,} bytes")
    assert max(weights.values()) < PAGE_WEIGHT_LIMIT
    folder = screenshot_dir(tmp_path)
    for page_path in [site / "index.html", *pages]:
        watched = Watched(chromium)
        page = watched.open(page_path.as_uri())
        task_page = page_path.parent != site
        for label, width in WIDTHS.items():
            check_layout(page, width, task_page=task_page)
            name = page_path.parent.name if task_page else "index"
            shoot(page, folder, f"benchmark-{name}-{label}")
        assert watched.problems == [], page_path
        page.close()
