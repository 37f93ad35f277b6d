"""Scores of two runs side by side: a speed change must leave every benchmark number as it was.

    python benchmarks/compare_results.py BEFORE AFTER [--exclude TASK ...] [--tolerance 0]

``BEFORE`` and ``AFTER`` are results folders of ``openpert benchmark`` (one ``<task>/results.json``
each, e.g. ``results/`` of ``scripts/run_benchmark.sh`` on the code before and after a change).
Every score row (dataset, method, metric) of a task the two runs share is matched, and its raw
value compared: equal (bit for bit, or within ``--tolerance``), changed, or present in one run
only. Rows of failed jobs are absent from ``scores`` and so count as present in one run only.
Prints one line per task and the largest changes, and writes the totals to
``benchmarks/results/compare_results.json``, where ``summary.py`` sets the number of changed
rows against its target of 0. A task whose numbers change on purpose (a changed dataset) can be
left out with ``--exclude``; the figures name what was left out.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from figures import write_figures


def score_rows(results_dir: Path, task: str) -> dict[tuple[str, str, str], float]:
    """``(dataset, method, metric) -> raw`` of a task's ``results.json`` (NaN kept as NaN)."""
    path = results_dir / task / "results.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise SystemExit(f"{path}: not a readable results file ({err})") from None
    rows = {}
    for row in data.get("scores", []):
        raw = row.get("raw")
        rows[row["dataset_id"], row["method_id"], row["metric_id"]] = math.nan if raw is None else float(raw)
    return rows


def same(a: float, b: float, tolerance: float) -> bool:
    """Equal within ``tolerance`` (absolute), NaN equal to NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b if tolerance == 0 else abs(a - b) <= tolerance


def compare(before: Path, after: Path, *, exclude: set[str], tolerance: float) -> tuple[dict, list[tuple]]:
    """Per task, counts of equal, changed and unmatched rows; and every changed row."""
    tasks = sorted({p.parent.name for p in before.glob("*/results.json")} & {p.parent.name for p in after.glob("*/results.json")})
    if not tasks:
        raise SystemExit(f"{before} and {after} share no task with a results.json")
    per_task, changed = {}, []
    for task in tasks:
        if task in exclude:
            continue
        old, new = score_rows(before, task), score_rows(after, task)
        common = old.keys() & new.keys()
        diffs = [(task, *key, old[key], new[key]) for key in sorted(common) if not same(old[key], new[key], tolerance)]
        changed += diffs
        per_task[task] = {"rows": len(common), "changed": len(diffs), "only_before": len(old.keys() - new.keys()),
                          "only_after": len(new.keys() - old.keys())}
    return per_task, changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--exclude", nargs="*", default=[], help="tasks whose numbers change on purpose")
    parser.add_argument("--tolerance", type=float, default=0.0, help="absolute difference taken as equal (default: none)")
    parser.add_argument("--json", type=Path, help="write the figures here instead of benchmarks/results/")
    args = parser.parse_args()
    per_task, changed = compare(args.before, args.after, exclude=set(args.exclude), tolerance=args.tolerance)
    print(f"{'task':26s} {'rows':>6s} {'changed':>8s} {'only before':>12s} {'only after':>11s}")
    for task, counts in per_task.items():
        print(f"{task:26s} {counts['rows']:6d} {counts['changed']:8d} {counts['only_before']:12d} {counts['only_after']:11d}")
    if changed:
        print("\nlargest changes (task dataset method metric: before -> after)")
        def size(row):
            return math.inf if math.isnan(row[4]) != math.isnan(row[5]) else abs(row[4] - row[5])
        for task, dataset, method, metric, old, new in sorted(changed, key=size, reverse=True)[:15]:
            print(f"  {task} {dataset} {method} {metric}: {old!r} -> {new!r}")
    finite = [abs(o - n) for *_, o, n in changed if not (math.isnan(o) or math.isnan(n))]
    figures = {"rows": sum(c["rows"] for c in per_task.values()), "changed_rows": len(changed),
               "unmatched_rows": sum(c["only_before"] + c["only_after"] for c in per_task.values()),
               "max_abs_change": max(finite, default=0.0)}
    dest = write_figures("compare_results", figures, args.json, before=str(args.before), after=str(args.after),
                         excluded=sorted(args.exclude), tolerance=args.tolerance, per_task=per_task)
    print(f"\n{figures['changed_rows']} of {figures['rows']} score rows changed -> {dest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
