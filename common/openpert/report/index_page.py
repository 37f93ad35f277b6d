"""The site's front page: one card per task."""

from __future__ import annotations

from collections.abc import Sequence

from openpert.report.formatting import MISSING, format_score, format_timestamp
from openpert.report.leaderboards import lead
from openpert.report.markdown import render_inline
from openpert.report.markup import esc, page
from openpert.report.paths import TaskPaths
from openpert.report.reproduction import summary_line
from openpert.report.task_results import TaskResults


def render_index(tasks: Sequence[tuple[TaskResults, TaskPaths]]) -> str:
    """The HTML of ``index.html``.

    Parameters
    ----------
    tasks
        Every task of the site with its paths, in display order.

    Returns
    -------
    str
        The document.
    """
    cards = "".join(_card(results, paths) for results, paths in tasks)
    n = len(tasks)
    body = (
        '<header class="page-header"><p class="eyebrow">Benchmark</p><h1>Results</h1>'
        f'<p class="lead">{n} task{"s" if n != 1 else ""}. Each method is scored on every dataset, '
        "its headline metrics scaled between the strongest negative control (0) and a positive control (1), "
        "so that a method scores above 0 only if it beats every trivial answer.</p></header>"
        f'<ul class="task-cards" aria-label="Tasks">{cards}</ul>'
    )
    return page(title="Results", body=body, root="", description="Benchmark results by task")


def _card(results: TaskResults, paths: TaskPaths) -> str:
    data = results.data
    href = f"{paths.slug}/index.html"
    stats = [
        ("Datasets", len(results.datasets)),
        ("Methods", len(results.methods)),
        ("Controls", len(results.controls)),
        ("Metrics", len(results.metrics)),
    ]
    stats_html = "".join(
        f'<div class="stat"><dt>{esc(name)}</dt><dd>{value}</dd></div>' for name, value in stats
    )
    leader = _leader(results, paths)
    reproduction = summary_line(results)
    if reproduction:
        leader += (f'<p class="leader">Reproduction of the papers: <a href="{esc(paths.slug)}/index.html#reproduction">'
                   f"{esc(reproduction)}</a></p>")
    created = data.get("created")
    summary = render_inline(results.task.get("summary"))
    sha = results.provenance.get("commit")
    commit = f' · commit <code title="{esc(sha)}">{esc(str(sha)[:10])}</code>' if sha else ""
    return (
        '<li class="card task-card">'
        f'<h2><a href="{esc(href)}">{esc(results.label)}</a></h2>'
        + (f'<p class="summary md">{summary}</p>' if summary else "")
        + f'<dl class="stats">{stats_html}</dl>{leader}'
        f'<p class="run-meta">Run <time datetime="{esc(created)}">{esc(format_timestamp(created))}</time>'
        f" · openpert {esc(data.get('openpert_version') or MISSING)}{commit}</p>"
        "</li>"
    )


def _leader(results: TaskResults, paths: TaskPaths) -> str:
    """The top method, linked to its page, with its margin over the next and whether it is significant."""
    top = lead(results)
    if top is None:
        return ""
    method = top.top.method
    name = str(method.get("label") or method.get("id"))
    href = f"{paths.slug}/{paths.method_page(method)}"
    text = (f'<p class="leader">Top method: <a href="{esc(href)}"><strong>{esc(name)}</strong></a> '
            f"(mean score {esc(format_score(top.top.score))})")
    if top.runner_up is None or top.margin is None:
        return text + "</p>"
    other = str(top.runner_up.method.get("label") or top.runner_up.method.get("id"))
    if top.compared == 0:
        verdict = "no paired test between them"
    elif top.significant == 0:
        verdict = f"not significantly better in any of {top.compared} paired tests"
    else:
        verdict = f"significantly better in {top.significant} of {top.compared} paired tests (p < 0.05)"
    return (text + f'<br><span class="margin">ahead of {esc(other)} by {esc(format_score(top.margin))}; '
            f"{esc(verdict)}</span></p>")
