"""Comparing two runs: what entered and left, how ranks and scores moved, and whether each move is beyond noise.

A score change of one (dataset, method, metric) is tested with the paired sign-flip permutation test
the leaderboards use (:func:`openpert.results.resampling.paired_permutation_test`): over the items both
runs scored, pairing each item's value in the new run with its value in the old one (the runs'
``item_scores.csv.gz``); without per-item values, over the seeds both ran, seed by seed. A method's
overall score change is tested the same way over the datasets both runs scored. A change is beyond
noise when the test's p-value is under ``alpha`` (0.05, as in ``comparisons``); an untested change
(no items or seeds to pair) says so instead of guessing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from openpert.results.archive import RunTask
from openpert.results.item_scores import read_item_scores
from openpert.results.resampling import paired_permutation_test

SCHEMA_VERSION = 1
ALPHA = 0.05
N_PERMUTATIONS = 10000
#: Method selections of :func:`compare_runs`.
FOCUS = ("all", "changed")


def compare_runs(old: dict[str, RunTask], new: dict[str, RunTask], *, old_label: str = "old", new_label: str = "new",
                 focus: str = "all", alpha: float = ALPHA, n_permutations: int = N_PERMUTATIONS) -> dict[str, Any]:
    """Compare two runs task by task.

    Parameters
    ----------
    old, new
        Task name -> results of each run (:func:`openpert.results.archive.read_run`).
    old_label, new_label
        How the runs are named in the output (a path or a record id).
    focus
        ``"all"`` methods, or only those ``"changed"``: added, removed or whose component digest changed
        (what a pull request touches), with the methods they displaced (same code, rank moved).
    alpha
        A change with a p-value under it is beyond noise.
    n_permutations
        Random sign vectors per test.

    Returns
    -------
    dict
        ``schema_version``, ``old``, ``new``, ``alpha``, ``n_permutations``, ``focus``, ``tasks_added``,
        ``tasks_removed`` and ``tasks`` (one :func:`compare_task` entry per task both runs hold).
    """
    if focus not in FOCUS:
        raise ValueError(f"focus must be one of {', '.join(FOCUS)}, got {focus!r}")
    return {
        "schema_version": SCHEMA_VERSION, "old": old_label, "new": new_label, "alpha": alpha,
        "n_permutations": n_permutations, "focus": focus,
        "tasks_added": sorted(set(new) - set(old)), "tasks_removed": sorted(set(old) - set(new)),
        "tasks": [compare_task(old[name], new[name], focus=focus, alpha=alpha, n_permutations=n_permutations)
                  for name in sorted(set(old) & set(new))],
    }


def compare_task(old: RunTask, new: RunTask, *, focus: str = "all", alpha: float = ALPHA,
                 n_permutations: int = N_PERMUTATIONS) -> dict[str, Any]:
    """Compare one task's results in two runs (see :func:`compare_runs`).

    Returns
    -------
    dict
        ``task``, ``label``, ``old``/``new`` (commit and time), ``methods_added``/``_removed``,
        ``datasets_added``/``_removed``, ``metrics_added``/``_removed``, ``methods_displaced`` (methods
        whose code is the same and whose rank moved: moved by the changes), ``components`` (digests
        ``changed``/``added``/``removed``, ``recorded``), ``datasets_changed`` (dataset digests),
        ``methods`` (one row per method: status, ranks, overall scores and their test) and ``scores``
        (one row per dataset, method and metric of a method shown: values and their test).
    """
    o, n = old.results, new.results
    old_methods, new_methods = _by_id(o.get("methods"), "id"), _by_id(n.get("methods"), "id")
    old_digests = (o.get("provenance") or {}).get("component_digests") or {}
    new_digests = (n.get("provenance") or {}).get("component_digests") or {}
    components = _digest_changes(old_digests, new_digests)
    components["recorded"] = bool(old_digests) and bool(new_digests)
    datasets_changed = _digest_changes((o.get("provenance") or {}).get("dataset_digests") or {},
                                       (n.get("provenance") or {}).get("dataset_digests") or {})["changed"]
    changed = set(components["changed"]) | (set(new_methods) ^ set(old_methods))
    displaced = set(_displaced(o, n, changed))
    shown = [m for m in [*new_methods, *[m for m in old_methods if m not in new_methods]]
             if focus == "all" or m in changed or m in displaced]
    maximize = {m["id"]: bool(m.get("maximize", True)) for m in [*(o.get("metrics") or []), *(n.get("metrics") or [])]}
    items = _ItemSource(old, new)
    return {
        "task": new.name,
        "label": str((n.get("task") or {}).get("label") or new.name),
        "old": _run_facts(o), "new": _run_facts(n),
        "methods_added": sorted(set(new_methods) - set(old_methods)),
        "methods_removed": sorted(set(old_methods) - set(new_methods)),
        "datasets_added": _added(o.get("datasets"), n.get("datasets"), "dataset_id"),
        "datasets_removed": _added(n.get("datasets"), o.get("datasets"), "dataset_id"),
        "metrics_added": _added(o.get("metrics"), n.get("metrics"), "id"),
        "metrics_removed": _added(n.get("metrics"), o.get("metrics"), "id"),
        "methods_displaced": sorted(displaced),
        "components": components,
        "datasets_changed": datasets_changed,
        "methods": [{**_method_row(mid, old_methods, new_methods, o, n, components, alpha, n_permutations),
                     "displaced": mid in displaced} for mid in shown],
        "scores": _score_rows(o, n, set(shown), maximize, items, alpha, n_permutations),
    }


def _displaced(o: dict[str, Any], n: dict[str, Any], changed: set[str]) -> list[str]:
    """Methods in both runs, their code unchanged, whose overall rank moved: the changed methods moved them."""
    old_ranks = {k: _number(r.get("rank")) for k, r in _by_id(o.get("overall"), "method_id").items()}
    new_ranks = {k: _number(r.get("rank")) for k, r in _by_id(n.get("overall"), "method_id").items()}
    return [m for m in (set(old_ranks) & set(new_ranks)) - changed
            if old_ranks[m] is not None and new_ranks[m] is not None and old_ranks[m] != new_ranks[m]]


def _by_id(rows: Any, key: str) -> dict[str, dict[str, Any]]:
    return {str(r[key]): r for r in rows or [] if isinstance(r, dict) and r.get(key) is not None}


def _added(old_rows: Any, new_rows: Any, key: str) -> list[str]:
    return sorted(set(_by_id(new_rows, key)) - set(_by_id(old_rows, key)))


def _digest_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return {"changed": sorted(k for k in set(old) & set(new) if old[k] != new[k]),
            "added": sorted(set(new) - set(old)), "removed": sorted(set(old) - set(new))}


def _run_facts(results: dict[str, Any]) -> dict[str, Any]:
    provenance = results.get("provenance") or {}
    return {"created": results.get("created"), "commit": provenance.get("commit"), "dirty": provenance.get("dirty")}


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _test(new_values: np.ndarray, old_values: np.ndarray, alpha: float, n_permutations: int) -> tuple[float | None, bool | None]:
    """p-value of the paired test and whether it is under ``alpha`` (``None`` under two pairs)."""
    if new_values.size < 2:
        return None, None
    result = paired_permutation_test(new_values, old_values, n_permutations=n_permutations, seed=0)
    if not math.isfinite(result.p_value):
        return None, None
    return float(result.p_value), bool(result.p_value < alpha)


def _method_row(mid: str, old_methods: dict, new_methods: dict, o: dict, n: dict, components: dict,
                alpha: float, n_permutations: int) -> dict[str, Any]:
    meta = new_methods.get(mid) or old_methods[mid]
    status = "added" if mid not in old_methods else "removed" if mid not in new_methods else "kept"
    old_overall, new_overall = _by_id(o.get("overall"), "method_id").get(mid, {}), _by_id(n.get("overall"), "method_id").get(mid, {})
    old_rank, new_rank = _number(old_overall.get("rank")), _number(new_overall.get("rank"))
    old_score, new_score = _number(old_overall.get("score")), _number(new_overall.get("score"))
    row = {"method_id": mid, "label": str(meta.get("label") or mid), "type": meta.get("type"),
           "control": meta.get("control"), "status": status,
           "digest_changed": mid in components["changed"],
           "old_rank": None if old_rank is None else int(old_rank), "new_rank": None if new_rank is None else int(new_rank),
           "rank_move": None if old_rank is None or new_rank is None else int(old_rank - new_rank),
           "old_score": old_score, "new_score": new_score,
           "difference": None if old_score is None or new_score is None else new_score - old_score,
           "better": None, "p_value": None, "n_datasets": 0, "beyond_noise": None}
    if row["difference"]:
        row["better"] = row["difference"] > 0
    if status != "kept":
        return row
    old_ds = {r["dataset_id"]: _number(r.get("score")) for r in o.get("dataset_scores") or [] if r.get("method_id") == mid}
    new_ds = {r["dataset_id"]: _number(r.get("score")) for r in n.get("dataset_scores") or [] if r.get("method_id") == mid}
    shared = sorted(d for d in set(old_ds) & set(new_ds) if old_ds[d] is not None and new_ds[d] is not None)
    row["n_datasets"] = len(shared)
    if shared and all(old_ds[d] == new_ds[d] for d in shared):
        row["beyond_noise"] = False
    else:
        row["p_value"], row["beyond_noise"] = _test(np.array([new_ds[d] for d in shared]),
                                                    np.array([old_ds[d] for d in shared]), alpha, n_permutations)
    return row


class _ItemSource:
    """Per-item values of the two runs, read only when a changed score needs them."""

    def __init__(self, old: RunTask, new: RunTask) -> None:
        self._paths = (old.items_path, new.items_path)
        self._tables: tuple[dict, dict] | None = None

    def pair(self, key: tuple[str, str, str]) -> tuple[np.ndarray, np.ndarray] | None:
        if None in self._paths:
            return None
        if self._tables is None:
            self._tables = (read_item_scores(self._paths[0]), read_item_scores(self._paths[1]))
        old, new = self._tables[0].get(key), self._tables[1].get(key)
        if old is None or new is None:
            return None
        joined = pd.concat([old.rename("old"), new.rename("new")], axis=1, join="inner")
        return joined["old"].to_numpy(dtype=float), joined["new"].to_numpy(dtype=float)


def _score_rows(o: dict, n: dict, shown: set[str], maximize: dict[str, bool], items: _ItemSource,
                alpha: float, n_permutations: int) -> list[dict[str, Any]]:
    def keyed(rows: Iterable[dict]) -> dict[tuple[str, str, str], dict]:
        return {(str(r["dataset_id"]), str(r["method_id"]), str(r["metric_id"])): r for r in rows or []
                if isinstance(r, dict) and str(r.get("method_id")) in shown}

    old_scores, new_scores = keyed(o.get("scores")), keyed(n.get("scores"))
    out = []
    for key in sorted(set(old_scores) | set(new_scores)):
        old_row, new_row = old_scores.get(key, {}), new_scores.get(key, {})
        old_raw, new_raw = _number(old_row.get("raw")), _number(new_row.get("raw"))
        row = {"dataset_id": key[0], "method_id": key[1], "metric_id": key[2],
               "headline": bool((new_row or old_row).get("headline", True)),
               "status": "added" if not old_row else "removed" if not new_row else "changed",
               "old_raw": old_raw, "new_raw": new_raw,
               "old_scaled": _number(old_row.get("scaled")), "new_scaled": _number(new_row.get("scaled")),
               "difference": None, "better": None, "p_value": None, "n_paired": 0, "test": None,
               "beyond_noise": None, "note": ""}
        if old_row and new_row:
            if old_raw is None and new_raw is None:
                row.update(status="unchanged", beyond_noise=False, note="no value in either run")
            elif old_raw is None or new_raw is None:
                row["note"] = f"no value in the {'old' if old_raw is None else 'new'} run"
            elif old_raw == new_raw:
                row.update(status="unchanged", difference=0.0, beyond_noise=False)
            else:
                row["difference"] = new_raw - old_raw
                row["better"] = (new_raw > old_raw) == maximize.get(key[2], True)
                _test_score(row, key, old_row, new_row, items, alpha, n_permutations)
        out.append(row)
    return out


def _test_score(row: dict, key: tuple[str, str, str], old_row: dict, new_row: dict, items: _ItemSource,
                alpha: float, n_permutations: int) -> None:
    """Fill a changed score's test: over shared items, else over seeds, else say why there is none."""
    pair = items.pair(key)
    if pair is not None and pair[0].size >= 2:
        row["test"], row["n_paired"] = "items", int(pair[0].size)
        row["p_value"], row["beyond_noise"] = _test(pair[1], pair[0], alpha, n_permutations)
        return
    old_seeds = [_number(v) for v in old_row.get("raw_seeds") or []]
    new_seeds = [_number(v) for v in new_row.get("raw_seeds") or []]
    if len(old_seeds) >= 2 and len(old_seeds) == len(new_seeds) and None not in old_seeds + new_seeds:
        row["test"], row["n_paired"] = "seeds", len(old_seeds)
        row["p_value"], row["beyond_noise"] = _test(np.array(new_seeds), np.array(old_seeds), alpha, n_permutations)
        return
    row["note"] = "not tested: no per-item values or seeds shared by both runs"


# --- formats --------------------------------------------------------------------------------------------

def _fmt(value: Any, digits: int = 3) -> str:
    value = _number(value)
    return "—" if value is None else f"{value:.{digits}f}"


def signed(value: Any, missing: str = "—") -> str:
    """A change with its sign and three decimals; ``missing`` for none."""
    value = _number(value)
    return missing if value is None else f"{value:+.3f}"


def _p(value: Any) -> str:
    value = _number(value)
    return "—" if value is None else ("<0.001" if value < 0.001 else f"{value:.3f}")


def _rank(row: dict[str, Any]) -> str:
    old, new, move = row["old_rank"], row["new_rank"], row["rank_move"]
    if old is None and new is None:
        return "—"
    text = f"{'—' if old is None else old} → {'—' if new is None else new}"
    if move:
        text += f" ({'up' if move > 0 else 'down'} {abs(move)})"
    return text


def verdict(row: dict[str, Any]) -> str:
    """What a method or score row's change amounts to, in words (``added``, ``within noise``, ...)."""
    if row.get("status") in ("added", "removed"):
        return row["status"]
    if row.get("status") == "unchanged" or row.get("difference") == 0:
        return "unchanged"
    if row.get("beyond_noise") is None:
        return "not tested"
    if not row["beyond_noise"]:
        return "within noise"
    if row.get("better") is None:
        return "beyond noise"
    return "better, beyond noise" if row["better"] else "worse, beyond noise"


def _method_status(row: dict[str, Any]) -> str:
    parts = [row["status"]] if row["status"] != "kept" else []
    if row["digest_changed"]:
        parts.append("code changed")
    if row.get("displaced"):
        parts.append("displaced")
    return ", ".join(parts) or "same code"


def _lists(task: dict[str, Any]) -> list[tuple[str, list[str]]]:
    return [(title, task[key]) for title, key in [
        ("Methods added", "methods_added"), ("Methods removed", "methods_removed"),
        ("Datasets added", "datasets_added"), ("Datasets removed", "datasets_removed"),
        ("Metrics added", "metrics_added"), ("Metrics removed", "metrics_removed"),
        ("Methods displaced (same code, rank moved)", "methods_displaced")]] + [
        ("Components whose code changed", task["components"]["changed"]),
        ("Datasets whose files changed", task["datasets_changed"])]


def interesting_scores(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The score rows worth listing: every row of an added/removed method or a changed component, and changed rows."""
    touched = {m["method_id"] for m in task["methods"] if m["status"] != "kept" or m["digest_changed"]}
    return [r for r in task["scores"] if r["status"] != "unchanged" or r["method_id"] in touched]


def format_text(comparison: dict[str, Any]) -> str:
    """The comparison for a terminal."""
    lines = [f"{comparison['old']} -> {comparison['new']}"]
    for title, key in (("Tasks added", "tasks_added"), ("Tasks removed", "tasks_removed")):
        if comparison[key]:
            lines.append(f"{title}: {', '.join(comparison[key])}")
    for task in comparison["tasks"]:
        lines += ["", f"== {task['task']} =="]
        for title, values in _lists(task):
            if values:
                lines.append(f"{title}: {', '.join(values)}")
        if not task["components"]["recorded"]:
            lines.append("Component digests: not recorded in both runs")
        # Columns widen to their longest entry: a name cut short could read as another one.
        name_w = max([24, *(len(m["method_id"]) for m in task["methods"])])
        status_w = max([18, *(len(_method_status(m)) for m in task["methods"])])
        lines += ["", f"{'method':{name_w}s} {'status':{status_w}s} {'rank':16s} {'overall':>7s} {'->':>7s} {'change':>7s} "
                      f"{'p':>7s}  verdict"]
        for m in task["methods"]:
            lines.append(f"{m['method_id']:{name_w}s} {_method_status(m):{status_w}s} {_rank(m):16s} {_fmt(m['old_score']):>7s} "
                         f"{_fmt(m['new_score']):>7s} {signed(m['difference']):>7s} {_p(m['p_value']):>7s}  {verdict(m)}")
        rows = interesting_scores(task)
        unchanged = sum(r["status"] == "unchanged" for r in task["scores"])
        lines += ["", f"Scores ({len(rows)} listed, {unchanged} unchanged):"]
        where_w = max([56, *(len(f"{r['dataset_id']}/{r['method_id']}/{r['metric_id']}") for r in rows)])
        for r in rows:
            where = f"{r['dataset_id']}/{r['method_id']}/{r['metric_id']}"
            test = f" [{r['test']}, n={r['n_paired']}]" if r["test"] else ""
            lines.append(f"  {where:{where_w}s} {_fmt(r['old_raw'], 4):>8s} -> {_fmt(r['new_raw'], 4):>8s} "
                         f"{signed(r['difference']):>7s} p={_p(r['p_value'])}{test}  {verdict(r)}")
    return "\n".join(lines) + "\n"


def _md(text: Any) -> str:
    """Table-cell text: pipes and line breaks would break the table, markup is shown as text."""
    return (str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", " "))


def format_markdown(comparison: dict[str, Any]) -> str:
    """The comparison as GitHub-flavoured Markdown (a job summary)."""
    lines = [f"## What changed: `{_md(comparison['old'])}` → `{_md(comparison['new'])}`", ""]
    if comparison["focus"] == "changed":
        lines += ["Methods added, removed or whose code changed, and the methods whose rank they moved (displaced), "
                  "with their scores on both sides.", ""]
    for title, key in (("Tasks added", "tasks_added"), ("Tasks removed", "tasks_removed")):
        if comparison[key]:
            lines.append(f"- {title}: {', '.join(f'`{_md(t)}`' for t in comparison[key])}")
    alpha = comparison["alpha"]
    for task in comparison["tasks"]:
        lines += ["", f"### {_md(task['label'])} (`{_md(task['task'])}`)", ""]
        facts = [f"- {title}: {', '.join(f'`{_md(v)}`' for v in values)}" for title, values in _lists(task) if values]
        lines += facts or ["- No method, dataset, metric or component added, removed or changed."]
        if not task["methods"]:
            lines += ["", "No method to show."]
            continue
        lines += ["", "| Method | Status | Rank | Overall before | Overall after | Change | p | Verdict |",
                  "|---|---|---|--:|--:|--:|--:|---|"]
        for m in task["methods"]:
            lines.append(f"| {_md(m['label'])} | {_method_status(m)} | {_rank(m)} | {_fmt(m['old_score'])} | "
                         f"{_fmt(m['new_score'])} | {signed(m['difference'])} | {_p(m['p_value'])} | {verdict(m)} |")
        rows = interesting_scores(task)
        if rows:
            lines += ["", "<details><summary>Scores per dataset and metric "
                      f"({len(rows)} rows; paired permutation test, beyond noise at p &lt; {alpha})</summary>", "",
                      "| Dataset | Method | Metric | Before | After | Change | p | Paired over | Verdict |",
                      "|---|---|---|--:|--:|--:|--:|---|---|"]
            for r in rows:
                paired = f"{r['n_paired']} {r['test']}" if r["test"] else "—"
                lines.append(f"| {_md(r['dataset_id'])} | {_md(r['method_id'])} | {_md(r['metric_id'])} | "
                             f"{_fmt(r['old_raw'], 4)} | {_fmt(r['new_raw'], 4)} | {signed(r['difference'])} | "
                             f"{_p(r['p_value'])} | {paired} | {verdict(r)} |")
            lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
