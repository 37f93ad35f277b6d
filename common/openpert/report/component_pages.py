"""One page per component: methods, control methods and metrics.

A component page says what the component is, how it ran (parameters, docker image and setup),
what it cost (resources, failures) and what it scored.
"""

from __future__ import annotations

from typing import Any

from openpert.report.formatting import (
    MISSING,
    failure_label,
    format_bool,
    format_ci,
    format_duration,
    format_memory,
    format_p_value,
    format_parameter,
    format_rank,
    format_score,
)
from openpert.report.leaderboards import TIERS, method_kind, overview_rows
from openpert.report.llm_usage import llm_usage_table
from openpert.report.markdown import plain_text, render_inline, render_markdown
from openpert.report.markup import (
    badge,
    definition_list,
    esc,
    label_span,
    links,
    page,
    references,
    section,
    simple_table,
)
from openpert.report.paths import TaskPaths
from openpert.report.task_results import TaskResults, is_control, is_ranked

#: Component pages sit two folders below the site root: ``<task>/<kind>/<id>.html``.
ROOT = "../../"


def render_method_page(results: TaskResults, paths: TaskPaths, method: dict[str, Any]) -> str:
    """The page of a method or control method.

    Parameters
    ----------
    results
        The task's results.
    paths
        Where the task's pages are.
    method
        The entry of ``methods``.

    Returns
    -------
    str
        The document.
    """
    mid = str(method.get("id"))
    label = str(method.get("label") or mid)
    kind = method_kind(method)
    eyebrow = "Control method" if is_control(method) else "Method"
    overall = results.overall(mid)
    facts = [("Id", f"<code>{esc(mid)}</code>"), ("Kind", badge(kind, str(method.get("control") or kind)))]
    # The rank among methods, as the task page shows it (results.json also ranks the controls).
    row = next((r for r in results.derived("overview_rows", overview_rows) if r.method.get("id") == method.get("id")), None)
    if row is not None and is_ranked(method) and row.row.rank is not None:
        facts.append(("Overall rank", f"{esc(format_rank(row.row.rank))} of {len(results.methods)}"))
    if overall.get("score") is not None:
        facts.append(("Mean score", esc(format_score(overall.get("score")))))
    if row is not None and row.tier is not None:
        tier = next((title for key, title, _ in TIERS if key == row.tier), row.tier)
        facts.append(("Tests", f"{esc(tier)} (top group in {row.top_group} of {row.n_tests} tests)"))
    if method.get("config"):
        facts.append(("Config", f"<code>{esc(method.get('config'))}</code>"))

    blocks = [
        _header(eyebrow, label, method.get("summary"), definition_list(facts)),
        _about(method),
        section("scores", "Scores", _method_scores(results, paths, mid)),
        section("parameters", "Parameters", _parameters(method.get("parameters"))),
        section("environment", "Runtime environment", _engines(method.get("engines"))),
        section("resources", "Resource use", _resources(results, results.method_resources(mid))),
        section("failures", "Failures", _failures(results, results.component_failures(mid))),
    ]
    usage = [r for r in results.llm_usage if r.get("method_id") == mid]
    if usage:
        # Beside its resources: what its model calls cost and how many answers it could not use.
        blocks.insert(-1, section("llm-usage", "Language-model use", llm_usage_table(results, usage, "table-llm-usage")))
    return _page(results, label, blocks, method.get("summary"))


def render_metric_page(results: TaskResults, paths: TaskPaths, metric: dict[str, Any]) -> str:
    """The page of a metric.

    Parameters
    ----------
    results
        The task's results.
    paths
        Where the task's pages are.
    metric
        The entry of ``metrics``.

    Returns
    -------
    str
        The document.
    """
    metric_id = str(metric.get("id"))
    label = str(metric.get("label") or metric_id)
    maximize = metric.get("maximize", True) is not False
    facts = [
        ("Id", f"<code>{esc(metric_id)}</code>"),
        ("Component", f"<code>{esc(metric.get('component'))}</code>" if metric.get("component") else ""),
        ("Direction", "↑ higher is better" if maximize else "↓ lower is better"),
        ("Range", f"[{esc(_bound(metric.get('min'), '−∞'))}, {esc(_bound(metric.get('max'), '∞'))}]"
         if metric.get("min") is not None or metric.get("max") is not None else ""),
    ]
    if metric.get("config"):
        facts.append(("Config", f"<code>{esc(metric.get('config'))}</code>"))
    blocks = [
        _header("Metric", label, metric.get("summary"), definition_list(facts)),
        _about(metric),
        section("scores", "Scores", _metric_scores(results, paths, metric_id)),
    ]
    # The schema records parameters and engines for methods only; show them when present.
    if "parameters" in metric:
        blocks.append(section("parameters", "Parameters", _parameters(metric.get("parameters"))))
    if "engines" in metric:
        blocks.append(section("environment", "Runtime environment", _engines(metric.get("engines"))))
    blocks += [
        section("resources", "Resource use", _resources(results, results.metric_resources(metric_id))),
        section("failures", "Failures", _failures(results, results.component_failures(metric_id, metric=True))),
    ]
    return _page(results, label, blocks, metric.get("summary"))


# -- sections ---------------------------------------------------------------------------------


def _page(results: TaskResults, label: str, blocks: list[str], summary: Any) -> str:
    return page(
        title=f"{label} · {results.label}",
        body="\n".join(b for b in blocks if b),
        root=ROOT,
        crumbs=[("All tasks", f"{ROOT}index.html"), (results.label, "../index.html"), (label, None)],
        description=plain_text(summary),
    )


def _header(eyebrow: str, label: str, summary: Any, facts: str) -> str:
    lead = render_inline(summary)
    return (
        f'<header class="page-header"><p class="eyebrow">{esc(eyebrow)}</p><h1>{esc(label)}</h1>'
        + (f'<p class="lead md">{lead}</p>' if lead else "")
        + f"{facts}</header>"
    )


def _about(entry: dict[str, Any]) -> str:
    parts = [render_markdown(entry.get("description"))]
    refs = references(entry.get("references"))
    if refs:
        parts.append(f"<h3>References</h3>{refs}")
    link_list = links(entry.get("links"))
    if link_list:
        parts.append(f"<h3>Links</h3>{link_list}")
    content = "".join(p for p in parts if p)
    return section("about", "Description", content) if content else ""


def _parameters(params: Any) -> str:
    if not isinstance(params, dict) or not params:
        return '<p class="empty">Ran with its default arguments (no parameters recorded).</p>'
    rows = [[f"<code>{esc(k)}</code>", f"<code>{esc(format_parameter(v))}</code>"] for k, v in params.items()]
    return simple_table("Parameters the component ran with", ["Parameter", "Value"], rows,
                        table_id="table-parameters", sortable=False, css_class="compact")


def _engines(engines: Any) -> str:
    if not isinstance(engines, list) or not engines:
        return '<p class="empty">No engine recorded.</p>'
    items = []
    for engine in engines:
        if not isinstance(engine, dict):
            items.append(f"<li><code>{esc(format_parameter(engine))}</code></li>")
            continue
        kind = str(engine.get("type") or "engine")
        facts = []
        if engine.get("image"):
            facts.append(("Image", f'<code class="image">{esc(engine.get("image"))}</code>'))
        setup = engine.get("setup")
        if setup:
            facts.append(("Setup", _setup(setup)))
        for key, value in engine.items():
            if key not in ("type", "image", "setup") and value not in (None, "", [], {}):
                facts.append((str(key), f"<code>{esc(format_parameter(value))}</code>"))
        body = definition_list(facts) or '<p class="empty">Runs in the current environment.</p>'
        items.append(f'<li class="engine"><h3>{esc(kind)}</h3>{body}</li>')
    return f'<ul class="engines">{"".join(items)}</ul>'


def _setup(setup: Any) -> str:
    steps = setup if isinstance(setup, list) else [setup]
    items = []
    for step in steps:
        if isinstance(step, dict):
            kind = step.get("type")
            rest = []
            for key, value in step.items():
                if key == "type":
                    continue
                if isinstance(value, list):
                    value_text = ", ".join(format_parameter(v) for v in value)
                else:
                    value_text = format_parameter(value)
                rest.append(f"{esc(key)}: <code>{esc(value_text)}</code>")
            head = f"{badge(str(kind), 'muted')} " if kind else ""
            items.append(f"<li>{head}{'; '.join(rest)}</li>")
        else:
            items.append(f"<li><code>{esc(format_parameter(step))}</code></li>")
    return f'<ul class="setup">{"".join(items)}</ul>'


def _resources(results: TaskResults, jobs: list[dict[str, Any]]) -> str:
    if not jobs:
        return '<p class="empty">No resource use recorded.</p>'
    rows = []
    for r in jobs:
        status = str(r.get("status") or MISSING)
        code = r.get("exit_code")
        rows.append(
            [
                f"<code>{esc(r.get('job_id'))}</code>",
                label_span(results.dataset_label(r.get("dataset_id"))),
                (badge(status, "ok" if status == "succeeded" else "failed"), status),
                (esc(MISSING if code is None else code), "" if code is None else str(code)),
                (esc(format_duration(r.get("duration_s"))), _key(r.get("duration_s"))),
                (esc(format_memory(r.get("peak_memory_mb"))), _key(r.get("peak_memory_mb"))),
                (_bool_mark(r.get("cached")), "1" if r.get("cached") else "0"),
            ]
        )
    return simple_table(
        f"Resource use ({len(rows)} jobs)",
        ["Job", "Dataset", "Status", "Exit code", "Wall time", "Peak memory", "Cached"],
        rows,
        table_id="table-resources",
        numeric=[False, False, False, True, True, True, False],
    )


def _failures(results: TaskResults, failures: list[dict[str, Any]]) -> str:
    if not failures:
        return '<p class="empty">No job of this component failed.</p>'
    items = "".join(
        f"<li><code>{esc(f.get('job_id'))}</code> on {label_span(results.dataset_label(f.get('dataset_id')))}: "
        f"<strong>{esc(failure_label(f.get('exit_code'), f.get('reason')))}</strong>"
        + (f' <span class="muted">({esc(f.get("reason"))})</span>'
           if f.get("reason") and f.get("exit_code") in (137, 143) else "")
        + "</li>"
        for f in failures
    )
    return f'<ul class="failure-list">{items}</ul>'


def _method_scores(results: TaskResults, paths: TaskPaths, method_id: str) -> str:
    rows = []
    for d in results.datasets:
        did = d.get("dataset_id")
        for metric in results.metrics:
            mid = metric.get("id")
            score = results.score(did, method_id, mid)
            if not score:
                continue
            rows.append(
                [
                    label_span(results.dataset_label(did)),
                    f'<a href="../{esc(paths.metric_page(mid))}">{label_span(metric.get("label") or mid)}</a>',
                    (esc(format_ci(score.get("raw"), score.get("ci_low"), score.get("ci_high"))),
                     _key(score.get("raw"))),
                    (esc(format_score(score.get("scaled"))), _key(score.get("scaled"))),
                    esc(_versus_best(results, did, mid, method_id)),
                ]
            )
    if not rows:
        return '<p class="empty">No score: every job of this method failed or was not scored.</p>'
    return simple_table(
        "Raw value with 95% CI and scaled score per dataset and metric",
        ["Dataset", "Metric", "Raw [95% CI]", "Scaled", "Compared with the best method"],
        rows,
        table_id="table-scores",
        numeric=[False, False, True, True, False],
    )


def _metric_scores(results: TaskResults, paths: TaskPaths, metric_id: str) -> str:
    rows = []
    for d in results.datasets:
        did = d.get("dataset_id")
        for method in results.methods + results.controls:
            mid = method.get("id")
            score = results.score(did, mid, metric_id)
            if not score:
                continue
            kind = method_kind(method)
            extra = f" {badge(kind, str(method.get('control') or kind))}" if kind != "method" else ""
            rows.append(
                [
                    label_span(results.dataset_label(did)),
                    (f'<a href="../{esc(paths.method_page(method))}">{label_span(method.get("label") or mid)}</a>{extra}',
                     str(method.get("label") or mid)),
                    (esc(format_ci(score.get("raw"), score.get("ci_low"), score.get("ci_high"))),
                     _key(score.get("raw"))),
                    (esc(format_score(score.get("scaled"))), _key(score.get("scaled"))),
                    esc(_versus_best(results, did, metric_id, mid)),
                ]
            )
    if not rows:
        return '<p class="empty">No method was scored on this metric.</p>'
    return simple_table(
        "Raw value with 95% CI and scaled score per dataset and method",
        ["Dataset", "Method", "Raw [95% CI]", "Scaled", "Compared with the best method"],
        rows,
        table_id="table-scores",
        numeric=[False, False, True, True, False],
    )


def _versus_best(results: TaskResults, dataset_id: Any, metric_id: Any, method_id: Any) -> str:
    best = results.best_method_id(dataset_id, metric_id)
    if best is None:
        return MISSING
    if best == method_id:
        return "best"
    comparison = results.comparison(dataset_id, metric_id, method_id)
    if not comparison:
        return MISSING
    p = format_p_value(comparison.get("p_value"))
    name = results.method_label(best)
    if comparison.get("significant") is False:
        return f"≈ {name} (p = {p})"
    return f"differs from {name} (p = {p})"


def _bool_mark(value: Any) -> str:
    word = "yes" if value else "no"
    return (f'<span class="bool bool-{word}" aria-hidden="true">{format_bool(bool(value))}</span>'
            f'<span class="visually-hidden">{word}</span>')


def _bound(value: Any, unbounded: str) -> str:
    # Bounds as written in the config (0, 1, -1), not as scores with three decimals.
    return unbounded if value is None else format_parameter(value)


def _key(value: Any) -> str:
    return "" if value is None else repr(float(value))
