"""A task page's Reproduction section: the papers' published numbers beside the benchmark's own.

Reads ``results.json``'s ``reproduction`` (``openpert.results.reproduction`` writes it; the format
is in ``docs/results_json.md``). Each source's facts are first gathered into a view model
(:class:`SourceView`), its rows made into tables, then rendered by ``templates/sections/reproduction.html``:
what reproduces and what does not is told by a badge per row and a count per status above the tables.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from openpert.report.formatting import MISSING, format_ci, format_count, format_number
from openpert.report.fragments import badge, fragment, table
from openpert.report.markdown import render_inline
from openpert.report.task_results import TaskResults
from openpert.report.templating import render
from openpert.report.views import Table

#: Status -> (badge text, badge kind, how the summary line counts it).
STATUS_BADGES = {
    "reproduced": ("reproduced", "ok", "reproduced"),
    "differs": ("differs", "failed", "differ"),
    "not_run": ("not run here", "", "not run here"),
    "reported": ("reported", "warn", "reported only"),
}
#: File name of the section's table in a task's site folder.
REPRODUCTION_CSV = "reproduction.csv"
_CSV_FIELDS = ("source_id", "published_dataset", "dataset_id", "published_method", "method_id", "published_metric",
               "metric_id", "published", "spread", "tolerance", "measured", "ci_low", "ci_high", "difference",
               "within_spread", "within_ci", "status", "reason", "note", "method_differences")


@dataclass(frozen=True)
class SourceView:
    """One source's heading facts, and the metric of all its rows ("" when they have several)."""

    label: str
    citation: str
    doi: str
    where: str
    spread: str
    file: str
    problem: str
    metric: str


def _published(row: dict[str, Any]) -> str:
    value = row.get("published")
    if value is None:
        return MISSING
    text = _plain(value)
    if row.get("spread") is not None:
        text += f" ± {_plain(row['spread'])}"
    if row.get("n_published"):
        text += f" (n = {format_count(row['n_published'])})"
    return text


def _plain(value: Any) -> str:
    """A published number as written: up to four decimals, without trailing zeros beyond two."""
    x = float(value)
    text = f"{x:.4f}".rstrip("0")
    whole, _, frac = text.partition(".")
    return f"{whole}.{frac.ljust(2, '0')}"


def _measured(row: dict[str, Any]) -> str:
    if row.get("measured") is None:
        return MISSING
    text = format_ci(row["measured"], row.get("ci_low"), row.get("ci_high"))
    if (row.get("n_seeds") or 0) > 1 and row.get("raw_sd") is not None:
        text += f" (sd {format_number(row['raw_sd'], 2)} over {row['n_seeds']} seeds)"
    return text


def _difference(row: dict[str, Any]) -> str:
    diff = row.get("difference")
    if diff is None:
        return MISSING
    sign = "+" if diff > 0 else "−" if diff < 0 else ""
    return f"{sign}{format_number(abs(diff), 2)}"


def _within(row: dict[str, Any]) -> str:
    within = row.get("within_spread")
    if row.get("measured") is None:
        return MISSING
    if within is None:
        tolerance = row.get("tolerance")
        text = "no spread published" + (f" (tolerance ± {format_number(tolerance, 2)})" if tolerance else "")
    else:
        text = "yes" if within else "no"
    ci = row.get("within_ci")
    if ci is not None and not within:
        text += "; inside our 95% CI" if ci else "; outside our 95% CI"
    return text


def _items(row: dict[str, Any]) -> str:
    items = row.get("items")
    if not isinstance(items, dict):
        return ""
    if not items.get("available"):
        return str(items.get("reason") or "")
    parts = [f"{format_count(items.get('n_within'))} of {format_count(items.get('n_matched'))} items agree"]
    if items.get("max_abs_difference") is not None:
        parts.append(f"largest difference {format_number(items['max_abs_difference'], 2)}")
    for key, word in (("n_missing", "of the paper's items not scored here"), ("n_extra", "scored here only")):
        if items.get(key):
            listed = ", ".join(str(i) for i in items.get(key.replace("n_", "")) or [])
            parts.append(f"{format_count(items[key])} {word} ({listed}{', ...' if items[key] > len(items.get(key.replace('n_', '')) or []) else ''})")
    return "; ".join(parts)


def _explanation(row: dict[str, Any]) -> str:
    status = row.get("status")
    if status == "differs":
        return str(row.get("note") or ("" if row.get("method_differences") else "No cause declared yet."))
    if status in ("not_run", "reported"):
        return str(row.get("reason") or "")
    return ""


def _group_table(results: TaskResults, source: SourceView, rows: list[dict[str, Any]], title: str, table_id: str,
                 with_metric: bool) -> Table | None:
    """Published values that were not compared, one row per method and reason, their values listed in order."""
    if not rows:
        return None
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((str(r.get("published_method")), str(r.get("reason") or "")), []).append(r)
    # This run's values of a method with a model of its own (``other_model``), in a column of their own if any.
    other = {key: _other_model(members, results, with_metric) for key, members in groups.items()}
    measured_here = any(other.values())
    body = []
    for (method, reason), members in groups.items():
        method_id = members[0].get("method_id")
        values = "; ".join(
            f"{r.get('published_dataset')}{' ' + str(r.get('published_metric')) if with_metric else ''}: {_published(r)}"
            for r in members)
        body.append([_named(method, results.method_label(method_id) if method_id else ""),
                     (format_count(len(members)), str(len(members))), values,
                     *([other[(method, reason)] or MISSING] if measured_here else []),
                     fragment("span")(Markup(render_inline(reason)) or MISSING, "reason")])
    return table(f"{source.label}: {title.lower()} ({len(rows)} values)",
                 ["Method", "Values", "Published", *(["This run, another model"] if measured_here else []), "Reason"],
                 body, table_id=table_id, numeric=[False, True, False, *([False] if measured_here else []), False])


def _other_model(rows: list[dict[str, Any]], results: TaskResults, with_metric: bool) -> str:
    """This run's values of a reported method, measured with another model, once per metric."""
    parts, seen = [], set()
    for r in rows:
        other = r.get("other_model")
        if not isinstance(other, dict) or r.get("metric_id") in seen:
            continue
        seen.add(r.get("metric_id"))
        values = ", ".join(f"{results.dataset_label(v.get('dataset_id'))} {format_number(v.get('measured'), 3)}"
                           for v in other.get("values") or [])
        parts.append(f"{r.get('published_metric')}: {values}" if with_metric else values)
    if not parts:
        return ""
    other = next(r["other_model"] for r in rows if isinstance(r.get("other_model"), dict))
    cap = f", completions capped at {other['max_tokens']} tokens" if other.get("max_tokens") else ""
    return f"{'; '.join(parts)} (another model: {other.get('model') or 'the first its server lists'}{cap})"


def _ours(published: Any, label: str) -> str:
    """The benchmark's label beside a published name, when it says something more."""
    return "" if not label or label.casefold() == str(published).casefold() else label


def summary_line(results: TaskResults) -> str:
    """What reproduces, in one sentence of counts (empty without rows)."""
    section = results.reproduction
    counts = section.get("counts") or {}
    parts = [f"{format_count(counts.get(s) or 0)} {STATUS_BADGES[s][2]}" for s in STATUS_BADGES if counts.get(s)]
    if not parts:
        return ""
    line = ", ".join(parts)
    unexplained = section.get("unexplained_differences") or 0
    if counts.get("differs"):
        line += (f" ({format_count(unexplained)} of the differences without a declared cause)" if unexplained
                 else " (every difference with its cause)")
    return line + "."


def reproduction_section(results: TaskResults) -> Markup:
    """The Reproduction section (``sections/reproduction.html``): per source, its facts and tables."""
    section = results.reproduction
    rows = [r for r in section.get("rows") or [] if isinstance(r, dict)]
    sources = []
    for i, source in enumerate(s for s in section.get("sources") or [] if isinstance(s, dict)):
        own = [r for r in rows if r.get("source_id") == source.get("id")]
        metrics = {str(r.get("published_metric")) for r in own}
        file = source.get("file") or {}
        view = SourceView(
            label=str(source.get("label") or source.get("id")),
            citation=str(source.get("citation") or ""), doi=str(source.get("doi") or ""),
            where=str(source.get("where") or ""), spread=str(source.get("spread") or ""),
            file=" — ".join(x for x in (file.get("path"), file.get("source")) if x) if isinstance(file, dict) else "",
            problem=str(source.get("problem") or ""), metric=next(iter(metrics)) if len(metrics) == 1 else "")
        compared = [r for r in own if r.get("status") in ("reproduced", "differs")]
        # How the benchmark's method differs from a published one, said once per method.
        differences: dict[str, tuple[str, str]] = {}
        for r in compared:
            if r.get("method_differences"):
                method = str(r.get("published_method"))
                differences.setdefault(method, (_ours(method, results.method_label(r.get("method_id"))), str(r["method_differences"])))
        anchors = {method: f"reproduction-{i}-method-{k}" for k, method in enumerate(differences)}
        groups = [_group_table(results, view, [r for r in own if r.get("status") == status], title, f"table-reproduction-{i}-{kind}",
                               with_metric=len(metrics) != 1)
                  for status, title, kind in (("not_run", "Not run here", "not-run"), ("reported", "Reported only", "reported"))]
        sources.append({"view": view, "compared": _compared_table(results, view, compared, anchors, i) if compared else None,
                        "differences": [(anchors[m], m, ours, Markup(render_inline(text))) for m, (ours, text) in differences.items()],
                        "groups": [g for g in groups if g is not None]})
    return render("sections/reproduction.html", summary=summary_line(results),
                  description=section.get("description") or "", sources=sources)


def _named(published: str, ours: str) -> Markup:
    """A published name, and under it the benchmark's."""
    return fragment("named")(published, ours)


def _compared_table(results: TaskResults, source: SourceView, compared: list[dict[str, Any]], anchors: dict[str, str],
                    index: int) -> Table:
    metric_column = not source.metric
    rows = []
    for r in compared:
        status, method, diff = str(r["status"]), str(r.get("published_method")), r.get("difference")
        text, kind, _ = STATUS_BADGES[status]
        ours = _ours(method, results.method_label(r.get("method_id")))
        anchor = anchors.get(method) if status == "differs" and r.get("method_differences") else None
        explanation = _explanation(r)
        cells = [_named(str(r.get("published_dataset")), _ours(r.get("published_dataset"), results.dataset_label(r.get("dataset_id")))),
                 _named(method, ours)]
        if metric_column:
            cells.append(_named(str(r.get("published_metric")), _ours(r.get("published_metric"), results.metric_label(r.get("metric_id")))))
        cells += [_published(r), _measured(r), (_difference(r), "" if diff is None else repr(abs(float(diff)))), _within(r),
                  (badge(text, kind), status),
                  fragment("explanation")(Markup(render_inline(explanation)) if explanation else "", anchor, ours or method, _items(r))]
        rows.append(cells)
    header = ["Dataset", "Method", *(["Metric"] if metric_column else []), "Published", "Measured [95% CI]", "Difference",
              "Within spread", "Status", "Cause of a difference"]
    numeric = [False, False, *([False] if metric_column else []), True, True, True, False, False, False]
    what = f" ({source.metric})" if source.metric else ""
    return table(f"{source.label}: published and measured{what} ({len(rows)})", header, rows,
                 table_id=f"table-reproduction-{index}", numeric=numeric)


def reproduction_csv(results: TaskResults) -> str:
    """The section's rows as CSV (the published and measured numbers at full precision)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(_CSV_FIELDS), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in results.reproduction.get("rows") or []:
        if isinstance(row, dict):
            writer.writerow({k: "" if row.get(k) is None else row.get(k) for k in _CSV_FIELDS})
    return buf.getvalue()
