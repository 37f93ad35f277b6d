"""Where a whole run's time went: its job-seconds per task and its longest jobs, from its traces.

    python benchmarks/longest_jobs.py RESULTS [--before BEFORE] [-n 10] [--name NAME]

``RESULTS`` (and ``BEFORE``, the same run on the code before a change) is a results folder of
``openpert benchmark`` (one ``<task>/trace.tsv`` each, the table of every job the run planned,
with its status and wall time). Prints, for each run, the jobs run and the job-seconds of each
task (cached jobs count no time), and its ``-n`` longest jobs; with ``--before``, the ratio of
job-seconds after / before. The run's wall time is ``time_run.py``'s (``all_tasks_real`` and
``all_tasks_real_before`` for the real-data run of all five tasks, ``openpert benchmark --task
all -j 2``); this says which jobs it was spent on. Writes the figures to
``benchmarks/results/<NAME>.json`` (default ``longest_jobs``).

A job that failed counts its time too, and is marked: a run that failed a job is not comparable
with one that did not, and the figures say how many failed.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path

from figures import write_figures


@dataclass(frozen=True)
class Job:
    """One job of a trace: its task, id, status and wall time (0 for a job reused from the cache)."""

    task: str
    job_id: str
    status: str
    seconds: float


def read_jobs(results_dir: Path) -> list[Job]:
    """Every job of every ``<task>/trace.tsv`` under ``results_dir``.

    Raises
    ------
    SystemExit
        Where the folder holds no trace, or a trace lacks the columns read or a number.
    """
    traces = sorted(results_dir.glob("*/trace.tsv"))
    if not traces:
        raise SystemExit(f"{results_dir}: no <task>/trace.tsv (not the results folder of a finished run)")
    jobs = []
    for trace in traces:
        with trace.open(newline="") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        missing = {"job_id", "status", "duration_s", "cached"} - set(rows[0] if rows else {})
        if missing:
            raise SystemExit(f"{trace}: no column {sorted(missing)} (or no job at all)")
        for line, row in enumerate(rows, start=2):
            try:
                seconds = 0.0 if row["cached"] == "true" or row["duration_s"] == "" else float(row["duration_s"])
            except ValueError:
                raise SystemExit(f"{trace}, line {line}: duration_s {row['duration_s']!r} is not a number") from None
            jobs.append(Job(trace.parent.name, row["job_id"], row["status"], seconds))
    return jobs


def per_task(jobs: list[Job]) -> dict[str, dict[str, float]]:
    """Per task: jobs, failed jobs and job-seconds."""
    tasks: dict[str, dict[str, float]] = {}
    for job in jobs:
        row = tasks.setdefault(job.task, {"jobs": 0, "failed": 0, "job_seconds": 0.0})
        row["jobs"] += 1
        row["failed"] += job.status != "succeeded"
        row["job_seconds"] += job.seconds
    return tasks


def longest(jobs: list[Job], n: int) -> list[Job]:
    """The ``n`` longest jobs, longest first (ties by task and id, so the list is the same every time)."""
    return sorted(jobs, key=lambda job: (-job.seconds, job.task, job.job_id))[:n]


def _show(label: str, table: dict[str, dict[str, float]], slowest: list[Job]) -> None:
    print(f"{label}: {sum(r['jobs'] for r in table.values()):.0f} jobs, "
          f"{sum(r['job_seconds'] for r in table.values()):,.0f} job-seconds")
    for task, row in table.items():
        failed = f", {row['failed']:.0f} failed" if row["failed"] else ""
        print(f"  {task:<26} {row['jobs']:>5.0f} jobs{failed:<12} {row['job_seconds']:>9,.0f} s")
    print(f"  the {len(slowest)} longest:")
    for job in slowest:
        mark = "" if job.status == "succeeded" else f"  ({job.status})"
        print(f"    {job.seconds:>8.1f} s  {job.task}/{job.job_id}{mark}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the run's results folder")
    parser.add_argument("--before", type=Path, help="the same run on the code before a change")
    parser.add_argument("-n", type=int, default=10, help="how many of the longest jobs to show (default 10)")
    parser.add_argument("--name", default="longest_jobs", help="the figures' file name (default longest_jobs)")
    args = parser.parse_args(argv)
    runs = {"run": args.results} if args.before is None else {"before": args.before, "after": args.results}
    figures: dict[str, float] = {}
    details: dict[str, object] = {}
    for label, folder in runs.items():
        jobs = read_jobs(folder)
        table, slowest = per_task(jobs), longest(jobs, args.n)
        _show(f"{label} ({folder})", table, slowest)
        for figure in ("jobs", "failed", "job_seconds"):
            figures[f"{label}_{figure}"] = sum(row[figure] for row in table.values())
        details[f"{label}_per_task"] = table
        details[f"{label}_longest"] = [vars(job) for job in slowest]
    if args.before is not None:
        figures["job_seconds_ratio"] = figures["after_job_seconds"] / figures["before_job_seconds"]
        print(f"job-seconds after / before: {figures['job_seconds_ratio']:.2f}")
    dest = write_figures(args.name, figures, results=str(args.results),
                         before=None if args.before is None else str(args.before), **details)
    print(f"-> {dest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
