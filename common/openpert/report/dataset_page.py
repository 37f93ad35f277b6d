"""The pages a task page too heavy for a browser hands its parts to: each dataset's, and any section's.

A task page with its assets may weigh at most :data:`openpert.report.site.PAGE_WEIGHT_LIMIT`. Over it,
:func:`openpert.report.site.task_pages` gives each dataset's section (facts, public files,
leaderboard, heatmap, with the dataset's part of the test matrix and its jobs) a page of its own,
``<task>/datasets/<slug>.html``, and moves the heaviest other sections to ``<task>/<section id>.html``.
Those pages are rendered here, in the site's frame, with breadcrumbs back to the task.
"""

from __future__ import annotations

import re
from typing import Any

from markupsafe import Markup

from openpert.report.leaderboards import OverviewRow
from openpert.report.markdown import plain_text
from openpert.report.overview import test_matrix
from openpert.report.paths import DATASETS_DIR, TaskPaths
from openpert.report.task_page import dataset_jobs, dataset_section
from openpert.report.task_results import TaskResults
from openpert.report.templating import render

#: A section's opening tag as the page templates write it (``macros.html``'s ``section``).
_SECTION_TAG = re.compile(r'<section id="([^"]*)"|</section>')


def render_dataset_page(results: TaskResults, paths: TaskPaths, dataset: dict[str, Any], index: int,
                        rows: list[OverviewRow]) -> Markup:
    """The page of one dataset of a task (``<task>/datasets/<slug>.html``).

    Parameters
    ----------
    results
        The task's results.
    paths
        Where the task's pages are, as seen from the task page.
    dataset
        The dataset's entry of ``results.json``.
    index
        Its position among the task's datasets.
    rows
        The overview's rows (``overview_rows``), for the dataset's part of the test matrix.

    Returns
    -------
    Markup
        The document.
    """
    did = str(dataset.get("dataset_id"))
    label = results.dataset_label(did)
    here = paths.below(DATASETS_DIR)
    return _part_page("dataset_page.html", results, "../", section_id=paths.dataset_anchor(did), heading=f"Dataset: {label}",
                      page_heading=label, description=plain_text(dataset.get("dataset_summary")),
                      content=dataset_section(results, here, dataset, index), tests=test_matrix(results, here, rows, dataset_id=did),
                      jobs=dataset_jobs(results, did))


def render_section_page(results: TaskResults, section_id: str, heading: str, content: Markup) -> Markup:
    """The page of a task page's section moved to a page of its own (``<task>/<section id>.html``).

    Parameters
    ----------
    results
        The task's results.
    section_id
        The section's id, kept on its new page (links to it keep their fragment).
    heading
        Its heading.
    content
        Its content, rendered for a page in the task's folder (so its relative links hold).

    Returns
    -------
    Markup
        The document.
    """
    return _part_page("section_page.html", results, "", section_id=section_id, heading=heading, page_heading=heading,
                      description="", content=content)


def _part_page(template: str, results: TaskResults, up: str, **context: Any) -> Markup:
    """A page in the task's folder (``up`` is ``""``) or one below it (``"../"``), in the site's frame, under the task."""
    heading = context["page_heading"]
    return render(template, title=f"{heading} · {results.label}", root=f"{up}../",
                  crumbs=[("All tasks", f"{up}../index.html"), (results.label, f"{up}index.html"), (heading, None)],
                  task_label=results.label, task_href=f"{up}index.html", **context)


def page_sections(document: str) -> dict[str, tuple[int, int]]:
    """Where each top-level ``<section>`` of a rendered page starts and ends.

    Parameters
    ----------
    document
        A page as the templates render it (sections nest, and are closed by ``</section>``).

    Returns
    -------
    dict
        Section id -> (start, end) offsets of its whole element, in page order.

    Raises
    ------
    ValueError
        When the sections do not nest (the page is not one the templates rendered).
    """
    spans: dict[str, tuple[int, int]] = {}
    depth, start, current = 0, 0, ""
    for match in _SECTION_TAG.finditer(document):
        if match.group(1) is not None:
            if depth == 0:
                start, current = match.start(), match.group(1)
            depth += 1
        else:
            depth -= 1
            if depth < 0:
                raise ValueError("a </section> closes no section")
            if depth == 0:
                spans[current] = (start, match.end())
    if depth:
        raise ValueError("a <section> is not closed")
    return spans


def section_content(document: str, span: tuple[int, int]) -> Markup:
    """A top-level section's content without its own tag and heading (see :func:`page_sections`).

    The heading is the section's first child (``macros.html``'s ``section``); its intro and
    content follow it.
    """
    element = document[span[0]:span[1]]
    heading_end = element.find("</h2>")
    body_start = heading_end + len("</h2>") if heading_end >= 0 else element.find(">") + 1
    # The section's own HTML, rendered by the task page's templates: already escaped.
    return Markup(element[body_start:-len("</section>")])
