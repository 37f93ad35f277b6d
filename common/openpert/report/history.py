"""A task page's sections from the run archive: what changed since the previous record, and each method's history.

"What changed" is ``openpert compare`` of the previous archived run of the task against the run the
page shows (:func:`openpert.results.compare.compare_task`); "History" is each ranked method's overall
score over the archived runs and this one, as a table with an inline line chart per method.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from itertools import groupby
from typing import Any

from markupsafe import Markup

from openpert.report.formatting import MISSING, format_number, format_p_value
from openpert.report.fragments import paragraphs, table
from openpert.report.task_results import TaskResults, is_ranked
from openpert.report.templating import render
from openpert.results.archive import ArchiveRecord, RunTask
from openpert.results.compare import compare_task, interesting_scores, signed, verdict
from openpert.results.item_scores import ITEM_SCORES

#: Most archived runs the History table shows (the newest).
HISTORY_RUNS = 12
#: Most score rows the What changed section lists (changes beyond noise first).
MAX_SCORE_ROWS = 100
#: An archive section: (id, title, HTML, intro HTML).
Section = tuple[str, str, Markup, Markup]


def _time(value: Any) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def _is_this_run(task: RunTask, results: TaskResults) -> bool:
    provenance, other = results.provenance or {}, task.results.get("provenance") or {}
    return task.results.get("created") == results.data.get("created") and other.get("commit") == provenance.get("commit")


def task_history(records: Sequence[ArchiveRecord], results: TaskResults) -> tuple[list[tuple[str, RunTask]], bool]:
    """The archived runs of a task up to the shown one, oldest first, and whether the shown run is archived.

    A record holding the shown run itself (same ``created`` time and commit) counts as it; records made
    after the shown run are left out, so an old run's page compares with what came before it.
    """
    shown = _time(results.data.get("created"))
    runs, archived = [], False
    for record in records:
        task = record.tasks.get(results.name)
        if task is None:
            continue
        if _is_this_run(task, results):
            archived = True
            continue
        when = _time(task.results.get("created"))
        if shown is None or when is None or when < shown:
            runs.append((record.id, task))
    return runs, archived


def archive_sections(records: Sequence[ArchiveRecord], results: TaskResults) -> list[Section]:
    """The "What changed" and "History" sections of a task page.

    Parameters
    ----------
    records
        The archive's records, oldest first (:func:`openpert.results.archive.list_records`).
    results
        The task's results the page shows.

    Returns
    -------
    list
        ``(id, title, html, intro)`` per section; "What changed" says so when no earlier record holds the task.
    """
    earlier, _ = task_history(records, results)
    items = results.source / ITEM_SCORES
    current = RunTask(results.name, results.data, results.source / "results.json", items if items.is_file() else None)
    if earlier:
        record_id, previous = earlier[-1]
        changed = _what_changed(compare_task(previous, current), record_id, results)
    else:
        changed = paragraphs("No earlier run of this task is archived: nothing to compare with yet.")
    intro = paragraphs("This run against the previous archived run of the task: methods that entered or left, how "
                       "ranks and overall scores moved, and whether each score moved beyond noise (a paired "
                       "sign-flip permutation test over the items both runs scored, p < 0.05).")
    sections: list[Section] = [("what-changed", "What changed", changed, intro)]
    sections.append(("history", "History", _history([*earlier, ("this run", current)], results),
                     paragraphs("Each method's overall score in the archived runs of the task and this one.")))
    return sections


def _what_changed(comparison: dict[str, Any], record_id: str, results: TaskResults) -> Markup:
    facts = []
    for title, key in (("Methods added", "methods_added"), ("Methods removed", "methods_removed"),
                       ("Datasets added", "datasets_added"), ("Datasets removed", "datasets_removed"),
                       ("Metrics added", "metrics_added"), ("Metrics removed", "metrics_removed")):
        if comparison[key]:
            facts.append(f"{title}: {', '.join(comparison[key])}.")
    if comparison["methods_displaced"]:
        facts.append(f"Methods displaced (same code, rank moved): {', '.join(comparison['methods_displaced'])}.")
    if comparison["components"]["changed"]:
        facts.append(f"Components whose code changed: {', '.join(comparison['components']['changed'])}.")
    elif not comparison["components"]["recorded"]:
        facts.append("Component digests were not recorded in both runs.")
    ranked = [m for m in comparison["methods"] if m["old_rank"] is not None or m["new_rank"] is not None]
    rows = []
    for m in ranked:
        rows.append([results.method_label(m["method_id"]) if m["status"] != "removed" else m["label"],
                     _status(m), (_rank_cell(m), m["new_rank"] if m["new_rank"] is not None else 1e9),
                     (format_number(m["old_score"]), m["old_score"] if m["old_score"] is not None else -1e9),
                     (format_number(m["new_score"]), m["new_score"] if m["new_score"] is not None else -1e9),
                     (signed(m["difference"], MISSING), m["difference"] if m["difference"] is not None else 0),
                     format_p_value(m["p_value"]), verdict(m)])
    ranks = table("Ranks and overall scores, before and after", ["Method", "Status", "Rank", "Before", "After",
                  "Change", "p (over datasets)", "Verdict"], rows, table_id="what-changed-ranks",
                  numeric=[False, False, False, True, True, True, True, False]) if rows else None
    scores = sorted(interesting_scores(comparison), key=lambda r: (not r["beyond_noise"], r["dataset_id"], r["method_id"], r["metric_id"]))
    score_table = None
    if scores:
        shown = scores[:MAX_SCORE_ROWS]
        rows = [[results.dataset_label(r["dataset_id"]), r["method_id"], r["metric_id"],
                 format_number(r["old_raw"]), format_number(r["new_raw"]), signed(r["difference"], MISSING),
                 format_p_value(r["p_value"]), f"{r['n_paired']} {r['test']}" if r["test"] else MISSING, verdict(r)]
                for r in shown]
        caption = "Score changes per dataset and metric" + (
            f" (the first {len(shown)} of {len(scores)})" if len(scores) > len(shown) else "")
        score_table = table(caption, ["Dataset", "Method", "Metric", "Before", "After", "Change", "p", "Paired over",
                                      "Verdict"], rows, table_id="what-changed-scores",
                            numeric=[False, False, False, True, True, True, True, False, False])
    return render("sections/what_changed.html", record_id=record_id, facts=facts, ranks=ranks, scores=score_table)


def _rank_cell(m: dict[str, Any]) -> str:
    old = MISSING if m["old_rank"] is None else str(m["old_rank"])
    new = MISSING if m["new_rank"] is None else str(m["new_rank"])
    move = m["rank_move"]
    return f"{old} → {new}" + (f" (up {move})" if move and move > 0 else f" (down {-move})" if move else "")


def _status(m: dict[str, Any]) -> str:
    status = {"added": "new", "removed": "removed", "kept": ""}[m["status"]]
    code = "code changed" if m["digest_changed"] else ""
    moved = "displaced" if m.get("displaced") else ""
    return ", ".join(p for p in (status, code, moved) if p) or "same code"


def _history(runs: list[tuple[str, RunTask]], results: TaskResults) -> Markup:
    runs = runs[-HISTORY_RUNS:]
    methods = [m for m in results.methods if is_ranked(m)]
    overall = [{str(r.get("method_id")): r.get("score") for r in task.results.get("overall") or []} for _, task in runs]
    rows = []
    for m in methods:
        mid = str(m.get("id"))
        values = [o.get(mid) for o in overall]
        numbers = [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None for v in values]
        rows.append([results.method_label(mid), *[format_number(v) for v in numbers],
                     _sparkline(f"history-{len(rows)}", results.method_label(mid), numbers)])
    header = ["Method", *[_run_label(rid) for rid, _ in runs], "Trend"]
    view = table("Overall score per archived run (oldest first)", header, rows, table_id="history-scores",
                 numeric=[False, *[True] * len(runs), False], sortable=False) if rows else None
    return render("sections/history.html", table=view)


def _run_label(rid: str) -> str:
    """A column title: the record's date and commit (``this run`` for the page's own run)."""
    if rid == "this run":
        return "This run"
    match = re.match(r"^(\d{4}-\d{2}-\d{2})T\d{4}Z-([0-9a-z]+)(-dirty)?", rid)
    if not match:
        return rid
    return f"{match.group(1)} {match.group(2)}" + (" (dirty)" if match.group(3) else "")


def _sparkline(fig_id: str, label: str, values: list[float | None]) -> Markup:
    """An inline line chart of scores in [0, 1], one point per run (a gap where a run has none)."""
    width, height, pad = 96.0, 24.0, 3.0
    n = len(values)
    step = (width - 2 * pad) / max(n - 1, 1)

    def point(i: int, v: float) -> tuple[str, str]:
        y = height - pad - min(max(v, 0.0), 1.0) * (height - 2 * pad)
        return f"{pad + i * step:.1f}", f"{y:.1f}"

    # One line per run of consecutive values.
    segments = [[point(i, v) for i, v in run]
                for present, run in groupby(enumerate(values), key=lambda item: item[1] is not None) if present]
    return render("figures/sparkline.svg", fig_id=fig_id, label=label, width=f"{width:.0f}", height=f"{height:.0f}",
                  segments=segments, values=[format_number(v) for v in values])
