"""One page per component: methods, control methods and metrics.

A component page says what the component is, how it ran (parameters, docker image and setup),
what it cost (resources, failures) and what it scored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from openpert.report.formatting import (
    MISSING,
    failure_label,
    format_ci,
    format_number,
    format_p_value,
    format_parameter,
    format_rank,
)
from openpert.report.fragments import badge, badge_kind, code, fragment, label, sort_key, table
from openpert.report.leaderboards import method_kind
from openpert.report.llm_usage import llm_usage_table
from openpert.report.markdown import plain_text, render_inline, render_markdown
from openpert.report.paths import TaskPaths
from openpert.report.task_page import job_table
from openpert.report.task_results import TaskResults, is_control, is_ranked
from openpert.report.templating import render
from openpert.report.views import Table
from openpert.results.model import TIERS

#: Component pages sit two folders below the site root: ``<task>/<kind>/<id>.html``.
ROOT = "../../"
#: A section the page leaves out (a metric's parameters and engines, which the schema does not record).
HIDDEN = "hidden"


@dataclass(frozen=True)
class SetupStep:
    """One step of an engine's setup: its kind and its fields as text, or a plain value."""

    kind: str | None = None
    fields: tuple[tuple[str, str], ...] = ()
    plain: str | None = None


@dataclass(frozen=True)
class EngineView:
    """One engine a component runs on: its kind, image, setup and other settings, or a plain value."""

    kind: str = ""
    image: str = ""
    setup: tuple[SetupStep, ...] = ()
    extras: tuple[tuple[str, Markup], ...] = ()
    plain: str | None = None


@dataclass(frozen=True)
class FailureView:
    """A failed job of the component: its id, dataset, what went wrong and the scheduler's reason."""

    job_id: str
    dataset: str
    label: str
    reason: str


def render_method_page(results: TaskResults, paths: TaskPaths, method: dict[str, Any]) -> Markup:
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
    Markup
        The document (``component/page.html``).
    """
    mid = str(method.get("id"))
    title = str(method.get("label") or mid)
    kind = method_kind(method)
    overall = results.overall(mid)
    facts: list[tuple[str, Any]] = [("Id", code(mid)), ("Kind", badge(kind, str(method.get("control") or kind)))]
    if is_ranked(method) and overall.get("rank") is not None:
        facts.append(("Overall rank", f"{format_rank(overall.get('rank'))} of {len(results.methods)}"))
    if overall.get("score") is not None:
        facts.append(("Mean score", format_number(overall.get("score"))))
    standing = results.standing(mid)
    if standing is not None and standing.tier is not None:
        tier = next((name for key, name, _ in TIERS if key == standing.tier), standing.tier)
        facts.append(("Tests", f"{tier} (top group in {standing.top_group} of {standing.n_tests} tests)"))
    if method.get("config"):
        facts.append(("Config", code(method.get("config"))))
    usage = [r for r in results.llm_usage if r.get("method_id") == mid]
    return _page(
        results, method, "Control method" if is_control(method) else "Method", title, facts,
        scores=_method_scores(results, paths, mid),
        no_scores="No score: every job of this method failed or was not scored.",
        parameters=_parameters(method.get("parameters")),
        engines=_engines(method.get("engines")),
        resources=_jobs(results, results.method_resources(mid)),
        # Beside its resources: what its model calls cost and how many answers it could not use.
        llm_usage=llm_usage_table(results, usage, "table-llm-usage") if usage else None,
        failures=_failures(results, results.component_failures(mid)),
    )


def render_metric_page(results: TaskResults, paths: TaskPaths, metric: dict[str, Any]) -> Markup:
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
    Markup
        The document (``component/page.html``).
    """
    metric_id = str(metric.get("id"))
    title = str(metric.get("label") or metric_id)
    maximize = metric.get("maximize", True) is not False
    facts: list[tuple[str, Any]] = [
        ("Id", code(metric_id)),
        ("Component", code(metric.get("component")) if metric.get("component") else ""),
        ("Direction", "↑ higher is better" if maximize else "↓ lower is better"),
        ("Range", f"[{_bound(metric.get('min'), '−∞')}, {_bound(metric.get('max'), '∞')}]"
         if metric.get("min") is not None or metric.get("max") is not None else ""),
    ]
    if metric.get("config"):
        facts.append(("Config", code(metric.get("config"))))
    # The schema records parameters and engines for methods only; show them when present.
    return _page(
        results, metric, "Metric", title, facts,
        scores=_metric_scores(results, paths, metric_id),
        no_scores="No method was scored on this metric.",
        parameters=_parameters(metric.get("parameters")) if "parameters" in metric else HIDDEN,
        engines=_engines(metric.get("engines")) if "engines" in metric else HIDDEN,
        resources=_jobs(results, results.metric_resources(metric_id)),
        llm_usage=None,
        failures=_failures(results, results.component_failures(metric_id, metric=True)),
    )


# -- sections ---------------------------------------------------------------------------------


def _page(results: TaskResults, entry: dict[str, Any], eyebrow: str, title: str, facts: list[tuple[str, Any]],
          **sections: Any) -> Markup:
    summary = entry.get("summary")
    return render(
        "component/page.html",
        title=f"{title} · {results.label}",
        root=ROOT,
        crumbs=[("All tasks", f"{ROOT}index.html"), (results.label, "../index.html"), (title, None)],
        description=plain_text(summary),
        eyebrow=eyebrow,
        label=title,
        lead=Markup(render_inline(summary)),
        facts=facts,
        about={"description": Markup(render_markdown(entry.get("description"))),
               "references": entry.get("references"), "links": entry.get("links")},
        **sections,
    )


def _parameters(params: Any) -> Table | None:
    if not isinstance(params, dict) or not params:
        return None
    rows = [[code(k), code(format_parameter(v))] for k, v in params.items()]
    return table("Parameters the component ran with", ["Parameter", "Value"], rows,
                 table_id="table-parameters", sortable=False, css_class="compact")


def _engines(engines: Any) -> list[EngineView] | None:
    if not isinstance(engines, list) or not engines:
        return None
    views = []
    for engine in engines:
        if not isinstance(engine, dict):
            views.append(EngineView(plain=format_parameter(engine)))
            continue
        extras = tuple((str(key), code(format_parameter(value))) for key, value in engine.items()
                       if key not in ("type", "image", "setup") and value not in (None, "", [], {}))
        views.append(EngineView(kind=str(engine.get("type") or "engine"), image=str(engine.get("image") or ""),
                                setup=_setup(engine.get("setup")), extras=extras))
    return views


def _setup(setup: Any) -> tuple[SetupStep, ...]:
    if not setup:
        return ()
    steps = []
    for step in setup if isinstance(setup, list) else [setup]:
        if isinstance(step, dict):
            fields = tuple(
                (str(key), ", ".join(format_parameter(v) for v in value) if isinstance(value, list)
                 else format_parameter(value))
                for key, value in step.items() if key != "type")
            steps.append(SetupStep(kind=str(step["type"]) if step.get("type") else None, fields=fields))
        else:
            steps.append(SetupStep(plain=format_parameter(step)))
    return tuple(steps)


def _failures(results: TaskResults, failures: list[dict[str, Any]]) -> list[FailureView]:
    return [
        FailureView(
            job_id=str(f.get("job_id")),
            dataset=results.dataset_label(f.get("dataset_id")),
            label=failure_label(f.get("exit_code"), f.get("reason")),
            reason=str(f.get("reason")) if f.get("reason") and f.get("exit_code") in (137, 143) else "",
        )
        for f in failures
    ]


def _jobs(results: TaskResults, jobs: list[dict[str, Any]]) -> Table | None:
    return job_table(results, jobs, f"Resource use ({len(jobs)} jobs)", whose=False)


def _method_scores(results: TaskResults, paths: TaskPaths, method_id: str) -> Table | None:
    rows = [_score_row(results, d.get("dataset_id"), method_id, m.get("id"),
                       fragment("label_link")(f"../{paths.metric_page(m.get('id'))}", m.get("label") or m.get("id")))
            for d in results.datasets for m in results.metrics if results.score(d.get("dataset_id"), method_id, m.get("id"))]
    return _scores_table(rows, "metric", "Metric")


def _metric_scores(results: TaskResults, paths: TaskPaths, metric_id: str) -> Table | None:
    rows = []
    for d in results.datasets:
        for method in results.methods + results.controls:
            mid = method.get("id")
            if not results.score(d.get("dataset_id"), mid, metric_id):
                continue
            kind = method_kind(method)
            mark = (kind, badge_kind(method.get("control") or kind)) if kind != "method" else (None, "")
            link = fragment("label_link")(f"../{paths.method_page(method)}", method.get("label") or mid, *mark)
            rows.append(_score_row(results, d.get("dataset_id"), mid, metric_id, (link, str(method.get("label") or mid))))
    return _scores_table(rows, "method", "Method")


def _score_row(results: TaskResults, dataset_id: Any, method_id: Any, metric_id: Any, component: Any) -> list[Any]:
    """A score's row: its dataset, the other component (linked), the raw and scaled values, the test against the best."""
    score = results.score(dataset_id, method_id, metric_id) or {}
    return [
        label(results.dataset_label(dataset_id)),
        component,
        (format_ci(score.get("raw"), score.get("ci_low"), score.get("ci_high")), sort_key(score.get("raw"))),
        (format_number(score.get("scaled")), sort_key(score.get("scaled"))),
        _versus_best(results, dataset_id, metric_id, method_id),
    ]


def _scores_table(rows: list[list[Any]], per: str, column: str) -> Table | None:
    if not rows:
        return None
    return table(f"Raw value with 95% CI and scaled score per dataset and {per}",
                 ["Dataset", column, "Raw [95% CI]", "Scaled", "Compared with the best method"],
                 rows, table_id="table-scores", numeric=[False, False, True, True, False])


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


def _bound(value: Any, unbounded: str) -> str:
    # Bounds as written in the config (0, 1, -1), not as scores with three decimals.
    return unbounded if value is None else format_parameter(value)

