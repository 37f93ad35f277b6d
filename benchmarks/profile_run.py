"""Where the time of a benchmark run goes, per job and phase: a table per task and stage.

Runs the benchmark of each task on its bundled resources (``resources_test/<task>``) as
``openpert benchmark --input resources_test/<task> -j 1 --sandbox off`` does (or, with
``--components``, on the datasets its dataset components make, as without ``--input``), in this process,
with three clocks added (nothing in the harness is changed; its functions are wrapped here):

* each job's process is started as ``python benchmarks/job_probe.py <report> <script>``, which
  runs the script unchanged and splits its wall time into imports, reading, compute and writing
  (see ``job_probe.py``); the time from spawning the process to the probe's first line is
  start-up (interpreter and ``site``), from the script's end to the harness seeing the process
  gone is exit (interpreter teardown, and the harness's polling interval);
* every ``FileFormat.validate`` call of a job (its inputs before, its outputs after): validation;
* ``LocalEngine.run_job`` as a whole; what is left once the process and validation are taken out
  is the rest of the harness (cache key hashing, staging, copying resources, publishing).

Jobs run unsandboxed, one at a time (the phases of parallel jobs would share the cores). The
figures depend on the machine's load: run it on an idle machine for reference numbers.

    python benchmarks/profile_run.py --tasks perturbqa --datasets k562 --methods mlp
    python benchmarks/profile_run.py --tasks all            # every task, every job (long)
    python benchmarks/profile_run.py --tasks perturbation_prediction --components   # full-size OP3

Prints one row per (task, stage) with the jobs' summed seconds per phase, then the shares of
the whole run; writes the per-job figures to ``benchmarks/results/profile_run.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from figures import RESULTS, write_figures

REPO = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).resolve().with_name("job_probe.py")

import openpert.engines.local as local_engine  # noqa: E402
import openpert.run.component as component_module  # noqa: E402
from openpert.config.formats import FileFormat  # noqa: E402
from openpert.config.task import Task, discover_tasks  # noqa: E402
from openpert.engines.benchmark import run_benchmark  # noqa: E402

#: Phases in the order of a job's life.
PHASES = ("startup", "imports", "reading", "compute", "writing", "exit", "validation", "harness")
#: What the fixed cost of a job is made of: none of it is the component's science.
FIXED_PHASES = ("startup", "imports", "exit", "validation", "harness")


class JobClocks:
    """Per-job phase times, filled by the wrappers below (one job per thread at a time)."""

    def __init__(self, probe_dir: Path) -> None:
        self.probe_dir = probe_dir
        self.current = threading.local()
        self.jobs: list[dict] = []
        self._lock = threading.Lock()
        self._count = 0

    def _job(self) -> dict | None:
        return getattr(self.current, "job", None)

    def wrap_run_job(self, run_job):
        clocks = self

        def timed_run_job(engine, job):
            entry = {"job_id": job.job_id, "stage": job.stage, "component": job.config.name,
                     "task": job.config.task_dir.name if job.config.task_dir is not None else "",
                     "phases": defaultdict(float), "cpu_phases": defaultdict(float)}
            clocks.current.job = entry
            start = time.perf_counter()
            try:
                record = run_job(engine, job)
            finally:
                clocks.current.job = None
            total = time.perf_counter() - start
            entry["total"] = total
            entry["status"] = record.status
            entry["cached"] = record.cached
            accounted = sum(v for k, v in entry["phases"].items() if k != "harness")
            entry["phases"]["harness"] = max(0.0, total - accounted)
            entry["phases"] = dict(entry["phases"])
            entry["cpu_phases"] = dict(entry["cpu_phases"])
            with clocks._lock:
                clocks.jobs.append(entry)
            return record

        return timed_run_job

    def wrap_execute(self, execute):
        clocks = self

        def probed_execute(cmd, **kwargs):
            entry = clocks._job()
            if entry is None or len(cmd) < 2 or not str(cmd[-1]).endswith(".py"):
                return execute(cmd, **kwargs)
            with clocks._lock:
                clocks._count += 1
                report = clocks.probe_dir / f"probe_{clocks._count}.json"
            probed = [*cmd[:-1], str(PROBE), str(report), cmd[-1]]
            spawned = time.time()
            result = execute(probed, **kwargs)
            returned = time.time()
            phases = entry["phases"]
            if report.is_file():
                probe = json.loads(report.read_text())
                phases["startup"] += probe["probe_started"] - spawned
                for name, seconds in probe["phases"].items():
                    phases[name] += seconds
                for name, seconds in probe["cpu_phases"].items():
                    entry["cpu_phases"][name] += seconds
                phases["exit"] += returned - probe["script_ended"]
            else:  # the process died before the probe could report: all of it is unattributed compute
                phases["compute"] += returned - spawned
            return result

        return probed_execute

    def wrap_validate(self, validate):
        clocks = self

        def timed_validate(fmt, *args, **kwargs):
            entry = clocks._job()
            start = time.perf_counter()
            try:
                return validate(fmt, *args, **kwargs)
            finally:
                if entry is not None:
                    entry["phases"]["validation"] += time.perf_counter() - start

        return timed_validate


def aggregate(jobs: list[dict]) -> dict[tuple[str, str], dict[str, float]]:
    """Sum of each phase (and job count) per (task, stage)."""
    table: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for job in jobs:
        row = table[(job["task"], job["stage"])]
        row["jobs"] += 1
        row["total"] += job["total"]
        for phase in PHASES:
            row[phase] += job["phases"].get(phase, 0.0)
    return {k: dict(v) for k, v in table.items()}


def format_table(table: dict[tuple[str, str], dict[str, float]]) -> str:
    """Seconds per phase for each (task, stage), a total row, and each phase's share of the run."""
    head = f"{'task':24s} {'stage':7s} {'jobs':>5s} {'total s':>8s} " + " ".join(f"{p:>10s}" for p in PHASES) + f" {'fixed/job':>9s}"
    lines = [head, "-" * len(head)]
    grand: dict[str, float] = defaultdict(float)
    for (task, stage), row in sorted(table.items()):
        fixed = sum(row[p] for p in FIXED_PHASES) / row["jobs"]
        lines.append(f"{task:24s} {stage:7s} {int(row['jobs']):5d} {row['total']:8.1f} "
                     + " ".join(f"{row[p]:10.2f}" for p in PHASES) + f" {fixed:9.2f}")
        for key, value in row.items():
            grand[key] += value
    if not grand:
        return "no job ran"
    fixed = sum(grand[p] for p in FIXED_PHASES) / grand["jobs"]
    lines.append("-" * len(head))
    lines.append(f"{'all':24s} {'':7s} {int(grand['jobs']):5d} {grand['total']:8.1f} "
                 + " ".join(f"{grand[p]:10.2f}" for p in PHASES) + f" {fixed:9.2f}")
    lines.append(f"{'share of the run':38s}      " + " ".join(f"{grand[p] / grand['total']:10.0%}" for p in PHASES))
    return "\n".join(lines)


def figures(jobs: list[dict]) -> dict[str, float]:
    """The run's headline figures: per-job means of the fixed phases, and the share of fixed cost."""
    n = len(jobs)
    total = sum(j["total"] for j in jobs)
    out = {"jobs": n, "total_s": total}
    for phase in PHASES:
        out[f"mean_{phase}_s"] = sum(j["phases"].get(phase, 0.0) for j in jobs) / n
    out["mean_fixed_s"] = sum(out[f"mean_{p}_s"] for p in FIXED_PHASES)
    out["fixed_share"] = out["mean_fixed_s"] * n / total if total else float("nan")
    for phase in ("imports", "reading", "compute", "writing"):
        out[f"mean_{phase}_cpu_s"] = sum(j["cpu_phases"].get(phase, 0.0) for j in jobs) / n
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["all"], help="task names under src/, or all")
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument("--methods", nargs="+", default=None)
    parser.add_argument("--controls", nargs="+", default=None)
    parser.add_argument("--metrics", nargs="+", default=None)
    parser.add_argument("--components", action="store_true",
                        help="make the datasets with the task's dataset components (e.g. the full-size OP3 run) "
                             "instead of reading resources_test/<task>")
    parser.add_argument("--output", default=None, help="results folder of the run (default: a temporary one, removed)")
    parser.add_argument("--json", default=str(RESULTS / "profile_run.json"), help="where to write the per-job figures")
    args = parser.parse_args()

    tasks = discover_tasks(REPO) if args.tasks == ["all"] else [Task(REPO / "src" / name) for name in args.tasks]
    work = Path(tempfile.mkdtemp(prefix="openpert-profile-"))
    outdir = Path(args.output) if args.output else work / "results"
    clocks = JobClocks(work)
    hooks = {"openpert.engines.local.LocalEngine.run_job": getattr(local_engine.LocalEngine, "run_job", None),
             "openpert.run.component.execute": getattr(component_module, "execute", None),
             "openpert.config.formats.FileFormat.validate": getattr(FileFormat, "validate", None)}
    missing = [name for name, hook in hooks.items() if hook is None]
    if missing:
        sys.exit(f"profile_run: the harness no longer has {', '.join(missing)}; update the clocks of this script")
    # The probe takes the place of the script on the interpreter's command line: every job starts
    # one (a job forked from the fork server has no command line of its own to probe).
    os.environ["OPENPERT_FORKSERVER"] = "off"
    local_engine.LocalEngine.run_job = clocks.wrap_run_job(local_engine.LocalEngine.run_job)
    component_module.execute = clocks.wrap_execute(component_module.execute)
    FileFormat.validate = clocks.wrap_validate(FileFormat.validate)
    started = time.perf_counter()
    try:
        for task in tasks:
            input_dir = None if args.components else REPO / "resources_test" / task.dir.name
            if input_dir is not None and not input_dir.is_dir():
                sys.exit(f"{input_dir}: no bundled resources for task {task.dir.name}")
            print(f"{task.dir.name}: running ...", file=sys.stderr, flush=True)
            run_benchmark(task, outdir / task.dir.name, input_dir=input_dir, datasets=args.datasets,
                          methods=args.methods, controls=args.controls, metrics=args.metrics,
                          jobs=1, progress=False, sandbox=False)
    finally:
        if not args.output:
            shutil.rmtree(work, ignore_errors=True)
    wall = time.perf_counter() - started
    if not clocks.jobs:
        sys.exit("no job ran: check the task, dataset and method names")
    failed = [j["job_id"] for j in clocks.jobs if j["status"] != "succeeded"]
    table = aggregate(clocks.jobs)
    print(format_table(table))
    summary = figures(clocks.jobs)
    print(f"\n{summary['jobs']} jobs in {wall:.1f} s of wall time (planning and collecting included); "
          f"fixed cost per job {summary['mean_fixed_s']:.2f} s on average "
          f"(start-up {summary['mean_startup_s']:.2f}, imports {summary['mean_imports_s']:.2f}, exit {summary['mean_exit_s']:.2f}, "
          f"validation {summary['mean_validation_s']:.2f}, rest of the harness {summary['mean_harness_s']:.2f}), "
          f"{summary['fixed_share']:.0%} of the jobs' time. Load average when done: {os.getloadavg()[0]:.1f}.")
    print("CPU seconds per job inside the scripts (less sensitive to the machine's load): "
          + ", ".join(f"{p} {summary[f'mean_{p}_cpu_s']:.2f}" for p in ("imports", "reading", "compute", "writing")))
    if failed:
        print(f"failed jobs ({len(failed)}): {', '.join(failed[:10])}")
    dest = write_figures("profile_run", summary, path=args.json, arguments=vars(args), wall_s=wall,
                         per_task_stage={f"{t}/{s}": row for (t, s), row in table.items()}, jobs=clocks.jobs)
    print(f"per-job figures: {dest}")


if __name__ == "__main__":
    main()
