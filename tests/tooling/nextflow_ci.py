"""The pull-request checks of the Nextflow engine: what a real run covers, and what its trace must show.

``.github/workflows/nextflow.yml`` runs the bundled benchmark through ``main.nf`` with real Nextflow
and calls this module between its steps (``python tests/tooling/nextflow_ci.py <command>``), so
that every decision and every assertion of the job is Python that the tests run on fixtures, not
shell that only a runner sees:

``tasks``
    The tasks to run: those the pull request touches (from ``openpert changed``) plus fixed ones.
``images``
    The images of those tasks' components and the base images they build on, in build order
    (from ``openpert images build-order --format json``), as ``image<TAB>dockerfile<TAB>context``.
``resumed``
    A second run with ``-resume`` reused every task: each task that completed in the first run is
    ``CACHED`` in the second (Nextflow never caches a failed task, so those may run again).
``rerun``
    After one component's script was edited, a run with ``-resume`` ran again exactly the jobs of
    that component and the jobs downstream of it (metrics read a method's new prediction file);
    every other task is ``CACHED``.
``scores``
    The Nextflow run scored exactly as the local engine's run of the same commit: the figures
    ``benchmarks/compare_results.py`` wrote show 0 changed rows and 0 rows present in one run only.
``failed-logs``
    Each failed task of the traces found below some folders, with the end of its ``.command.log``
    and ``.command.err``, as Markdown for ``$GITHUB_STEP_SUMMARY`` (bounded in size).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from openpert.engines.nextflow import TRACE_FILE_NAME
from openpert.engines.nextflow_trace import parse_trace
from openpert.files import read_tail

__all__ = [
    "affected_jobs", "failed_task_logs", "images_to_build", "plan_jobs", "rerun_problems",
    "resume_problems", "score_problems", "tasks_to_run", "trace_outcomes",
]  # fmt: skip

#: Statuses of a trace row whose task did its work (in this run, or in an earlier one).
DONE = ("COMPLETED", "CACHED")
#: Bytes kept from the end of each log of a failed task in the job summary.
LOG_TAIL_BYTES = 4000
#: Bytes of Markdown at most (GitHub takes up to 1 MiB per step's summary).
SUMMARY_MAX_BYTES = 200_000


# --- what the job runs --------------------------------------------------------------------------------
def tasks_to_run(changed: Iterable[str], always: Sequence[str]) -> list[str]:
    """The tasks of the touched components (``src/<task>/...`` folders) and the ``always`` ones, sorted.

    Raises
    ------
    ValueError
        For a line that is not a folder below ``src/<task>/`` (naming it).
    """
    tasks = set(always)
    for line in changed:
        text = line.strip()
        if not text:
            continue
        parts = Path(text).parts
        if len(parts) < 3 or parts[0] != "src":
            raise ValueError(f"not a component folder below src/<task>/: {text!r}")
        tasks.add(parts[1])
    return sorted(tasks)


def images_to_build(build_order: Sequence[Mapping[str, Any]], tasks: Sequence[str]) -> list[Mapping[str, Any]]:
    """The entries of a build order that a run of ``tasks`` needs, in the build order.

    A component image is needed when its config lies below ``src/<task>/`` of one of ``tasks``; a
    base image when a needed image builds on it, directly or through another base.
    """
    def task_of(entry: Mapping[str, Any]) -> str | None:
        # the config's place in the project (the build context): src/<task>/<type>/<name>/config.vsh.yaml
        source, context = Path(str(entry["source"])), Path(str(entry["context"]))
        parts = source.relative_to(context).parts if source.is_relative_to(context) else ()
        return parts[1] if len(parts) > 2 and parts[0] == "src" else None

    needed = {e["image"] for e in build_order if e.get("kind") == "component" and task_of(e) in set(tasks)}
    by_image = {e["image"]: e for e in build_order}
    frontier = list(needed)
    while frontier:
        parent = by_image.get(frontier.pop(), {}).get("builds_on")
        if parent in by_image and parent not in needed:
            needed.add(parent)
            frontier.append(parent)
    return [e for e in build_order if e["image"] in needed]


# --- what the trace must show ---------------------------------------------------------------------------
def trace_outcomes(rows: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Job id (the trace's ``tag``) -> the status that tells its outcome.

    A job retried after exit 137 or 143 has one row per attempt: a ``COMPLETED`` or ``CACHED``
    row wins, else the last attempt's status.
    """
    outcome: dict[str, str] = {}
    for row in rows:
        tag = row.get("tag")
        if not tag:
            continue
        status = str(row.get("status"))
        if outcome.get(str(tag)) not in DONE:
            outcome[str(tag)] = status
    return outcome


def resume_problems(before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]]) -> list[str]:
    """What keeps a run with ``-resume`` from having reused every task of the run before it.

    ``before`` and ``after`` are the rows of the two runs' traces. A job that succeeded before
    must be ``CACHED`` after; a job that failed before may run again (Nextflow never caches a
    failure); a job may not appear or vanish. Returns one sentence per problem (none: reused).
    """
    first, second = trace_outcomes(before), trace_outcomes(after)
    if not first:
        return ["the first run's trace has no task"]
    problems = [f"{job}: in the first run only" for job in sorted(first.keys() - second.keys())]
    problems += [f"{job}: in the resumed run only" for job in sorted(second.keys() - first.keys())]
    for job in sorted(first.keys() & second.keys()):
        if first[job] in DONE and second[job] != "CACHED":
            problems.append(f"{job}: {second[job]} on -resume, expected CACHED (it succeeded before)")
    return problems


def _folder_of(config: str | Path) -> Path:
    return Path(config).resolve().parent


def plan_jobs(plan: Mapping[str, Any]) -> dict[str, set[Path]]:
    """Every job of a plan (its ``jobs``) -> the component folders whose code it runs on.

    A job depends on its own component and on those of the jobs upstream of it (``after``): a
    metric job on the method whose prediction it scores and on the loader that made its dataset.
    """
    jobs: dict[str, set[Path]] = {}
    for entry in plan["jobs"]:  # upstream jobs come first
        jobs[entry["id"]] = {_folder_of(entry["config"])} | jobs.get(entry["after"], set())
    return jobs


def affected_jobs(plan: Mapping[str, Any], component: str | Path) -> set[str]:
    """The jobs of a plan that an edit of the component in folder ``component`` must run again.

    Raises
    ------
    ValueError
        When no job of the plan runs that component (the check would prove nothing).
    """
    folder = Path(component).resolve()
    affected = {job for job, folders in plan_jobs(plan).items() if folder in folders}
    if not affected:
        raise ValueError(f"no job of the plan runs the component in {component}")
    return affected


def rerun_problems(plan: Mapping[str, Any], before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]],
                   component: str | Path) -> list[str]:
    """What keeps a run with ``-resume`` after an edit of ``component`` from re-running only its jobs.

    Every job of the edited component, and every job downstream of it, that ran before must run
    again (not ``CACHED``); every other job that succeeded before must be ``CACHED``. Returns one
    sentence per problem (none: the digest rule held).
    """
    first, second = trace_outcomes(before), trace_outcomes(after)
    affected = affected_jobs(plan, component)
    problems = []
    ran_before = sorted(affected & first.keys())
    if not ran_before:
        problems.append(f"no job of {component} ran in the first run")
    for job in ran_before:
        if job not in second:
            problems.append(f"{job}: of the edited component, but absent from the resumed run")
        elif second[job] == "CACHED":
            problems.append(f"{job}: of the edited component, but CACHED (its code digest did not reach the task hash)")
    for job in sorted(first.keys() - affected):
        if first[job] in DONE and second.get(job) != "CACHED":
            problems.append(f"{job}: not of the edited component, but {second.get(job, 'absent')} on -resume, expected CACHED")
    return problems


def score_problems(comparison: Mapping[str, Any]) -> list[str]:
    """What keeps two runs' scores from being the same, from ``benchmarks/compare_results.py``'s figures.

    ``comparison`` is the JSON it writes (``--json``): ``figures`` with ``rows``, ``changed_rows``
    and ``unmatched_rows``, and ``per_task`` counts. A row changed by any amount, and a row only
    one run scored (a job that failed in one engine), are problems; so is a comparison of no rows.
    """
    figures = comparison.get("figures") or {}
    problems = []
    if not figures.get("rows"):
        problems.append("the two runs share no score row")
    for task, counts in sorted((comparison.get("per_task") or {}).items()):
        if counts.get("changed"):
            problems.append(f"{task}: {counts['changed']} of {counts['rows']} score rows changed")
        if counts.get("only_before") or counts.get("only_after"):
            problems.append(f"{task}: {counts.get('only_before', 0)} score rows in the first run only, "
                            f"{counts.get('only_after', 0)} in the second only (a job failed in one of them)")
    return problems


# --- the job summary ------------------------------------------------------------------------------------
def _tail(path: Path, limit: int) -> str:
    """The last ``limit`` bytes of a file, decoded leniently; a note when it is missing."""
    if not path.is_file():
        return f"({path.name} is missing)"
    size = path.stat().st_size
    text = read_tail(path, limit).decode("utf-8", errors="replace")
    return (f"... (first {size - limit} bytes left out)\n" if size > limit else "") + text


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in ``text``."""
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def failed_task_logs(roots: Sequence[str | Path], *, tail_bytes: int = LOG_TAIL_BYTES,
                     max_bytes: int = SUMMARY_MAX_BYTES) -> str:
    """Markdown of every failed task in the Nextflow traces below ``roots``: its logs' ends.

    Parameters
    ----------
    roots
        Folders searched for ``nextflow_trace.tsv`` files (results folders, pytest's base temp).
    tail_bytes
        Bytes kept from the end of each task's ``.command.log`` and ``.command.err``.
    max_bytes
        Size of the whole text at most; the tasks that do not fit are counted, not shown.

    Returns
    -------
    A heading and one section per failed task (its trace, job id, exit status and the two logs),
    or a line saying that no task failed. An unreadable trace is a section of its own.
    """
    sections: list[str] = []
    for root in roots:
        for trace in sorted(Path(root).rglob(TRACE_FILE_NAME)):
            try:
                rows = parse_trace(trace)
            except ValueError as err:
                sections.append(f"#### {trace}\n\nunreadable trace: {err}\n")
                continue
            outcome = trace_outcomes(rows)
            for row in rows:
                tag = str(row.get("tag"))
                if row.get("status") in DONE or outcome.get(tag) in DONE:
                    continue
                workdir = Path(str(row.get("workdir") or ""))
                part = [f"#### `{tag}` ({row.get('status')}, exit {row.get('exit')}, attempt {row.get('attempt')})",
                        "", f"trace: {trace}", f"work dir: {workdir}", ""]
                for name in (".command.log", ".command.err"):
                    text = _tail(workdir / name, tail_bytes) if row.get("workdir") else "(no work dir in the trace)"
                    fence = _fence(text)
                    part += [f"{name}:", "", fence, text.rstrip("\n"), fence, ""]
                sections.append("\n".join(part))
    if not sections:
        return "### Failed Nextflow tasks\n\nNo task failed.\n"
    out, size, left_out = ["### Failed Nextflow tasks\n"], 0, 0
    for section in sections:
        if size + len(section.encode()) > max_bytes:
            left_out += 1
            continue
        out.append(section)
        size += len(section.encode())
    if left_out:
        out.append(f"\n{left_out} more failed task(s) left out to keep the summary under {max_bytes} bytes.\n")
    return "\n".join(out)


# --- command line ---------------------------------------------------------------------------------------
def _report(problems: list[str], success: str) -> int:
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if not problems:
        print(success)
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python tests/tooling/nextflow_ci.py <command> ...``; 1 when a check finds a problem."""
    parser = argparse.ArgumentParser(prog="python tests/tooling/nextflow_ci.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("tasks", help="the tasks to run: the touched ones and the fixed ones")
    p.add_argument("--changed", type=Path, required=True, help="output of `openpert changed`")
    p.add_argument("--always", nargs="*", default=[], help="tasks run whatever changed")
    p = sub.add_parser("images", help="the images those tasks need, in build order, as TSV")
    p.add_argument("--build-order", type=Path, required=True, help="output of `openpert images build-order --format json`")
    p.add_argument("--tasks", nargs="+", required=True)
    p = sub.add_parser("resumed", help="a run with -resume reused every task that succeeded before")
    p.add_argument("before", type=Path, help="the first run's trace")
    p.add_argument("after", type=Path, help="the resumed run's trace")
    p = sub.add_parser("rerun", help="after an edit, a run with -resume re-ran only the edited component's jobs")
    p.add_argument("--plan", type=Path, required=True, help="the plan.json of the run")
    p.add_argument("--component", type=Path, required=True, help="the edited component's folder")
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p = sub.add_parser("scores", help="the two engines scored the same (compare_results.py's figures)")
    p.add_argument("comparison", type=Path, help="the JSON of `benchmarks/compare_results.py --json`")
    p = sub.add_parser("failed-logs", help="the failed tasks' logs as Markdown")
    p.add_argument("roots", nargs="+", type=Path)
    ns = parser.parse_args(argv)

    if ns.command == "tasks":
        print("\n".join(tasks_to_run(ns.changed.read_text().splitlines(), ns.always)))
        return 0
    if ns.command == "images":
        for entry in images_to_build(json.loads(ns.build_order.read_text()), ns.tasks):
            print(f"{entry['image']}\t{entry['dockerfile']}\t{entry['context']}")
        return 0
    if ns.command == "resumed":
        problems = resume_problems(parse_trace(ns.before), parse_trace(ns.after))
        return _report(problems, f"every task that succeeded in {ns.before} was CACHED in {ns.after}")
    if ns.command == "rerun":
        plan = json.loads(ns.plan.read_text())
        problems = rerun_problems(plan, parse_trace(ns.before), parse_trace(ns.after), ns.component)
        return _report(problems, f"only the jobs of {ns.component} and those downstream of it ran again")
    if ns.command == "scores":
        comparison = json.loads(ns.comparison.read_text())
        rows = (comparison.get("figures") or {}).get("rows", 0)
        return _report(score_problems(comparison), f"all {rows} score rows are the same in both runs")
    print(failed_task_logs(ns.roots))
    return 0


if __name__ == "__main__":
    sys.exit(main())
