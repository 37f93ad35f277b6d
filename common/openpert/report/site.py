"""Writing the whole site: pages, downloads, copied logs and static assets.

The output depends only on the input files (no timestamps, stable ordering), so rendering the same
results twice gives the same bytes. A manifest of the files written lets a re-render into the same
folder remove pages of tasks or components that are gone, without touching anything else there.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from openpert.report.component_pages import render_method_page, render_metric_page
from openpert.report.dataset_page import page_sections, render_dataset_page, render_section_page, section_content
from openpert.report.history import archive_sections
from openpert.report.index_page import render_index
from openpert.report.leaderboards import dataset_csv, overall_csv, overview_rows
from openpert.report.overview import test_matrix
from openpert.report.paths import DATASETS_DIR, TaskPaths, slugify, unique_slugs
from openpert.report.reproduction import REPRODUCTION_CSV, reproduction_csv
from openpert.report.statistics import statistic_csv, table_rows
from openpert.report.task_page import render_task_page
from openpert.report.task_results import TaskResults, find_results_files, load_results
from openpert.results.archive import list_records

STATIC_DIR = Path(__file__).parent / "static"
STATIC_FILES = ("report.css", "report.js", "favicon.svg")
MANIFEST = ".openpert-report.json"
#: Failure logs larger than this are linked by path only, to keep the site small.
MAX_LOG_BYTES = 2_000_000
#: Most bytes a task page may make a browser load (its HTML and the site files it embeds); a task
#: page that would weigh more is split (:func:`task_pages`, docs/website.md).
PAGE_WEIGHT_LIMIT = 2_000_000
#: Sections of a task page that stay on it however heavy it is (what a reader comes for first).
PINNED_SECTIONS = ("overview",)
#: Elements whose address a browser loads with the page (links and anchors are only followed).
_ASSET = re.compile(r"<(?:link|script|img)\b[^>]*?\b(?:href|src)=\"([^\"]*)\"", re.IGNORECASE)


class _Writer:
    """Writes files below the site root and remembers which."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.written: set[str] = set()

    def text(self, rel: str, content: str) -> None:
        self._path(rel).write_text(content, encoding="utf-8", newline="\n")

    def copy(self, rel: str, source: Path) -> None:
        shutil.copyfile(source, self._path(rel))

    def _path(self, rel: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        self.written.add(rel)
        return path


def render_site(results_dirs: Sequence[Path], out_dir: Path,
                amend: Callable[[dict, Path], dict] | None = None, archive: Path | None = None) -> Path:
    """Render the results website of one or several tasks.

    Parameters
    ----------
    results_dirs
        Task results folders, each holding a ``results.json`` (a folder of such folders, like
        ``results/``, stands for all of them). Tasks appear in this order.
    out_dir
        The site's folder; created if needed. Files of an earlier render into it that this render
        no longer writes are removed; other files are left alone.
    amend
        Called with each parsed ``results.json`` and its folder; the entries it returns replace
        the file's own before rendering (``openpert report`` recomputes the Reproduction section
        with the project's current declarations), and the site's copy of ``results.json`` holds them.
    archive
        The run archive (``docs/archive.md``): each task page then says what changed since the
        task's previous archived run and shows each method's overall score over the archived runs.

    Returns
    -------
    Path
        The site's ``index.html``.

    Raises
    ------
    FileNotFoundError
        When a folder holds no ``results.json``.
    ValueError
        When no folder is given.

    Warns
    -----
    UserWarning
        When a task page with its assets still weighs more than :data:`PAGE_WEIGHT_LIMIT` once
        split as far as :func:`task_pages` goes (every section but the overview on a page of its own).
    """
    files: list[Path] = []
    for d in results_dirs:
        for f in find_results_files(Path(d)):
            if f.resolve() not in {g.resolve() for g in files}:
                files.append(f)
    if not files:
        raise ValueError("no results folder given")
    tasks = [load_results(f) for f in files]
    amended = set()
    for results, f in zip(tasks, files) if amend is not None else ():
        extra = amend(results.data, f.parent)
        if extra:
            results.data.update(extra)
            amended.add(id(results))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    writer = _Writer(out_dir)

    for name in STATIC_FILES:
        writer.copy(f"static/{name}", STATIC_DIR / name)

    records = list_records(archive) if archive is not None else None
    slugs = unique_slugs([t.name for t in tasks], taken=["static", "index.html"])
    site_tasks = []
    for results, slug, source in zip(tasks, slugs, files):
        paths = TaskPaths(results, slug)
        site_tasks.append((results, paths))
        extra = archive_sections(records, results) if records is not None else []
        _render_task(writer, results, paths, source, amended=id(results) in amended, extra_sections=extra)
    writer.text("index.html", render_index(site_tasks))
    _prune(out_dir, writer.written)
    for _, paths in site_tasks:
        page_path = out_dir / paths.slug / "index.html"
        weight = page_weight(page_path)
        if weight > PAGE_WEIGHT_LIMIT:
            # A warning, not a failure: a heavy page is still better than no page, and an overview
            # that alone weighs the limit needs a redesign that no splitting rule can make (docs/website.md).
            warnings.warn(f"{page_path}: {weight:,} bytes with its assets, over {PAGE_WEIGHT_LIMIT:,}", stacklevel=2)
    return out_dir / "index.html"


def page_weight(page_path: Path) -> int:
    """Bytes a browser loads to show a page: its HTML and the local assets it embeds.

    Parameters
    ----------
    page_path
        An HTML page of the site.

    Returns
    -------
    int
        The size of the page plus that of every stylesheet, script, icon and image it loads
        from the site (each counted once).

    Raises
    ------
    ValueError
        When the page loads anything from another origin: the site makes no external request.
    """
    page_path = Path(page_path)
    source = page_path.read_text(encoding="utf-8")
    total = len(source.encode("utf-8"))
    seen: set[Path] = set()
    for url in _ASSET.findall(source):
        parsed = urlparse(url)
        if parsed.scheme or parsed.netloc:
            raise ValueError(f"{page_path}: loads {url} from outside the site")
        asset = (page_path.parent / unquote(parsed.path)).resolve()
        if asset not in seen and asset.is_file():
            seen.add(asset)
            total += asset.stat().st_size
    return total


def _render_task(writer: _Writer, results: TaskResults, paths: TaskPaths, source: Path, *, amended: bool = False,
                 extra_sections: Sequence[tuple[str, str, str, str]] = ()) -> None:
    base = paths.slug
    if amended:
        writer.text(f"{base}/results.json", json.dumps(results.data, indent=2) + "\n")
    else:
        writer.copy(f"{base}/results.json", source)
    if results.reproduction.get("rows"):
        writer.text(f"{base}/{REPRODUCTION_CSV}", reproduction_csv(results))
    writer.text(f"{base}/{paths.overall_csv()}", overall_csv(results))
    for d in results.datasets:
        did = d.get("dataset_id")
        writer.text(f"{base}/{paths.dataset_csv(did)}", dataset_csv(results, did))
    for key, entry in results.statistics:
        if table_rows(entry):
            writer.text(f"{base}/{paths.statistic_csv(key)}", statistic_csv(entry))
    log_links = _copy_logs(writer, results, base)
    for rel, document in task_pages(results, paths, log_links, extra_sections).items():
        writer.text(f"{base}/{rel}", document)
    for method in results.all_methods:
        writer.text(f"{base}/{paths.method_page(method)}", render_method_page(results, paths, method))
    for metric in results.metrics:
        writer.text(f"{base}/{paths.metric_page(metric.get('id'))}", render_metric_page(results, paths, metric))


def task_pages(results: TaskResults, paths: TaskPaths, log_links: dict[str, str],
               extra_sections: Sequence[tuple[str, str, str, str]] = ()) -> dict[str, str]:
    """A task's page, split into several when one would weigh more than :data:`PAGE_WEIGHT_LIMIT`.

    The rule, applied in this order and only as far as needed, so that the same results always
    give the same pages:

    1. The whole task on ``index.html`` when it weighs at most the limit with the site's assets.
    2. Else each dataset's section (facts, public files, leaderboard, heatmap) goes to
       ``datasets/<slug>.html``, with that dataset's columns of the overview's test matrix and its
       jobs; the task page lists the datasets with links, and the overview (for its tests) and
       "Resource use" (for its jobs) link to that list.
    3. While the page is still over the limit, the heaviest remaining section (never the overview)
       goes to ``<section id>.html``; its heading stays on the task page with a link to it.

    Parameters
    ----------
    results
        The task's results.
    paths
        Where the task's pages and downloads are.
    log_links
        Failure log path in ``results.json`` -> its copy in the site.
    extra_sections
        ``(id, title, html, intro)`` of sections placed after the overview.

    Returns
    -------
    dict
        Path relative to the task's folder -> the page's HTML; ``index.html`` first.
    """
    # Bytes of the site's files that every page loads (stylesheet, script, icon).
    assets = sum((STATIC_DIR / name).stat().st_size for name in STATIC_FILES)
    page = str(render_task_page(results, paths, log_links, extra_sections))
    if _weight(page) + assets <= PAGE_WEIGHT_LIMIT:
        return {"index.html": page}
    pages: dict[str, str] = {"index.html": ""}
    rows = overview_rows(results)
    for i, dataset in enumerate(results.datasets):
        rel = f"{DATASETS_DIR}/{paths.dataset_slug(dataset.get('dataset_id'))}.html"
        pages[rel] = str(render_dataset_page(results, paths, dataset, i, rows))
    # The test matrix is split among the dataset pages; the overview links to their list.
    tests_href = "#datasets" if results.datasets and test_matrix(results, paths, rows) else None
    layout = {"datasets_inline": False, "tests_href": tests_href}
    page = split = str(render_task_page(results, paths, log_links, extra_sections, **layout))
    # Heaviest first; ties in page order (sorted is stable), so the choice depends on the results alone.
    candidates = [(section_id, span) for section_id, span in sorted(page_sections(split).items(), key=lambda i: i[1][0] - i[1][1])
                  if section_id not in PINNED_SECTIONS and section_id != "datasets"]
    moved: dict[str, str] = {}
    while candidates and _weight(page) + assets > PAGE_WEIGHT_LIMIT:
        # Move as many as the estimate says (each section's content), then weigh the page itself.
        excess = _weight(page) + assets - PAGE_WEIGHT_LIMIT
        while candidates and excess > 0:
            section_id, (start, end) = candidates.pop(0)
            href = paths.section_page(section_id)
            moved[section_id] = href
            content = section_content(split, (start, end))
            pages[href] = str(render_section_page(results, section_id, _heading(split, section_id), content))
            excess -= _weight(content)
        page = str(render_task_page(results, paths, log_links, extra_sections, own_pages=moved, **layout))
    pages["index.html"] = page
    return pages


def _heading(page: str, section_id: str) -> str:
    """The text of a rendered section's heading."""
    match = re.search(rf'<h2 id="{re.escape(section_id)}-title">(.*?)</h2>', page, re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", "", match.group(1))) if match else section_id


def _weight(text: str) -> int:
    return len(text.encode("utf-8"))


def _copy_logs(writer: _Writer, results: TaskResults, base: str) -> dict[str, str]:
    """Copy the logs of failed jobs into the site; return log path -> link from the task page."""
    links: dict[str, str] = {}
    root = results.source.resolve()
    for failure in results.failures:
        log = failure.get("log")
        if not isinstance(log, str) or not log or log in links:
            continue
        source = (root / log).resolve()
        # Only files inside the results folder: a crafted path must not pull in other files.
        if not source.is_relative_to(root) or not source.is_file() or source.stat().st_size > MAX_LOG_BYTES:
            continue
        parts = list(source.relative_to(root).parts)
        if len(parts) > 1 and parts[0] == "logs":
            parts = parts[1:]  # already under the site's logs/ folder
        rel = "/".join(slugify(part) for part in parts)
        if not rel.endswith((".log", ".txt")):
            rel += ".txt"
        writer.copy(f"{base}/logs/{rel}", source)
        links[log] = f"logs/{rel}"
    return links


def _prune(out_dir: Path, written: set[str]) -> None:
    """Remove what the previous render wrote and this one did not, then record this render."""
    manifest = out_dir / MANIFEST
    previous: list[str] = []
    if manifest.is_file():
        try:
            previous = json.loads(manifest.read_text(encoding="utf-8")).get("files", [])
        except (json.JSONDecodeError, AttributeError) as err:
            # A damaged manifest only costs stale files; say so instead of failing the render.
            warnings.warn(f"ignoring unreadable {manifest}: {err}", stacklevel=3)
    root = out_dir.resolve()
    for rel in previous:
        if not isinstance(rel, str) or rel in written:
            continue
        path = (out_dir / rel).resolve()
        if path.is_relative_to(root) and path.is_file():
            path.unlink()
            parent = path.parent
            while parent != root and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
    manifest.write_text(json.dumps({"files": sorted(written)}, indent=1) + "\n", encoding="utf-8")
