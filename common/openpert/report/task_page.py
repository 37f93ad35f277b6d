"""A task's page: what the task is, its leaderboards, figures, failures, QC flags and resources.

Python gathers what each section shows into plain view models; the markup is in the templates
``task_page.html`` (the page) and ``task/*.html`` (its sections and the cells that hold more than text).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

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
from openpert.report.fragments import badge, badge_kind, code, fragment, label, paragraphs, sort_key, table
from openpert.report.leaderboard_html import dataset_table
from openpert.report.leaderboards import method_kind
from openpert.report.llm_usage import llm_model_sentence, llm_usage_table
from openpert.report.markdown import plain_text, render_inline, render_markdown
from openpert.report.overview import overview, overview_legend_text
from openpert.report.paths import TaskPaths
from openpert.report.provenance import provenance_line, provenance_section
from openpert.report.reproduction import REPRODUCTION_CSV, reproduction_section
from openpert.report.statistics import statistic_section, table_rows
from openpert.report.task_results import TaskResults
from openpert.report.templating import macro, render
from openpert.report.text_parts import safe_url, short_label
from openpert.report.views import Table

#: The templates of a task page's table cells that hold more than text.
CELLS = "task/cells.html"


@dataclass(frozen=True)
class SectionView:
    """One section of a task page, in the order of the page and of its navigation.

    Attributes
    ----------
    id
        The section's id (its anchor).
    title
        Its heading (text).
    content
        Its content (``Markup``).
    intro
        What stands right under the heading (``Markup``, may be empty).
    """

    id: str
    title: str
    content: Markup
    intro: Markup = Markup("")


def render_task_page(results: TaskResults, paths: TaskPaths, log_links: dict[str, str],
                     extra_sections: Sequence[tuple[str, str, str, str]] = (), *, datasets_inline: bool = True,
                     tests_href: str | None = None, own_pages: Mapping[str, str] | None = None) -> Markup:
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
    datasets_inline
        Whether each dataset's section is on the page; else one "Datasets" section links to each
        dataset's own page (:meth:`TaskPaths.dataset_page`, rendered with :func:`dataset_section`
        and :func:`dataset_jobs`), which also lists the dataset's jobs in place of "Resource use".
    tests_href
        Where the overview links for its test matrix when each dataset's page holds its part
        (``"#datasets"``; see ``overview``).
    own_pages
        Section id -> the page it moved to: such a section keeps its heading and links there.

    Returns
    -------
    Markup
        The document.
    """
    moved = dict(own_pages or {})
    task = results.task
    sections: list[SectionView] = []

    def add(section_id: str, title: str, content: Any, intro: Any = "") -> None:
        # The heavy sections come as a function that renders them: a section on its own page is not
        # rendered again for the heading and link it leaves here.
        if section_id in moved:
            content, intro = render("task/moved_section.html", title=title, href=moved[section_id]), Markup("")
        elif callable(content):
            content = content()
        sections.append(SectionView(section_id, title, content, intro))

    add("overview", "Overview", overview(results, paths, tests_href=tests_href), intro=scale_details(results) + coverage_note(results))
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
    for i, dataset in enumerate(results.datasets if datasets_inline else []):
        did = str(dataset.get("dataset_id"))
        add(paths.dataset_anchor(did), f"Dataset: {short_label(results.dataset_label(did))}",
            functools.partial(dataset_section, results, paths, dataset, i))
    if results.datasets and not datasets_inline:
        add("datasets", "Datasets", _dataset_links(results, paths))
    for key, entry in results.statistics:
        add(f"stat-{paths.statistic_slug(key)}", str(entry.get("label") or key),
            functools.partial(statistic_section, results, paths, key, entry))
    add("failures", "Failures", functools.partial(_failures, results, log_links))
    if results.skipped or results.config_errors:
        add("skipped", "Components not run", _skipped(results))
    add("qc", "Quality-control flags", functools.partial(_qc, results))
    if results.llm_usage:
        threshold = results.data.get("llm_abstention_threshold")
        add("llm-usage", "Language-model use", llm_usage_table(results, results.llm_usage, "table-llm-usage"),
            intro=paragraphs("What each language-model component asked and got back on each dataset: questions, "
                             "samples, answers without a usable label (abstained or unparseable) and questions "
                             "scored by the task's fallback instead of the model's answer, prompts longer than the "
                             "model's context window (too long: answered as abstentions), requests, retries, "
                             "cache hits and the tokens the model server reported. An abstention rate above "
                             f"{f'{100 * float(threshold):.0f}%' if threshold is not None else 'the threshold'}, and "
                             "any prompt too long, is a quality-control flag, marked beside the method on the "
                             "dataset's leaderboard: its score there is partly, or mostly, the fallback's. "
                             + llm_model_sentence((results.data.get("provenance") or {}).get("llm"))))
    add("resources", "Resource use", functools.partial(_resources, results, jobs_inline=datasets_inline))
    add("components", "Components", functools.partial(_components, results, paths))
    add("provenance", "Provenance", functools.partial(provenance_section, results))
    add("downloads", "Downloads", _downloads(results, paths))

    return render(
        "task_page.html",
        title=results.label,
        root="../",
        crumbs=[("All tasks", "../index.html"), (results.label, None)],
        description=plain_text(task.get("summary")),
        header=_header(results),
        sections=sections,
    )


def _scale(results: TaskResults) -> Markup:
    """The headline and diagnostic metrics, and the raw values of the cells that set a scale."""
    headline = [m.get("label") or m.get("id") for m in results.metrics if results.is_headline(m.get("id"))]
    diagnostic = [m.get("label") or m.get("id") for m in results.metrics if not results.is_headline(m.get("id"))]
    # The scale itself is explained once, above the overview; this section lists what sets it.
    bounds = results.scale.get("bounds") or []
    rows = []
    for b in bounds if isinstance(bounds, list) else []:
        # Only the cells that set a scale: both raw ends finite numbers that differ (a bound without
        # them, where no control scored, sets none).
        ends = (b.get("hi"), b.get("lo")) if isinstance(b, dict) else (None, None)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in ends) or ends[0] == ends[1]:
            continue
        positives = ", ".join(results.method_label(m) for m in b.get("positive_method_ids") or []) or MISSING
        rows.append([
            label(results.dataset_label(b.get("dataset_id"))),
            label(results.metric_label(b.get("metric_id"))),
            _number(b.get("hi")),
            positives,
            _number(b.get("lo")),
            results.method_label(b.get("lo_method_id")) if b.get("lo_method_id") else MISSING,
        ])
    view = table(
        f"Raw values that set the scale ({len(rows)})",
        ["Dataset", "Metric", "1 (raw)", "Positive control", "0 (raw)", "Strongest negative control"],
        rows, table_id="table-scale", numeric=[False, False, True, False, True, False]) if rows else None
    return render("task/scale.html", headline=headline, diagnostic=diagnostic, table=view)


def scale_details(results: TaskResults) -> Markup:
    """The scale in one line, with how the scores are made on demand.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    Markup
        A collapsed ``<details>`` whose summary is the one line (0 and 1 of the scale) and whose
        body holds the task's scale sentence and how the overview's scores are averaged.
    """
    explanation = "\n\n".join([
        results.scale_sentence,
        "Every method's scaled scores at a glance; only headline metrics enter the scores. Methods "
        "and baselines are grouped by the paired tests against the best method; the controls that set "
        "or probe the scale sit apart below them.",
        overview_legend_text(bool(results.headline_tested_pairs())),
    ])
    return render("task/scale_details.html", explanation=explanation)


def coverage_note(results: TaskResults) -> Markup:
    """Say how many headline metrics the scores average when some have no value, and why.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    Markup
        Empty when every headline metric is averaged; else a note naming the metrics left out
        with the run's reason for each (a skipped component's reason, else that no method has a
        value), linking to the quality-control flags.
    """
    coverage = _coverage(results)
    if coverage is None:
        return Markup("")
    return render("task/coverage_note.html", **coverage)


def _coverage(results: TaskResults) -> dict[str, Any] | None:
    """How many headline metrics the scores average, of how many, and why the others are left out."""
    averaged, missing = results.headline_coverage()
    if not missing:
        return None
    return {"averaged": len(averaged), "total": len(averaged) + len(missing),
            "reasons": _coverage_reasons(results, missing)}


def _coverage_reasons(results: TaskResults, missing: list[str]) -> str:
    """The headline metrics left out of the scores with why: the run's skip reason, else no value."""
    skipped = {str(s.get("id")): str(s.get("reason") or "") for s in results.skipped}
    # A skipped metric component lists the metrics it would have computed: they have no entry of their own.
    skipped_metrics = {str(m.get("id")): (str(m.get("label") or m.get("id")), str(s.get("reason") or ""))
                       for s in results.skipped if isinstance(s.get("metrics"), list)
                       for m in s["metrics"] if isinstance(m, dict)}
    # Metrics left out for one reason are named together (a skipped judge component leaves out several).
    labels_by_reason: dict[str, list[str]] = {}
    for metric_id in missing:
        metric = results.metric(metric_id) or {}
        name, component_reason = skipped_metrics.get(metric_id, (results.metric_label(metric_id), ""))
        why = (skipped.get(metric_id) or skipped.get(str(metric.get("component") or "")) or component_reason
               or "no method has a value")
        labels_by_reason.setdefault(why, []).append(name)
    return "; ".join(f"{', '.join(labels)} ({why})" for why, labels in labels_by_reason.items())


def _gameability(results: TaskResults) -> Markup:
    rows = []
    for g in results.gameability:
        flagged = bool(g.get("gameable"))
        kind = "headline" if g.get("headline") else "diagnostic"
        flag = (badge("gameable", "failed") if flagged else badge("no", "ok") if g.get("gameable") is False
                else MISSING)
        rows.append([
            label(results.dataset_label(g.get("dataset_id"))),
            label(results.metric_label(g.get("metric_id"))),
            kind,
            label(results.method_label(g.get("adversarial_method_id"))),
            _number(g.get("gameability")),
            _number(g.get("method_median")),
            (format_count(g.get("n_methods") or 0), str(g.get("n_methods") or 0)),
            (flag, "1" if flagged else "0"),
        ])
    view = table(
        f"Best adversarial scaled score against the median method ({len(rows)})",
        ["Dataset", "Metric", "Kind", "Best adversarial", "Its scaled score", "Median method", "Methods", "Flag"],
        rows, table_id="table-gameability", numeric=[False, False, False, False, True, True, True, False])
    return render("task/tables.html", tables=[view], empty="")


def _dynamic_range(results: TaskResults) -> Markup:
    rows = []
    for r in results.dynamic_range:
        small = r.get("small")
        flag = (badge("small", "failed") if small else badge("ok", "ok") if small is False
                else _cell("reason", r.get("reason") or MISSING))
        rows.append([
            label(results.dataset_label(r.get("dataset_id"))),
            label(results.metric_label(r.get("metric_id"))),
            _number(r.get("ceiling_raw")),
            _number(r.get("negative_raw")),
            _number(r.get("range")),
            _number(r.get("se")),
            r.get("se_source") or MISSING,
            _number(r.get("range_se")),
            (flag, "1" if small else "0"),
        ])
    view = table(
        f"Ceiling minus strongest negative control, in standard errors ({len(rows)})",
        ["Dataset", "Metric", "Ceiling (raw)", "Negative (raw)", "Range", "SE", "SE from", "Range / SE", "Flag"],
        rows, table_id="table-dynamic-range",
        numeric=[False, False, True, True, True, True, False, True, False])
    return render("task/tables.html", tables=[view], empty="")


def _header(results: TaskResults) -> Markup:
    chips = [f"{format_count(n)} {word}{'' if n == 1 else 's'}" for word, n in results.sizes]
    return render("task/header.html", label=results.label, summary=Markup(render_inline(results.task.get("summary"))),
                  chips=chips, provenance=provenance_line(results))


def _about(task: dict[str, Any]) -> Markup:
    """What the task is: its description's first paragraph as a lead, the rest on demand."""
    description = str(task.get("description") or "").strip()
    blocks = [b for b in re.split(r"\n\s*\n", description) if b.strip()]
    view = {
        "lead": Markup(render_markdown(blocks[0]) if blocks else ""),
        "rest": Markup(render_markdown("\n\n".join(blocks[1:])) if len(blocks) > 1 else ""),
        "motivation": Markup(render_markdown(task.get("motivation")) if task.get("motivation") else ""),
        "references": task.get("references"),
        "links": task.get("links"),
    }
    # Empty when the task says nothing about itself, so that the page leaves the section out.
    return render("task/about.html", **view).strip()


def _dataset_links(results: TaskResults, paths: TaskPaths) -> Markup:
    """Each dataset's name, linked to its own page, with its one-line summary."""
    datasets = [{"label": results.dataset_label(d.get("dataset_id")), "href": paths.dataset_page(d.get("dataset_id")),
                 "summary": Markup(render_inline(d.get("dataset_summary")))} for d in results.datasets]
    return render("task/dataset_links.html", datasets=datasets)


def dataset_section(results: TaskResults, paths: TaskPaths, dataset: dict[str, Any], index: int) -> Markup:
    """One dataset's section: its facts, public files, leaderboard and heatmap.

    Parameters
    ----------
    results
        The task's results.
    paths
        Where the task's pages are, as seen from the page the section is on.
    dataset
        The dataset's entry of ``results.json``.
    index
        Its position among the task's datasets (names its heatmap's ids).

    Returns
    -------
    Markup
        The section's content (without its heading).
    """
    did = str(dataset.get("dataset_id"))
    name = results.dataset_label(did)
    return render(
        "task/dataset.html",
        summary=Markup(render_inline(dataset.get("dataset_summary"))),
        name=name,
        short_name=short_label(name),
        dataset_id=did,
        organism=str(dataset.get("dataset_organism") or "").replace("_", " "),
        licence=dataset.get("dataset_license") or "",
        reference=_reference(dataset.get("dataset_reference")),
        url=dataset.get("dataset_url") or None,
        description=Markup(render_markdown(dataset.get("dataset_description"))
                           if dataset.get("dataset_description") else ""),
        source_files=_source_files(dataset.get("source_files") or []),
        leaderboard=dataset_table(results, paths, did, f"table-{paths.dataset_slug(did)}"),
        heatmap=dataset_heatmap(results, did, f"fig-heat-{index}"),
    )


def _source_files(files: list[dict[str, Any]]) -> Table | None:
    """The public files a dataset was made from: origin, checksum, licence (non-commercial said plainly)."""
    if not files:
        return None
    rows = []
    for f in files:
        origins = f.get("origin") if isinstance(f.get("origin"), list) else [f.get("origin")]
        size = f"{f['size'] / 1e6:.1f} MB" if isinstance(f.get("size"), int) else "unpinned"
        rows.append([
            code(_text(f.get("path"))),
            _cell("origin", [str(o) for o in origins if o], f.get("derived_by")),
            size,
            _cell("checksum", str(f["sha256"]) if f.get("sha256") else ""),
            _cell("licence", f.get("license"), bool(f.get("non_commercial"))),
            _text(f.get("citation")),
        ])
    return table(f"{len(files)} file(s), fetched and verified by openpert data fetch",
                 ["File", "Origin", "Size", "sha256", "Licence", "Citation"], rows, css_class="compact")


def _reference(value: Any) -> dict[str, str] | None:
    """A dataset's reference and how to show it: a DOI link, an outside link, or text."""
    if not value:
        return None
    text = str(value)
    kind = "doi" if text.lower().startswith(("10.", "doi:", "https://doi.org/")) else "url" if safe_url(text) else "text"
    return {"kind": kind, "value": text}


def _failures(results: TaskResults, log_links: dict[str, str]) -> Markup:
    failures = results.failures
    rows = []
    for f in failures:
        reason, detail, log = describe_failure(f.get("exit_code"), f.get("reason")), str(f.get("reason") or ""), f.get("log")
        rows.append([
            code(_text(f.get("job_id"))),
            label(results.dataset_label(f.get("dataset_id"))),
            _text(f.get("stage")),
            _text(f.get("component")),
            (_text(f.get("exit_code")), "" if f.get("exit_code") is None else str(f.get("exit_code"))),
            _cell("reason", reason, detail if detail != reason else ""),
            _cell("log", log_links.get(log) if log else None, log),
        ])
    tables = [table(
        f"Failed jobs ({len(failures)}): exit 137 is the memory limit, 143 the time limit",
        ["Job", "Dataset", "Stage", "Component", "Exit code", "Reason", "Log"],
        rows,
        table_id="table-failures",
        numeric=[False, False, False, False, True, False, False],
    )] if failures else []
    return render("task/tables.html", tables=tables, empty="No job failed.")


def _skipped(results: TaskResults) -> Markup:
    tables = []
    if results.skipped:
        rows = [[code(_text(s.get("id"))), s.get("type") or MISSING, _text(s.get("reason"))] for s in results.skipped]
        tables.append(table(f"Components skipped by the run ({len(rows)})", ["Component", "Type", "Reason"], rows,
                            table_id="table-skipped"))
    if results.config_errors:
        rows = [[code(_text(e.get("component"))), e.get("type") or MISSING,
                 code(e.get("config") or MISSING), _cell("reason", e.get("reason"))]
                for e in results.config_errors]
        tables.append(table(f"Components left out for config errors ({len(rows)})",
                            ["Component", "Type", "Config", "Reason"], rows, table_id="table-config-errors"))
    return render("task/tables.html", tables=tables, empty="")


def _qc(results: TaskResults) -> Markup:
    flags = results.qc
    rows = []
    for q in flags:
        metric = results.metric(q.get("metric_id"))
        rows.append([
            code(_text(q.get("flag"))),
            label(results.dataset_label(q.get("dataset_id"))) if q.get("dataset_id") else MISSING,
            label((metric or {}).get("label") or q.get("metric_id") or MISSING),
            label(results.method_label(q.get("method_id"))) if q.get("method_id") else MISSING,
            _text(q.get("message")),
        ])
    view = table(f"Quality-control flags ({len(flags)})", ["Flag", "Dataset", "Metric", "Method", "Message"],
                 rows, table_id="table-qc") if flags else None
    # Headline metrics without a value shrink every score's average: said here as well as above the overview.
    return render("task/qc.html", coverage=_coverage(results), table=view)


def _resources(results: TaskResults, *, jobs_inline: bool = True) -> Markup:
    jobs = results.resources
    return render("task/resources.html", chart=resource_chart(results, "fig-resources"), jobs_elsewhere=not jobs_inline and bool(jobs),
                  table=job_table(results, jobs, f"Resource use of every job ({len(jobs)})") if jobs_inline else None)


def dataset_jobs(results: TaskResults, dataset_id: str) -> Markup:
    """The table of a dataset's jobs, on demand (a dataset's own page, where the task page lists none).

    Parameters
    ----------
    results
        The task's results.
    dataset_id
        The dataset.

    Returns
    -------
    Markup
        A collapsed table of the dataset's jobs, or a line saying none was recorded.
    """
    jobs = [r for r in results.resources if str(r.get("dataset_id")) == str(dataset_id)]
    return render("task/resources.html", chart=Markup(""), jobs_elsewhere=False,
                  table=job_table(results, jobs, f"Resource use of every job ({len(jobs)})"))


def job_table(results: TaskResults, jobs: list[dict[str, Any]], caption: str, *, whose: bool = True) -> Table | None:
    """Jobs with their status, exit code, wall time, peak memory and cache use.

    Parameters
    ----------
    results
        The task's results.
    jobs
        Rows of ``resources``.
    caption
        The table's caption.
    whose
        Also give each job's stage, component and method (a component's own page needs none of them).

    Returns
    -------
    Table or None
        The table; None when there is no job.
    """
    rows = []
    for r in jobs:
        status = str(r.get("status") or MISSING)
        exit_code = r.get("exit_code")
        dataset = label(results.dataset_label(r.get("dataset_id")))
        method = label(results.method_label(r.get("method_id"))) if r.get("method_id") else MISSING
        rows.append([
            code(_text(r.get("job_id"))),
            *([_text(r.get("stage")), _text(r.get("component")), dataset, method] if whose else [dataset]),
            (badge(status, "ok" if status == "succeeded" else "failed"), status),
            (MISSING if exit_code is None else exit_code, "" if exit_code is None else str(exit_code)),
            (format_duration(r.get("duration_s")), sort_key(r.get("duration_s"))),
            (format_memory(r.get("peak_memory_mb")), sort_key(r.get("peak_memory_mb"))),
            (fragment("bool_mark")(bool(r.get("cached")), format_bool(bool(r.get("cached")))),
             "1" if r.get("cached") else "0"),
        ])
    titles = ["Job", *(["Stage", "Component", "Dataset", "Method"] if whose else ["Dataset"]), "Status", "Exit code",
              "Wall time", "Peak memory", "Cached"]
    numeric = [title in ("Exit code", "Wall time", "Peak memory") for title in titles]
    return table(caption, titles, rows, table_id="table-resources", numeric=numeric) if rows else None


def _components(results: TaskResults, paths: TaskPaths) -> Markup:
    def entry(m: dict[str, Any], href: str, kind: tuple[str, str] | None = None, direction: str | None = None) -> dict[str, Any]:
        return {"href": href, "label": str(m.get("label") or m.get("id")), "badge": kind, "direction": direction,
                "summary": Markup(render_inline(str(m.get("summary") or "")))}

    def method_entry(m: dict[str, Any]) -> dict[str, Any]:
        kind = method_kind(m)
        return entry(m, paths.method_page(m), (kind, badge_kind(str(m.get("control") or kind))) if kind != "method" else None)

    metrics = [entry(m, paths.metric_page(m.get("id")),
                     direction="↑ higher is better" if m.get("maximize", True) is not False else "↓ lower is better")
               for m in results.metrics]
    return render("task/components.html", groups=[("Methods", [method_entry(m) for m in results.methods]),
                                                  ("Control methods", [method_entry(m) for m in results.controls]),
                                                  ("Metrics", metrics)])


def _downloads(results: TaskResults, paths: TaskPaths) -> Markup:
    files = [(paths.overall_csv(), "the overview (overall, dataset and metric scores, tests)")]
    for d in results.datasets:
        did = d.get("dataset_id")
        files.append((paths.dataset_csv(did), f"leaderboard on {results.dataset_label(did)}"))
    if results.reproduction.get("rows"):
        files.append((REPRODUCTION_CSV, "published results beside this run's (Reproduction)"))
    for key, entry in results.statistics:
        if table_rows(entry):
            files.append((paths.statistic_csv(key), str(entry.get("label") or key)))
    return render("task/downloads.html", files=files)


# -- view helpers ----------------------------------------------------------------------------


def _cell(name: str, *args: Any) -> Markup:
    """A cell's content made by a macro of ``task/cells.html`` (reason, log, origin, licence, checksum)."""
    return macro(name, CELLS)(*(_text(a) for a in args))


def _text(value: Any) -> Any:
    """A value shown as text, ``None`` shown as nothing (``results.json`` leaves out what it lacks)."""
    return "" if value is None else value


def _number(value: Any) -> tuple[str, str]:
    """A number's cell: its text, sorted by its value."""
    return format_number(value), sort_key(value)
