"""A task's page: what the task is, its leaderboards, figures, failures, QC flags and resources."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from openpert.report.figures import dataset_heatmap, resource_chart
from openpert.report.formatting import (
    MISSING,
    describe_failure,
    format_bool,
    format_count,
    format_duration,
    format_memory,
    format_number,
)
from openpert.report.leaderboard_html import dataset_table
from openpert.report.leaderboards import headline_tested_pairs, method_kind
from openpert.report.llm_usage import llm_usage_table
from openpert.report.markdown import plain_text, render_inline, render_markdown
from openpert.report.markup import (
    badge,
    definition_list,
    doi_link,
    esc,
    external_link,
    label_span,
    links,
    page,
    paragraphs,
    references,
    safe_url,
    section,
    short_label,
    simple_table,
)
from openpert.report.overview import overview, overview_legend_text
from openpert.report.paths import TaskPaths
from openpert.report.provenance import provenance_line, provenance_section
from openpert.report.reproduction import REPRODUCTION_CSV, reproduction_section
from openpert.report.statistics import statistic_section, table_rows
from openpert.report.task_results import TaskResults


def render_task_page(results: TaskResults, paths: TaskPaths, log_links: dict[str, str],
                     extra_sections: Sequence[tuple[str, str, str, str]] = ()) -> str:
    """The HTML of a task's page (``<task>/index.html``).

    Parameters
    ----------
    results
        The task's results.
    paths
        Where the task's pages and downloads are.
    log_links
        Failure log path in ``results.json`` -> its copy in the site, relative to the task page.
    extra_sections
        ``(id, title, html, intro)`` of sections placed after the overview (the run archive's).

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

    add(
        "overview",
        "Overview",
        overview(results, paths),
        intro=scale_details(results) + coverage_note(results),
    )
    for section_id, title, content, intro in extra_sections:
        add(section_id, title, content, intro=intro)
    if results.reproduction:
        add("reproduction", "Reproduction", reproduction_section(results),
            intro=paragraphs("The papers' published numbers beside this run's on the same data: what reproduces, "
                             "what differs and why, and what this run did not measure."))
    add("scale", "Scale and metrics", _scale(results))
    if results.gameability:
        add("gameability", "Gameability", _gameability(results),
            intro=paragraphs("How far an answer built to game a metric, without modelling the biology, gets on "
                             "the scale: the best adversarial control's scaled score against the median scaled "
                             "score of the methods. A metric is flagged gameable where the adversarial answer "
                             "beats the median method."))
    if results.dynamic_range:
        add("dynamic-range", "Dynamic range", _dynamic_range(results),
            intro=paragraphs("The distance from the strongest negative control to a realistic ceiling (the best "
                             "any method can do under the data's own noise), in standard errors of the metric. "
                             "Ranges under 2 standard errors are flagged: the metric can barely tell methods apart."))
    about = _about(task)
    if about:
        add("about", "About the task", about)
    for i, dataset in enumerate(results.datasets):
        did = str(dataset.get("dataset_id"))
        add(
            paths.dataset_anchor(did),
            f"Dataset: {short_label(results.dataset_label(did))}",
            _dataset_section(results, paths, dataset, i),
        )
    for key, entry in results.statistics:
        add(f"stat-{paths.statistic_slug(key)}", str(entry.get("label") or key),
            statistic_section(results, paths, key, entry))
    add("failures", "Failures", _failures(results, log_links))
    if results.skipped or results.config_errors:
        add("skipped", "Components not run", _skipped(results))
    add("qc", "Quality-control flags", _qc(results))
    if results.llm_usage:
        threshold = results.data.get("llm_abstention_threshold")
        add("llm-usage", "Language-model use", llm_usage_table(results, results.llm_usage, "table-llm-usage"),
            intro=paragraphs("What each language-model component asked and got back on each dataset: questions, "
                             "samples, answers without a usable label (abstained or unparseable) and questions "
                             "scored by the task's fallback instead of the model's answer, requests, retries, "
                             "cache hits and the tokens the model server reported. An abstention rate above "
                             f"{f'{100 * float(threshold):.0f}%' if threshold is not None else 'the threshold'} is a "
                             "quality-control flag, marked beside the method on the dataset's leaderboard: its "
                             "score there is partly, or mostly, the fallback's."))
    add("resources", "Resource use", _resources(results))
    add("components", "Components", _components(results, paths))
    add("provenance", "Provenance", provenance_section(results))
    add("downloads", "Downloads", _downloads(results, paths))

    nav = (
        '<nav class="toc" aria-label="On this page"><ul>'
        + "".join(f'<li><a href="#{esc(sid)}">{esc(short_label(title, 40))}</a></li>' for sid, title in toc)
        + "</ul></nav>"
    )
    blocks.insert(1, nav)
    return page(
        title=results.label,
        body="\n".join(blocks),
        root="../",
        crumbs=[("All tasks", "../index.html"), (results.label, None)],
        description=plain_text(task.get("summary")),
    )


def _scale(results: TaskResults) -> str:
    """The scale in one sentence, the headline and diagnostic metrics, and each metric's bounds."""
    headline = [m for m in results.metrics if results.is_headline(m.get("id"))]
    diagnostic = [m for m in results.metrics if not results.is_headline(m.get("id"))]

    def names(metrics: list[dict[str, Any]]) -> str:
        return ", ".join(label_span(m.get("label") or m.get("id")) for m in metrics) or MISSING

    # The scale itself is explained once, above the overview; this section lists what sets it.
    parts = [
        definition_list([("Headline metrics (in the score)", names(headline)),
                         ("Diagnostic metrics (shown only)", names(diagnostic))]),
    ]
    bounds = (results.scale or {}).get("bounds") or []
    rows = []
    for b in bounds if isinstance(bounds, list) else []:
        # Only the cells that set a scale: a bound without raw ends (no control scored there) sets none.
        if not isinstance(b, dict) or not _sets_scale(b):
            continue
        positives = ", ".join(results.method_label(m) for m in b.get("positive_method_ids") or []) or MISSING
        rows.append([
            label_span(results.dataset_label(b.get("dataset_id"))),
            label_span(results.metric_label(b.get("metric_id"))),
            (esc(format_number(b.get("hi"))), _key(b.get("hi"))),
            esc(positives),
            (esc(format_number(b.get("lo"))), _key(b.get("lo"))),
            esc(results.method_label(b.get("lo_method_id")) if b.get("lo_method_id") else MISSING),
        ])
    if rows:
        parts.append(simple_table(
            f"Raw values that set the scale ({len(rows)})",
            ["Dataset", "Metric", "1 (raw)", "Positive control", "0 (raw)", "Strongest negative control"],
            rows, table_id="table-scale", numeric=[False, False, True, False, True, False]))
    return "".join(parts)


def _sets_scale(bound: dict[str, Any]) -> bool:
    """Tell whether a scale bound sets a scale: both its raw ends are finite numbers and differ."""
    hi, lo = bound.get("hi"), bound.get("lo")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (hi, lo))
    return numbers and hi != lo


def scale_details(results: TaskResults) -> str:
    """The scale in one line, with how the scores are made on demand.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    str
        HTML: a collapsed ``<details>`` whose summary is the one line (0 and 1 of the scale) and
        whose body holds the task's scale sentence and how the overview's scores are averaged.
    """
    body = paragraphs("\n\n".join([
        results.scale_sentence,
        "Every method's scaled scores at a glance; only headline metrics enter the scores. Methods "
        "and baselines are grouped by the paired tests against the best method; the controls that set "
        "or probe the scale sit apart below them.",
        overview_legend_text(bool(headline_tested_pairs(results))),
    ]))
    return (
        '<details class="scale-details"><summary><span class="scale-note">Scaled scores: 0 = strongest '
        'negative control, 1 = positive control.</span> <span class="more">How the scores are made</span></summary>'
        f"{body}</details>"
    )


def coverage_note(results: TaskResults) -> str:
    """Say how many headline metrics the scores average when some have no value, and why.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    str
        HTML, empty when every headline metric is averaged: a note naming the metrics left out
        with the run's reason for each (a skipped component's reason, else that no method has a
        value), linking to the quality-control flags.
    """
    averaged, missing = results.headline_coverage()
    if not missing:
        return ""
    total = len(averaged) + len(missing)
    return (
        f'<p class="coverage-note" id="headline-coverage"><strong>The scores average {len(averaged)} of {total} '
        f"headline metrics.</strong> Left out: {esc(_coverage_reasons(results, missing))}. "
        '<a href="#qc">Quality-control flags</a></p>'
    )


def _coverage_reasons(results: TaskResults, missing: list[str]) -> str:
    """Each headline metric left out of the scores with why: the run's skip reason, else no value."""
    skipped = {str(s.get("id")): str(s.get("reason") or "") for s in results.skipped}
    reasons = []
    for metric_id in missing:
        metric = results.metric(metric_id) or {}
        why = skipped.get(metric_id) or skipped.get(str(metric.get("component") or "")) or "no method has a value"
        reasons.append(f"{results.metric_label(metric_id)} ({why})")
    return "; ".join(reasons)


def _gameability(results: TaskResults) -> str:
    rows = []
    for g in results.gameability:
        flagged = bool(g.get("gameable"))
        kind = "headline" if g.get("headline") else "diagnostic"
        rows.append([
            label_span(results.dataset_label(g.get("dataset_id"))),
            label_span(results.metric_label(g.get("metric_id"))),
            esc(kind),
            label_span(results.method_label(g.get("adversarial_method_id"))),
            (esc(format_number(g.get("gameability"))), _key(g.get("gameability"))),
            (esc(format_number(g.get("method_median"))), _key(g.get("method_median"))),
            (esc(format_count(g.get("n_methods") or 0)), str(g.get("n_methods") or 0)),
            (badge("gameable", "failed") if flagged else badge("no", "ok") if g.get("gameable") is False
             else esc(MISSING), "1" if flagged else "0"),
        ])
    return simple_table(
        f"Best adversarial scaled score against the median method ({len(rows)})",
        ["Dataset", "Metric", "Kind", "Best adversarial", "Its scaled score", "Median method", "Methods", "Flag"],
        rows, table_id="table-gameability", numeric=[False, False, False, False, True, True, True, False])


def _dynamic_range(results: TaskResults) -> str:
    rows = []
    for r in results.dynamic_range:
        small = r.get("small")
        flag = (badge("small", "failed") if small else badge("ok", "ok") if small is False
                else f'<span class="reason">{esc(r.get("reason") or MISSING)}</span>')
        rows.append([
            label_span(results.dataset_label(r.get("dataset_id"))),
            label_span(results.metric_label(r.get("metric_id"))),
            (esc(format_number(r.get("ceiling_raw"))), _key(r.get("ceiling_raw"))),
            (esc(format_number(r.get("negative_raw"))), _key(r.get("negative_raw"))),
            (esc(format_number(r.get("range"))), _key(r.get("range"))),
            (esc(format_number(r.get("se"))), _key(r.get("se"))),
            esc(r.get("se_source") or MISSING),
            (esc(format_number(r.get("range_se"))), _key(r.get("range_se"))),
            (flag, "1" if small else "0"),
        ])
    return simple_table(
        f"Ceiling minus strongest negative control, in standard errors ({len(rows)})",
        ["Dataset", "Metric", "Ceiling (raw)", "Negative (raw)", "Range", "SE", "SE from", "Range / SE", "Flag"],
        rows, table_id="table-dynamic-range",
        numeric=[False, False, True, True, True, True, False, True, False])


def _count(n: int, word: str) -> str:
    return f"{format_count(n)} {word}{'' if n == 1 else 's'}"


def _header(results: TaskResults) -> str:
    chips = [
        _count(len(results.datasets), "dataset"),
        _count(len(results.methods), "method"),
        _count(len(results.controls), "control"),
        _count(len(results.metrics), "metric"),
    ]
    summary = render_inline(results.task.get("summary"))
    return (
        '<header class="page-header"><p class="eyebrow">Task</p>'
        f"<h1>{esc(results.label)}</h1>"
        + (f'<p class="lead md">{summary}</p>' if summary else "")
        + '<ul class="chips">' + "".join(f"<li>{esc(c)}</li>" for c in chips) + "</ul>"
        f"{provenance_line(results)}</header>"
    )


def _about(task: dict[str, Any]) -> str:
    """What the task is: its description's first paragraph as a lead, the rest on demand."""
    description = str(task.get("description") or "").strip()
    blocks = [b for b in re.split(r"\n\s*\n", description) if b.strip()]
    lead = render_markdown(blocks[0]) if blocks else ""
    parts = [render_markdown("\n\n".join(blocks[1:]))] if len(blocks) > 1 else []
    if task.get("motivation"):
        parts.append(f"<h3>Motivation</h3>{render_markdown(task.get('motivation'))}")
    refs = references(task.get("references"))
    if refs:
        parts.append(f"<h3>References</h3>{refs}")
    link_list = links(task.get("links"))
    if link_list:
        parts.append(f"<h3>Links</h3>{link_list}")
    rest = "".join(p for p in parts if p)
    if not rest:
        return lead
    return f'{lead}<details class="about-more"><summary>More about the task</summary>{rest}</details>'


def _dataset_section(results: TaskResults, paths: TaskPaths, dataset: dict[str, Any], index: int) -> str:
    did = str(dataset.get("dataset_id"))
    name = results.dataset_label(did)
    facts = definition_list(
        [
            ("Name", esc(name) if short_label(name) != name else ""),
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
            f"{render_markdown(dataset.get('dataset_description'))}</details>"
        )
    heatmap = dataset_heatmap(results, did, f"fig-heat-{index}")
    figure = (
        f'<figure class="figure"><div class="figure-scroll">{heatmap}</div>'
        f"<figcaption>Scaled scores on {esc(short_label(name))}: methods and controls by metric, and the "
        "dataset score. Hover a cell for its raw value.</figcaption></figure>"
    )
    summary = render_inline(dataset.get("dataset_summary"))
    return (
        (f'<p class="lead-small md">{summary}</p>' if summary else "")
        + f"{facts}{details}{_source_files(dataset.get('source_files') or [])}"
        f"{dataset_table(results, paths, did, f'table-{paths.dataset_slug(did)}')}{figure}"
    )


def _source_files(files: list[dict[str, Any]]) -> str:
    """The public files a dataset was made from: origin, checksum, licence (non-commercial said plainly)."""
    if not files:
        return ""
    rows = []
    for f in files:
        origins = f.get("origin") if isinstance(f.get("origin"), list) else [f.get("origin")]
        origin = ", ".join(external_link(o) if safe_url(o) else esc(o) for o in origins if o)
        if f.get("derived_by"):
            origin = f"derived by <code>{esc(f['derived_by'])}</code> from {origin}"
        licence = esc(f.get("license")) + (" <strong>(non-commercial)</strong>" if f.get("non_commercial") else "")
        size = f"{f['size'] / 1e6:.1f} MB" if isinstance(f.get("size"), int) else "unpinned"
        checksum = f"<code>{esc(str(f['sha256'])[:12])}</code>" if f.get("sha256") else "recorded at first fetch"
        rows.append([f"<code>{esc(f.get('path'))}</code>", origin, size, checksum, licence, esc(f.get("citation"))])
    return ("<details><summary>Public files the dataset was made from</summary>"
            + simple_table(f"{len(files)} file(s), fetched and verified by openpert data fetch",
                           ["File", "Origin", "Size", "sha256", "Licence", "Citation"], rows, css_class="compact")
            + "</details>")


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
                label_span(results.dataset_label(f.get("dataset_id"))),
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
    parts = []
    if results.skipped:
        rows = [[f"<code>{esc(s.get('id'))}</code>", esc(s.get("type") or MISSING), esc(s.get("reason"))]
                for s in results.skipped]
        parts.append(simple_table(f"Components skipped by the run ({len(rows)})", ["Component", "Type", "Reason"], rows,
                                  table_id="table-skipped"))
    if results.config_errors:
        rows = [[f"<code>{esc(e.get('component'))}</code>", esc(e.get("type") or MISSING),
                 f"<code>{esc(e.get('config') or MISSING)}</code>", f'<span class="reason">{esc(e.get("reason"))}</span>']
                for e in results.config_errors]
        parts.append(simple_table(f"Components left out for config errors ({len(rows)})",
                                  ["Component", "Type", "Config", "Reason"], rows, table_id="table-config-errors"))
    return "".join(parts)


def _qc(results: TaskResults) -> str:
    flags = results.qc
    averaged, missing = results.headline_coverage()
    # Headline metrics without a value shrink every score's average: said here as well as above the overview.
    note = (f'<p class="qc-note">Scores average {len(averaged)} of {len(averaged) + len(missing)} headline metrics; '
            f"left out: {esc(_coverage_reasons(results, missing))}.</p>") if missing else ""
    if not flags:
        return note + '<p class="empty">No quality-control flag was raised.</p>'
    rows = []
    for q in flags:
        metric = results.metric(q.get("metric_id"))
        rows.append(
            [
                f"<code>{esc(q.get('flag'))}</code>",
                label_span(results.dataset_label(q.get("dataset_id"))) if q.get("dataset_id") else MISSING,
                label_span((metric or {}).get("label") or q.get("metric_id") or MISSING),
                label_span(results.method_label(q.get("method_id"))) if q.get("method_id") else MISSING,
                esc(q.get("message")),
            ]
        )
    return note + simple_table(
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
                label_span(results.dataset_label(r.get("dataset_id"))),
                label_span(results.method_label(r.get("method_id"))) if r.get("method_id") else MISSING,
                (badge(status, "ok" if status == "succeeded" else "failed"), status),
                (esc(MISSING if exit_code is None else exit_code), "" if exit_code is None else str(exit_code)),
                (esc(format_duration(r.get("duration_s"))), _key(r.get("duration_s"))),
                (esc(format_memory(r.get("peak_memory_mb"))), _key(r.get("peak_memory_mb"))),
                (_bool_mark(r.get("cached")), "1" if r.get("cached") else "0"),
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


def _components(results: TaskResults, paths: TaskPaths) -> str:
    def card_list(title: str, entries: list[tuple[str, str, str, str]]) -> str:
        if not entries:
            return ""
        items = "".join(
            f'<li><a href="{esc(href)}">{esc(label)}</a>{extra}<span class="summary md">{render_inline(summary)}</span></li>'
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
        f'<li><a href="{esc(paths.overall_csv())}" download>{esc(paths.overall_csv())}</a>: the overview '
        "(overall, dataset and metric scores, tests)</li>",
    ]
    for d in results.datasets:
        did = d.get("dataset_id")
        href = paths.dataset_csv(did)
        items.append(
            f'<li><a href="{esc(href)}" download>{esc(href)}</a>: leaderboard on '
            f"{esc(results.dataset_label(did))}</li>"
        )
    if results.reproduction.get("rows"):
        items.append(f'<li><a href="{REPRODUCTION_CSV}" download>{REPRODUCTION_CSV}</a>: published results beside '
                     "this run's (Reproduction)</li>")
    for key, entry in results.statistics:
        if table_rows(entry):
            href = paths.statistic_csv(key)
            items.append(f'<li><a href="{esc(href)}" download>{esc(href)}</a>: {esc(entry.get("label") or key)}</li>')
    return f'<ul class="downloads">{"".join(items)}</ul>'


def _bool_mark(value: Any) -> str:
    word = "yes" if value else "no"
    return (f'<span class="bool bool-{word}" aria-hidden="true">{format_bool(bool(value))}</span>'
            f'<span class="visually-hidden">{word}</span>')


def _key(value: Any) -> str:
    return "" if value is None else repr(float(value))
