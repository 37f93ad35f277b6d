"""The site's front page: one card per task."""

from __future__ import annotations

from collections.abc import Sequence

from openpert.report.formatting import MISSING, format_score, format_timestamp
from openpert.report.leaderboards import overall_rows
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
    leader = ""
    ranked = [r for r in overall_rows(results) if not r.control and r.rank == 1]
    if ranked:
        names = ", ".join(str(r.method.get("label") or r.method.get("id")) for r in ranked)
        leader = (
            f'<p class="leader">Top method: <strong>{esc(names)}</strong> '
            f"(mean score {esc(format_score(ranked[0].score))})</p>"
        )
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
