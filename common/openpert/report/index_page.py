"""The site's front page: one card per task, with its top method, margin and significance.

Python gathers each card's view; the markup is in the template ``index.html``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from openpert.report.formatting import MISSING, format_number, format_timestamp
from openpert.report.markdown import render_inline
from openpert.report.paths import TaskPaths
from openpert.report.reproduction import summary_line
from openpert.report.task_results import TaskResults
from openpert.report.templating import render


def render_index(tasks: Sequence[tuple[TaskResults, TaskPaths]]) -> Markup:
    """The HTML of ``index.html``.

    Parameters
    ----------
    tasks
        Every task of the site with its paths, in display order.

    Returns
    -------
    Markup
        The document.
    """
    return render("index.html", title="Results", root="", crumbs=[], description="Benchmark results by task",
                  tasks=[_card(results, paths) for results, paths in tasks])


def _card(results: TaskResults, paths: TaskPaths) -> dict[str, Any]:
    """What a task's card shows: its counts, its leader and the run it comes from."""
    data = results.data
    sha = results.provenance.get("commit")
    reproduction = summary_line(results)
    return {
        "href": f"{paths.slug}/index.html",
        "label": results.label,
        "summary": Markup(render_inline(results.task.get("summary"))),
        "stats": [(f"{word.capitalize()}s", n) for word, n in results.sizes],
        "leader": _leader(results, paths),
        "reproduction": {"href": f"{paths.slug}/index.html#reproduction", "text": reproduction} if reproduction else None,
        "created": data.get("created") or "",
        "created_text": format_timestamp(data.get("created")),
        "version": data.get("openpert_version") or MISSING,
        "commit": {"sha": sha, "short": str(sha)[:10]} if sha else None,
    }


def _leader(results: TaskResults, paths: TaskPaths) -> dict[str, Any] | None:
    """The top method, linked to its page, with its margin over the next and whether it is significant."""
    top = results.lead
    if top is None:
        return None
    method = results.method(top.top_method_id) or {"id": top.top_method_id}
    view: dict[str, Any] = {
        "href": f"{paths.slug}/{paths.method_page(method)}",
        "name": str(method.get("label") or method.get("id")),
        "score": format_number(top.top_score),
        "runner_up": None,
    }
    if top.runner_up_method_id is None or top.margin is None:
        return view
    if top.compared == 0:
        verdict = "no paired test between them"
    elif top.significant == 0:
        verdict = f"not significantly better in any of {top.compared} paired tests"
    else:
        verdict = f"significantly better in {top.significant} of {top.compared} paired tests (p < 0.05)"
    view.update(runner_up=results.method_label(top.runner_up_method_id),
                margin=format_number(top.margin), verdict=verdict)
    return view
