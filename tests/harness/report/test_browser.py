"""The results website in a real browser: headless Chromium driven by Playwright.

Needs Debian's ``chromium`` on PATH and the ``playwright`` Python package; Playwright only drives
that binary (no browser download). The tests share one Chromium (the ``chromium`` fixture of this
folder's ``conftest.py``). Screenshots go to ``$OPENPERT_SCREENSHOTS`` when it is set (CI keeps that
folder as an artifact), else to the test's temporary folder.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import os
import re
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from archive_fixture import write_archive  # noqa: E402
from report_fixture import write_results_dir  # noqa: E402

from openpert.report import render_site  # noqa: E402
from openpert.report.formatting import MISSING, format_number  # noqa: E402
from openpert.report.leaderboards import overall_rows  # noqa: E402
from openpert.report.task_results import TaskResults  # noqa: E402

pytestmark = pytest.mark.browser

TASKS = ["perturbqa", "perturbseq"]
#: Viewport widths the pages must read at: a laptop and a phone.
WIDTHS = {"desktop": 1400, "phone": 390}
#: Markdown markers that must not survive into a rendered description.
MARKDOWN_MARKERS = ["**", "__", "`", "](", "![", "\n- ", "\n* ", "\n# ", "\n## "]


def screenshot_dir(tmp_path: Path) -> Path:
    """Where screenshots go: ``$OPENPERT_SCREENSHOTS`` (kept by CI) or the test's own folder."""
    folder = Path(os.environ.get("OPENPERT_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Keep the test output free of access logs."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("browser")
    dirs = [
        write_results_dir(base / "results" / "perturbqa"),
        write_results_dir(base / "results" / "perturbseq", task_name="perturbseq", label="Perturb-seq", seed=3,
                          provenance=False),
    ]
    return render_site(dirs, base / "site").parent


@pytest.fixture(scope="module")
def server(site: Path) -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


class Watched:
    """A page that records console errors, script errors, failed requests and requests elsewhere."""

    def __init__(self, context: Any) -> None:
        self.page = context.new_page()
        self.problems: list[str] = []
        self.origin = ""
        self.page.on("console", lambda m: m.type == "error" and self.problems.append(f"console: {m.text}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"script error: {e}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url} {r.failure}"))
        self.page.on(
            "response", lambda r: r.status >= 400 and self.problems.append(f"HTTP {r.status}: {r.url}")
        )
        # The site makes no external request: every request stays on the site's own origin.
        self.page.on("request", self._check_origin)

    def _check_origin(self, request: Any) -> None:
        if self.origin and not request.url.startswith(self.origin) and not request.url.startswith("data:"):
            self.problems.append(f"external request: {request.url}")

    def open(self, url: str) -> Any:
        """Load ``url`` and wait until the network is idle; the page."""
        self.start(url)
        return self.settle()

    def start(self, url: str) -> None:
        """Load ``url`` up to its load event (:meth:`settle` waits for the rest).

        Pages started one after another settle at the same time: each waits half a second without
        requests before the network counts as idle, and those waits then overlap.
        """
        self.origin = "file://" if url.startswith("file://") else "/".join(url.split("/")[:3]) + "/"
        self.page.goto(url, wait_until="load")

    def settle(self) -> Any:
        """Wait until the network of the page :meth:`start` loaded is idle; the page."""
        # networkidle: the favicon loads after the load event, and a failure there counts too.
        self.page.wait_for_load_state("networkidle")
        return self.page


def check_layout(page: Any, width: int, *, task_page: bool) -> None:
    """The layout rules every page keeps at every width (see the website's issue).

    Descriptions show no Markdown markers; nothing overflows the page sideways; every figure has
    a text alternative; on a task page the overview's first score column is in view and, on a
    desktop screen, the overview fits its box without scrolling.
    """
    page.set_viewport_size({"width": width, "height": 900})
    texts = page.eval_on_selector_all(".md", "nodes => nodes.map(n => n.innerText)")
    if task_page:
        assert texts, "a task page renders its descriptions (class md)"
    for text in texts:
        for marker in MARKDOWN_MARKERS:
            assert marker not in "\n" + text, f"literal {marker!r} in a description: {text[:120]!r}"
    assert page.evaluate("document.documentElement.scrollWidth") <= width, "the page scrolls sideways"
    unnamed = page.evaluate(
        """() => [...document.querySelectorAll('svg, img')].filter(e => !e.parentElement.closest('svg')).filter(e => {
            if (e.tagName.toLowerCase() === 'img') return !(e.getAttribute('alt') || '').trim();
            if ((e.getAttribute('aria-label') || '').trim()) return false;
            const ids = (e.getAttribute('aria-labelledby') || '').split(' ').filter(Boolean);
            return !ids.some(id => (document.getElementById(id)?.textContent || '').trim());
        }).map(e => e.outerHTML.slice(0, 80))"""
    )
    assert unnamed == [], unnamed
    if not task_page:
        return
    box = page.evaluate(
        """() => {
            const cell = document.querySelector('#table-overview tbody tr[data-method] td');
            const wrap = document.querySelector('#table-overview').closest('.table-wrap');
            const r = cell.getBoundingClientRect();
            return {left: r.left, right: r.right, scroll: wrap.scrollWidth, client: wrap.clientWidth};
        }"""
    )
    assert 0 <= box["left"] and box["right"] <= width, f"first score column out of view at {width} px: {box}"
    if width >= 1400:
        assert box["scroll"] <= box["client"], f"the overview scrolls sideways at {width} px: {box}"


def shoot(page: Any, folder: Path, name: str) -> Path:
    """Save a full-page screenshot and check it is not blank.

    Taken as Playwright takes a full page in Chromium (the page's whole content, beyond the
    viewport), but with Chromium's fast PNG compression: the same pixels in a larger file, made in
    about two thirds of the time the default compression takes on a task page.
    """
    path = folder / f"{name}.png"
    session = page.context.new_cdp_session(page)
    try:
        size = session.send("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": math.ceil(size["width"]), "height": math.ceil(size["height"]), "scale": 1}
        shot = session.send("Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True,
                                                       "captureBeyondViewport": True, "clip": clip})
    finally:
        session.detach()
    path.write_bytes(base64.b64decode(shot["data"]))
    assert path.stat().st_size > 20_000, path
    return path


def _order(page: Any, selector: str) -> list[str]:
    return page.eval_on_selector_all(selector, "rows => rows.map(r => r.dataset.method)")


def _results(site: Path, task: str = "perturbqa") -> dict[str, Any]:
    return json.loads((site / task / "results.json").read_text())


def test_pages_load_cleanly_over_http(chromium: Any, server: str, tmp_path: Path) -> None:
    folder = screenshot_dir(tmp_path)
    pages = [("index.html", None)] + [(f"{t}/index.html", t) for t in TASKS]
    pages += [("perturbqa/methods/gat.html", None), ("perturbqa/metrics/brier.html", None)]
    # All pages load at once; each is checked once its network is idle.
    opened = [Watched(chromium) for _ in pages]
    for watched, (path, _) in zip(opened, pages):
        watched.start(f"{server}/{path}")
    for watched, (path, task) in zip(opened, pages):
        page = watched.settle()
        assert watched.problems == [], path
        assert page.evaluate("document.documentElement.lang") == "en"
        # The script ran: sortable headers got their buttons.
        if page.locator("table.sortable").count():
            assert page.locator("table.sortable th[data-col] button.sort").count() > 0, path
        for name, width in WIDTHS.items():
            check_layout(page, width, task_page=task is not None)
            if task is not None or path == "index.html":
                shoot(page, folder, f"fixture-{(task or 'index')}-{name}")
        assert watched.problems == [], path
        page.close()


def test_page_works_from_file_url(chromium: Any, site: Path) -> None:
    watched = Watched(chromium)
    page = watched.open((site / "perturbqa" / "index.html").as_uri())
    assert page.locator("link[rel=stylesheet]").count() == 1
    # The stylesheet applied: the site header is dark, not the browser default.
    assert page.eval_on_selector(".site-header", "e => getComputedStyle(e).backgroundColor") == "rgb(20, 35, 61)"
    assert page.locator("label.toggle").first.is_visible()
    page.locator("#table-k562 th[data-col='1'] button").click()
    assert page.get_attribute("#table-k562 th[data-col='1']", "aria-sort") == "ascending"
    # The method column of the overview stays pinned while the table scrolls on a phone.
    page.set_viewport_size({"width": 390, "height": 800})
    assert page.eval_on_selector("#table-overview tbody th.m", "e => getComputedStyle(e).position") == "sticky"
    assert watched.problems == []
    page.close()


def test_clicking_a_header_sorts_within_bands(chromium: Any, server: str, site: Path) -> None:
    data = _results(site)
    labels = {m["id"]: m["label"] for m in data["methods"]}
    scores = {s["method_id"]: s["score"] for s in data["dataset_scores"] if s["dataset_id"] == "k562"}
    watched = Watched(chromium)
    page = watched.open(f"{server}/perturbqa/index.html")
    methods_rows = "#table-k562 tbody.band-methods tr[data-method]"
    control_rows = "#table-k562 tbody.band-controls tr[data-method]"
    ranked = _order(page, methods_rows)
    header = "#table-k562 th[data-col='2']"

    page.locator(f"{header} button").click()  # scores sort best first on the first click
    assert page.get_attribute(header, "aria-sort") == "descending"
    by_score = _order(page, methods_rows)
    assert by_score == sorted(by_score, key=lambda m: -scores[m])
    assert _order(page, control_rows) == sorted(_order(page, control_rows), key=lambda m: -scores[m])
    assert page.get_attribute("#table-k562 th[data-col='0']", "aria-sort") is None

    page.locator(f"{header} button").click()
    assert page.get_attribute(header, "aria-sort") == "ascending"
    assert _order(page, methods_rows) == sorted(by_score, key=lambda m: scores[m])

    page.locator("#table-k562 th[data-col='1'] button").click()
    by_label = _order(page, methods_rows)
    assert by_label == sorted(by_label, key=lambda m: labels[m].lower())
    assert by_label != ranked or ranked == sorted(ranked, key=lambda m: labels[m].lower())
    assert page.get_attribute(header, "aria-sort") is None
    # The band headings stay first in their bands.
    first = page.eval_on_selector_all(
        "#table-k562 tbody", "bodies => bodies.map(b => b.rows[0].classList.contains('band'))"
    )
    assert first == [True, True]

    # Lower-is-better metric: ascending first, failed methods (no value) last.
    k = [m["id"] for m in data["metrics"]].index("brier")
    raw_header = f"#table-k562 th[data-col='{3 + 2 * k}']"
    page.locator(f"{raw_header} button").click()
    assert page.get_attribute(raw_header, "aria-sort") == "ascending"
    raw = {s["method_id"]: s["raw"] for s in data["scores"] if (s["dataset_id"], s["metric_id"]) == ("k562", "brier")}
    order = _order(page, methods_rows)
    scored = [m for m in order if m in raw]
    assert scored == sorted(scored, key=lambda m: raw[m])
    assert order[len(scored):] == [m for m in order if m not in raw] == ["big_llm"]
    assert watched.problems == []
    page.close()


def test_controls_toggle_hides_and_shows_controls(chromium: Any, server: str, site: Path) -> None:
    data = _results(site)
    # The band holds the controls that do not rank; baselines rank among the methods.
    controls = [m["id"] for m in data["methods"] if m.get("control") in ("positive", "negative", "adversarial", "ceiling")]
    watched = Watched(chromium)
    page = watched.open(f"{server}/perturbqa/index.html")
    toggle = page.locator("input[data-controls-for='table-overview']")
    assert toggle.is_visible() and toggle.is_checked()
    rows = [page.locator(f"#table-overview tr[data-method='{c}']") for c in controls]
    assert all(r.is_visible() for r in rows)
    toggle.uncheck()
    assert all(r.is_hidden() for r in rows)
    assert page.locator("#table-overview tr[data-method='mlp']").is_visible()
    # Other tables keep their own setting.
    assert page.locator(f"#table-k562 tr[data-method='{controls[0]}']").is_visible()
    toggle.check()
    assert all(r.is_visible() for r in rows)
    assert watched.problems == []
    page.close()


def test_what_changed_and_history_render(chromium: Any, tmp_path: Path) -> None:
    archive = write_archive(tmp_path)
    results = write_results_dir(tmp_path / "results" / "perturbqa")
    site = render_site([results], tmp_path / "site", archive=archive).parent
    folder = screenshot_dir(tmp_path)
    watched = Watched(chromium)
    page = watched.open((site / "perturbqa" / "index.html").as_uri())
    for section in ("#what-changed", "#history"):
        assert page.locator(section).is_visible()
        assert page.locator(f".toc a[href='{section}']").count() == 1
    ranks = page.locator("#what-changed-ranks tbody tr", has_text="MLP")
    assert ranks.locator("td").nth(1).inner_text() == "2 → 1 (up 1)"
    # Sortable like every table: sorting by the change puts the largest rise last when ascending.
    page.locator("#what-changed-ranks th[data-col='5'] button").click()
    assert page.get_attribute("#what-changed-ranks th[data-col='5']", "aria-sort") == "ascending"
    # One line chart per method, drawn (not collapsed to nothing), with three points for MLP's three runs.
    charts = page.locator("#history svg.sparkline")
    assert charts.count() == page.locator("#history tbody tr").count() > 0
    mlp_chart = page.locator("#history tbody tr", has_text="MLP").locator("svg.sparkline")
    box = mlp_chart.bounding_box()
    assert box is not None and box["width"] > 50 and box["height"] > 10
    assert mlp_chart.locator("circle").count() == 3
    for name, width in WIDTHS.items():
        check_layout(page, width, task_page=True)
        page.locator("#history").scroll_into_view_if_needed()
        shoot(page, folder, f"fixture-archive-{name}")
    assert watched.problems == []
    page.close()


#: Screens the answer must be on without scrolling: a laptop and a phone.
SCREENS = {"desktop": (1400, 900), "phone": (390, 844)}
#: A label, summary and description built to run code if any reached a page unescaped.
EXECUTABLE = {
    "label": '<img src=x onerror="window.pwned=1">MLP',
    "summary": 'Click [here](javascript:window.pwned=2) or <a href="javascript:window.pwned=3">here</a>.',
    "description": ("<script>window.pwned=4</script>\n\n[a link](javascript:window.pwned=5) "
                    '<iframe src="javascript:window.pwned=6"></iframe> <svg onload="window.pwned=7"></svg>\n\n'
                    "![image](javascript:window.pwned=8)"),
}


def _first_score(page: Any) -> dict[str, Any]:
    """Where the first method's overall score sits, with the page scrolled to the top."""
    page.evaluate("window.scrollTo(0, 0)")
    return page.evaluate(
        """() => {
            const cell = document.querySelector('#table-overview tbody.band-methods tr[data-method] td');
            const head = document.querySelector('#table-overview thead');
            const r = cell.getBoundingClientRect();
            return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, text: cell.innerText.trim(),
                    head: head.getBoundingClientRect().top};
        }"""
    )


def _too_wide(page: Any) -> list[str]:
    """Elements wider than the viewport, or reaching past it, outside a box that scrolls them."""
    return page.evaluate(
        """() => {
            const w = window.innerWidth;
            const clipped = e => { for (let a = e.parentElement; a; a = a.parentElement) {
                const o = getComputedStyle(a).overflowX; if (o === 'auto' || o === 'scroll' || o === 'hidden') return true; }
                return false; };
            return [...document.querySelectorAll('body *')].filter(e => {
                const r = e.getBoundingClientRect();
                if (r.width === 0 || getComputedStyle(e).position === 'fixed') return false;
                return (r.width > w + 1 || r.right > w + 1) && !clipped(e);
            }).map(e => e.tagName.toLowerCase() + '.' + e.className + ' ' + (e.innerText || '').slice(0, 40));
        }"""
    )


@pytest.mark.parametrize("task", TASKS)
def test_first_score_is_on_the_first_screen(chromium: Any, server: str, site: Path, tmp_path: Path, task: str) -> None:
    folder = screenshot_dir(tmp_path)
    top = next(r for r in overall_rows(TaskResults(_results(site, task), site / task)) if not r.control)
    opened = {}
    for name, (width, height) in SCREENS.items():
        watched = Watched(chromium)
        watched.page.set_viewport_size({"width": width, "height": height})
        watched.start(f"{server}/{task}/index.html")
        opened[name] = watched
    for name, (width, height) in SCREENS.items():
        watched = opened[name]
        page = watched.settle()
        box = _first_score(page)
        # The overall score of the top-ranked method is a number, fully inside the first screen.
        assert box["text"] == format_number(top.score), box
        assert 0 <= box["top"] and box["bottom"] <= height, f"{task} at {width}x{height}: {box}"
        assert 0 <= box["left"] and box["right"] <= width, f"{task} at {width}x{height}: {box}"
        # The table starts on the screen: its header and the first row both show.
        assert 0 <= box["head"] < box["top"], box
        if name == "phone":
            assert _too_wide(page) == [], f"{task}: wider than a phone"
        page.screenshot(path=str(folder / f"first-screen-{task}-{name}.png"))
        assert watched.problems == []
        page.close()


def _variant_site(base: Path, change: Any) -> Path:
    """A one-task site from the fixture after ``change(data)`` edits its ``results.json``."""
    folder = write_results_dir(base / "results" / "perturbqa")
    data = json.loads((folder / "results.json").read_text())
    change(data)
    (folder / "results.json").write_text(json.dumps(data))
    return render_site([folder], base / "site").parent


def test_a_missing_value_never_reads_as_a_number(chromium: Any, tmp_path: Path) -> None:
    def drop_accuracy_of_mlp(data: dict[str, Any]) -> None:
        # The MLP does not address accuracy: no score, and no failure either.
        data["scores"] = [s for s in data["scores"] if (s["method_id"], s["metric_id"]) != ("mlp", "accuracy")]

    site = _variant_site(tmp_path, drop_accuracy_of_mlp)
    data = json.loads((site / "perturbqa" / "results.json").read_text())
    results = TaskResults(data, site / "perturbqa")
    dataset_ids = [d["dataset_id"] for d in data["datasets"]]
    headline = [m["id"] for m in data["metrics"] if results.is_headline(m["id"])]
    failed = {(f.get("dataset_id"), f.get("method_id")) for f in data["failures"]}
    page = Watched(chromium).open((site / "perturbqa" / "index.html").as_uri())
    cells = page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#table-overview tbody tr[data-method]')].map(
            r => [r.dataset.method, [...r.querySelectorAll('td')].map(td => td.innerText.trim())]))"""
    )
    checked = 0
    for method_id, texts in cells.items():
        for k, metric_id in enumerate(headline):
            text = texts[1 + len(dataset_ids) + k].split("\n")[0]  # the number, not its screen-reader note
            has_value = any(isinstance((results.score(d, method_id, metric_id) or {}).get("scaled"), (int, float))
                            for d in dataset_ids)
            has_failure = any((d, method_id) in failed for d in dataset_ids)
            if not has_value and not has_failure:
                checked += 1
                assert text == MISSING, f"{method_id} · {metric_id} reads {text!r} without a value"
            else:
                assert text != MISSING and float(text) >= 0, f"{method_id} · {metric_id}: {text!r}"
    assert checked >= 1, "the variant should hold a method without a value"
    assert cells["mlp"][1 + len(dataset_ids) + headline.index("accuracy")] == MISSING


def _dismiss(dialogs: list[str], dialog: Any) -> None:
    """Note a dialog's message and close it."""
    dialogs.append(dialog.message)
    dialog.dismiss()


def test_nothing_executable_reaches_a_page(chromium: Any, tmp_path: Path) -> None:
    def make_hostile(data: dict[str, Any]) -> None:
        for entry in [m for m in data["methods"] if m["id"] == "mlp"] + [data["metrics"][0], data["datasets"][0]]:
            entry.update(EXECUTABLE)
        data["datasets"][0].update(dataset_name=EXECUTABLE["label"], dataset_summary=EXECUTABLE["summary"],
                                   dataset_description=EXECUTABLE["description"])

    site = _variant_site(tmp_path, make_hostile)
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 5
    for path in pages:
        text = path.read_text()
        # No executable URL in any attribute, no inline handler, no script but the site's own.
        assert not re.search(r"""(?:href|src|action|formaction|xlink:href)\s*=\s*["']?\s*javascript:""", text, re.I), path
        assert not re.search(r"<(?:iframe|object|embed)\b", text, re.I), path
    # All pages load at once, each recording the dialogs its scripts open; each is checked once its
    # network is idle.
    opened: list[tuple[Path, Watched, list[str]]] = []
    for path in pages:
        watched = Watched(chromium)
        dialogs: list[str] = []
        watched.page.on("dialog", functools.partial(_dismiss, dialogs))
        watched.start(path.as_uri())
        opened.append((path, watched, dialogs))
    for path, watched, dialogs in opened:
        page = watched.settle()
        # Every link a visitor can follow; clicking none of them may run code.
        hrefs = page.eval_on_selector_all("[href], [src]", "es => es.map(e => e.getAttribute('href') || e.getAttribute('src'))")
        assert not [h for h in hrefs if h.strip().lower().startswith("javascript:")], path
        scripts = page.eval_on_selector_all("script", "es => es.map(e => e.getAttribute('src') || e.textContent)")
        assert all(s.endswith("static/report.js") or s.strip().startswith("{") for s in scripts), scripts
        handlers = page.evaluate(
            """() => [...document.querySelectorAll('*')].flatMap(e => [...e.attributes]
                .filter(a => a.name.toLowerCase().startsWith('on')).map(a => e.tagName + ' ' + a.name))"""
        )
        assert handlers == [], (path, handlers)
        assert page.locator("iframe, object, embed").count() == 0, path
        assert page.evaluate("window.pwned") is None, path
        assert dialogs == [] and watched.problems == [], path
        # The hostile texts are on the page as text.
        if path.name == "mlp.html":
            assert "<img src=x" in page.inner_text("body")
        page.close()
