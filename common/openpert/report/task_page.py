"""A task's page: what the task is, its leaderboards, figures, failures, QC flags and resources."""

from __future__ import annotations

from typing import Any

from openpert.report.figures import dataset_heatmap, resource_chart
from openpert.report.formatting import (
    MISSING,
    describe_failure,
    format_duration,
    format_memory,
    format_number,
    format_parameter,
    format_timestamp,
)
from openpert.report.leaderboard_html import dataset_table, overall_table
from openpert.report.leaderboards import method_kind
from openpert.report.markup import (
    badge,
    definition_list,
    doi_link,
    esc,
    external_link,
    links,
    page,
    paragraphs,
    references,
    safe_url,
    section,
    simple_table,
)
from openpert.report.paths import TaskPaths, slugify
from openpert.report.task_results import TaskResults


def render_task_page(results: TaskResults, paths: TaskPaths, log_links: dict[str, str]) -> str:
    """The HTML of a task's page (``<task>/index.html``).

    Parameters
    ----------
    results
        The task's results.
    paths
        Where the task's pages and downloads are.
    log_links
        Failure log path in ``results.json`` -> its copy in the site, relative to the task page.

    Returns
    -------
    str
        The document.
    """
    task = results.task
    blocks = [_header(results)]
    toc: list[tuple[str, str]] = []

    def add(section_id: str, title: str, content: str, intro: str = "") -> None:
        toc.append((section_id, title))
        blocks.append(section(section_id, title, content, intro=intro))

    about = _about(task)
    if about:
        add("about", "About the task", about)
    add(
        "leaderboard",
        "Overall leaderboard",
        overall_table(results, paths, "table-overall"),
        intro=paragraphs(
            "Each method's score on a dataset is the mean over metrics of its scaled score, "
            "clipped to [0, 1]; a failed method scores 0 there. The overall score is the mean "
            "over datasets."
        ),
    )
    for i, dataset in enumerate(results.datasets):
        did = str(dataset.get("dataset_id"))
        add(
            paths.dataset_anchor(did),
            f"Dataset: {results.dataset_label(did)}",
            _dataset_section(results, paths, dataset, i),
        )
    add("failures", "Failures", _failures(results, log_links))
    if results.skipped:
        add("skipped", "Skipped components", _skipped(results))
    add("qc", "Quality-control flags", _qc(results))
    add("resources", "Resource use", _resources(results))
    for key, entry in results.statistics:
        add(f"stat-{slugify(key)}", str(entry.get("label") or key), _statistic(entry))
    add("components", "Components", _components(results, paths))
    add("downloads", "Downloads", _downloads(results, paths))

    nav = (
        '<nav class="toc" aria-label="On this page"><ul>'
        + "".join(f'<li><a href="#{esc(sid)}">{esc(title)}</a></li>' for sid, title in toc)
        + "</ul></nav>"
    )
    blocks.insert(1, nav)
    return page(
        title=results.label,
        body="\n".join(blocks),
        root="../",
        crumbs=[("All tasks", "../index.html"), (results.label, None)],
        description=str(task.get("summary") or ""),
    )


def _header(results: TaskResults) -> str:
    data = results.data
    chips = [
        f"{len(results.datasets)} datasets",
        f"{len(results.methods)} methods",
        f"{len(results.controls)} controls",
        f"{len(results.metrics)} metrics",
    ]
    run = (
        f'Run <time datetime="{esc(data.get("created"))}">{esc(format_timestamp(data.get("created")))}</time>'
        f" · openpert {esc(data.get('openpert_version') or MISSING)}"
        f" · engine {esc(data.get('engine') or MISSING)}"
    )
    return (
        '<header class="page-header"><p class="eyebrow">Task</p>'
        f"<h1>{esc(results.label)}</h1>"
        f"{paragraphs(results.task.get('summary'), 'lead')}"
        '<ul class="chips">' + "".join(f"<li>{esc(c)}</li>" for c in chips) + "</ul>"
        f'<p class="run-meta">{run}</p></header>'
    )


def _about(task: dict[str, Any]) -> str:
    parts = [paragraphs(task.get("description"))]
    if task.get("motivation"):
        parts.append(f"<h3>Motivation</h3>{paragraphs(task.get('motivation'))}")
    refs = references(task.get("references"))
    if refs:
        parts.append(f"<h3>References</h3>{refs}")
    link_list = links(task.get("links"))
    if link_list:
        parts.append(f"<h3>Links</h3>{link_list}")
    return "".join(p for p in parts if p)


def _dataset_section(results: TaskResults, paths: TaskPaths, dataset: dict[str, Any], index: int) -> str:
    did = str(dataset.get("dataset_id"))
    facts = definition_list(
        [
            ("Id", f"<code>{esc(did)}</code>"),
            ("Organism", esc(str(dataset.get("dataset_organism") or "").replace("_", " "))),
            ("License", esc(dataset.get("dataset_license"))),
            ("Reference", _reference(dataset.get("dataset_reference"))),
            ("Source", external_link(dataset.get("dataset_url")) if dataset.get("dataset_url") else ""),
        ]
    )
    details = ""
    if dataset.get("dataset_description"):
        details = (
            "<details><summary>Dataset description</summary>"
            f"{paragraphs(dataset.get('dataset_description'))}</details>"
        )
    heatmap = dataset_heatmap(results, did, f"fig-heat-{index}")
    name = results.dataset_label(did)
    figure = (
        f'<figure class="figure"><div class="figure-scroll">{heatmap}</div>'
        f"<figcaption>Scaled scores on {esc(name)}: methods and controls by metric, and the "
        "dataset score. Hover a cell for its raw value.</figcaption></figure>"
    )
    return (
        f"{paragraphs(dataset.get('dataset_summary'), 'lead-small')}{facts}{details}"
        f"{dataset_table(results, paths, did, f'table-{paths.dataset_slug(did)}')}{figure}"
    )


def _reference(value: Any) -> str:
    if not value:
        return ""
    text = str(value)
    if text.lower().startswith(("10.", "doi:", "https://doi.org/")):
        return doi_link(text)
    if safe_url(text):
        return external_link(text)
    return esc(text)


def _failures(results: TaskResults, log_links: dict[str, str]) -> str:
    failures = results.failures
    if not failures:
        return '<p class="empty">No job failed.</p>'
    rows = []
    for f in failures:
        reason = describe_failure(f.get("exit_code"), f.get("reason"))
        detail = str(f.get("reason") or "")
        log = f.get("log")
        if log and log in log_links:
            log_html = f'<a href="{esc(log_links[log])}">log</a>'
        elif log:
            log_html = f"<code>{esc(log)}</code>"
        else:
            log_html = MISSING
        rows.append(
            [
                f"<code>{esc(f.get('job_id'))}</code>",
                esc(results.dataset_label(f.get("dataset_id"))),
                esc(f.get("stage")),
                esc(f.get("component")),
                (esc(f.get("exit_code")), "" if f.get("exit_code") is None else str(f.get("exit_code"))),
                f'<span class="reason">{esc(reason)}</span>'
                + (f'<span class="reason detail">{esc(detail)}</span>' if detail and detail != reason else ""),
                log_html,
            ]
        )
    caption = f"Failed jobs ({len(failures)}): exit 137 is the memory limit, 143 the time limit"
    return simple_table(
        caption,
        ["Job", "Dataset", "Stage", "Component", "Exit code", "Reason", "Log"],
        rows,
        table_id="table-failures",
        numeric=[False, False, False, False, True, False, False],
    )


def _skipped(results: TaskResults) -> str:
    rows = [[f"<code>{esc(s.get('id'))}</code>", esc(s.get("type") or MISSING), esc(s.get("reason"))] for s in results.skipped]
    return simple_table(f"Components not run ({len(rows)})", ["Component", "Type", "Reason"], rows, table_id="table-skipped")


def _qc(results: TaskResults) -> str:
    flags = results.qc
    if not flags:
        return '<p class="empty">No quality-control flag was raised.</p>'
    rows = []
    for q in flags:
        metric = results.metric(q.get("metric_id"))
        rows.append(
            [
                f"<code>{esc(q.get('flag'))}</code>",
                esc(results.dataset_label(q.get("dataset_id")) if q.get("dataset_id") else MISSING),
                esc((metric or {}).get("label") or q.get("metric_id") or MISSING),
                esc(results.method_label(q.get("method_id")) if q.get("method_id") else MISSING),
                esc(q.get("message")),
            ]
        )
    return simple_table(
        f"Quality-control flags ({len(flags)})",
        ["Flag", "Dataset", "Metric", "Method", "Message"],
        rows,
        table_id="table-qc",
    )


def _resources(results: TaskResults) -> str:
    chart = resource_chart(results, "fig-resources")
    jobs = results.resources
    if not chart and not jobs:
        return '<p class="empty">No resource use was recorded.</p>'
    parts = []
    if chart:
        parts.append(
            f'<figure class="figure"><div class="figure-scroll">{chart}</div><figcaption>Wall time and '
            "peak memory of each method's job per dataset. Metric jobs are listed in the table "
            "below.</figcaption></figure>"
        )
    rows = []
    for r in jobs:
        status = str(r.get("status") or MISSING)
        exit_code = r.get("exit_code")
        rows.append(
            [
                f"<code>{esc(r.get('job_id'))}</code>",
                esc(r.get("stage")),
                esc(r.get("component")),
                esc(results.dataset_label(r.get("dataset_id"))),
                esc(results.method_label(r.get("method_id")) if r.get("method_id") else MISSING),
                (badge(status, "ok" if status == "succeeded" else "failed"), status),
                (esc(MISSING if exit_code is None else exit_code), "" if exit_code is None else str(exit_code)),
                (esc(format_duration(r.get("duration_s"))), _key(r.get("duration_s"))),
                (esc(format_memory(r.get("peak_memory_mb"))), _key(r.get("peak_memory_mb"))),
                "yes" if r.get("cached") else "no",
            ]
        )
    if rows:
        table = simple_table(
            f"Resource use of every job ({len(rows)})",
            ["Job", "Stage", "Component", "Dataset", "Method", "Status", "Exit code", "Wall time",
             "Peak memory", "Cached"],
            rows,
            table_id="table-resources",
            numeric=[False, False, False, False, False, False, True, True, True, False],
        )
        parts.append(f"<details><summary>All jobs ({len(rows)})</summary>{table}</details>")
    return "".join(parts)


def _statistic(entry: dict[str, Any]) -> str:
    table_rows = [r for r in entry.get("table") or [] if isinstance(r, dict)]
    parts = [paragraphs(entry.get("description"))]
    if table_rows:
        columns: list[str] = []
        for r in table_rows:
            columns += [str(k) for k in r if str(k) not in columns]
        numeric = [all(isinstance(r.get(c), (int, float)) or r.get(c) is None for r in table_rows)
                   and any(isinstance(r.get(c), (int, float)) for r in table_rows) for c in columns]
        rows = []
        for r in table_rows:
            cells = []
            for c, is_num in zip(columns, numeric):
                value = r.get(c)
                if is_num:
                    cells.append((esc(format_number(value)), _key(value)))
                else:
                    cells.append(esc(MISSING if value is None else format_parameter(value)))
            rows.append(cells)
        parts.append(
            simple_table(str(entry.get("label") or "Statistics"), columns, rows, numeric=numeric)
        )
    return "".join(parts)


def _components(results: TaskResults, paths: TaskPaths) -> str:
    def card_list(title: str, entries: list[tuple[str, str, str, str]]) -> str:
        if not entries:
            return ""
        items = "".join(
            f'<li><a href="{esc(href)}">{esc(label)}</a>{extra}<span class="summary">{esc(summary)}</span></li>'
            for href, label, extra, summary in entries
        )
        return f'<div class="component-group"><h3>{esc(title)}</h3><ul class="component-list">{items}</ul></div>'

    def method_entry(m: dict[str, Any]) -> tuple[str, str, str, str]:
        kind = method_kind(m)
        extra = f" {badge(kind, str(m.get('control') or kind))}" if kind != "method" else ""
        return paths.method_page(m), str(m.get("label") or m.get("id")), extra, str(m.get("summary") or "")

    metrics = []
    for m in results.metrics:
        arrow = "↑ higher is better" if m.get("maximize", True) is not False else "↓ lower is better"
        metrics.append(
            (paths.metric_page(m.get("id")), str(m.get("label") or m.get("id")),
             f' <span class="dir-note">{arrow}</span>', str(m.get("summary") or ""))
        )
    return (
        '<div class="component-groups">'
        + card_list("Methods", [method_entry(m) for m in results.methods])
        + card_list("Control methods", [method_entry(m) for m in results.controls])
        + card_list("Metrics", metrics)
        + "</div>"
    )


def _downloads(results: TaskResults, paths: TaskPaths) -> str:
    items = [
        '<li><a href="results.json" download><code>results.json</code></a>: everything on this '
        "page, as written by the benchmark run</li>",
        f'<li><a href="{esc(paths.overall_csv())}" download>{esc(paths.overall_csv())}</a>: overall leaderboard</li>',
    ]
    for d in results.datasets:
        did = d.get("dataset_id")
        href = paths.dataset_csv(did)
        items.append(
            f'<li><a href="{esc(href)}" download>{esc(href)}</a>: leaderboard on '
            f"{esc(results.dataset_label(did))}</li>"
        )
    return f'<ul class="downloads">{"".join(items)}</ul>'


def _key(value: Any) -> str:
    return "" if value is None else repr(float(value))
