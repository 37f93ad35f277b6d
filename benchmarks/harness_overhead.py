"""Per-job overhead of the local engine, with and without the sandbox and its limits, over running the script directly.

Runs the fixture task's ``group_mean`` method (h5ad in, h5ad out) N times each of four ways,
interleaved (the order rotating), in one process:

* bare: ``python script.py`` with the VIASH block filled in by hand;
* harness: ``LocalEngine.run_job`` (hashing, staging, input and output validation, limits,
  publishing), unsandboxed;
* sandboxed: the same in a bubblewrap sandbox (:mod:`openpert.run.sandbox`), as a benchmark runs;
* unlimited: sandboxed, without the process and disk limits (the reference of their cost).

Prints the medians, the overheads (differences of medians) and the ratios, and the CPU time the
harness's thread spent per job (its watcher's polls included). Targets: the harness adds <= 0.3 s
per job, the sandbox < 0.1 s more; the process and disk limits a few milliseconds.

Then how far the limits let a hostile job get (``--reach R`` runs of each, sandboxed and not): a
fork bomb (a bare interpreter doubling its processes ten times, 1,024 if nothing stopped it) under
a limit of 256 processes, and a job writing 4 MB files (and one writing one file without end)
under a disk limit of 64 MB: how many processes it had when it was killed, how many bytes it had
written past the limit. The figures go to ``benchmarks/results/``.

    python benchmarks/harness_overhead.py [--n 15] [--reach 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import FIXTURE_PROJECT, make_test_resources  # noqa: E402
from figures import write_figures  # noqa: E402

import openpert.engines.local as local_engine  # noqa: E402
from openpert.config.viash import read_config  # noqa: E402
from openpert.engines.plan import Job, label_resources, limits_for  # noqa: E402
from openpert.run import sandbox as sandboxing  # noqa: E402
from openpert.run.component import copy_resources, run_component  # noqa: E402
from openpert.run.process import Limits, execute  # noqa: E402
from openpert.run.viash_block import substitute_block  # noqa: E402


def forcing_sandbox(sandbox: bool) -> Callable:
    """``run_component`` with ``sandbox`` fixed, whatever the engine passes (or does not)."""

    def run(*args, **kwargs):
        kwargs["sandbox"] = sandbox
        return run_component(*args, **kwargs)

    return run


#: A bare interpreter doubling its processes ten times, then each sleeping.
FORK_BOMB = "import os\nfor _ in range(10):\n    os.fork()\nos.execv('/bin/sleep', ['sleep', '30'])\n"
#: Writes 4 MB files into its folder without end.
MANY_FILES = ("import os, itertools\nfor i in itertools.count():\n"
              "    with open(f'part{i}', 'wb') as fh:\n        fh.write(os.urandom(4 << 20))\n")
#: Writes one file without end.
ONE_FILE = "with open('big', 'wb') as fh:\n    while True:\n        fh.write(bytes(1 << 20))\n"
PROCESS_LIMIT = 256
DISK_LIMIT_MB = 64


def reach(tmp: Path, runs: int) -> dict[str, list[float]]:
    """How far a fork bomb and two disk fillers get before their limits stop them (see the module docstring)."""
    found: dict[str, list[float]] = {}
    limits = Limits(time_s=60, processes=PROCESS_LIMIT, disk_mb=DISK_LIMIT_MB)
    for i in range(runs):
        for sandboxed in (False, True):
            where = "sandboxed" if sandboxed else "unsandboxed"
            for kind, code in (("fork_bomb", FORK_BOMB), ("many_files", MANY_FILES), ("one_file", ONE_FILE)):
                work = tmp / f"reach_{kind}_{where}_{i}"
                work.mkdir()
                argv = ["-S", "-c", code] if kind == "fork_bomb" else ["-c", code]
                if sandboxed:
                    box = sandboxing.Sandbox(work, env=sandboxing.job_environment(cpus=1, llm=False, llm_cache=False))
                    cmd = box.command([str(sandboxing.python_environment().executable), *argv])
                    env = box.env
                else:
                    cmd, env = [sys.executable, *argv], None
                start = time.perf_counter()
                exit_code, reason, _, _ = execute(cmd, cwd=work, log=tmp / f"{work.name}.log", limits=limits, env=env,
                                                  sandboxed=sandboxed)
                stopped_s = time.perf_counter() - start
                if kind == "fork_bomb":
                    match = re.search(r"\((\d+) processes\)", reason)
                    assert match, reason
                    found.setdefault(f"{kind}_{where}_processes", []).append(float(match.group(1)))
                else:
                    assert reason.startswith("disk limit"), reason
                    written = sum(f.stat().st_blocks * 512 for f in work.rglob("*") if f.is_file())
                    found.setdefault(f"{kind}_{where}_bytes_past_limit", []).append(float(written - DISK_LIMIT_MB * 2**20))
                found.setdefault(f"{kind}_{where}_stopped_s", []).append(stopped_s)
                shutil.rmtree(work)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=15, help="runs of each kind")
    parser.add_argument("--reach", type=int, default=5, help="runs of each hostile job (0: none)")
    args = parser.parse_args()
    if not sandboxing.available():
        sys.exit(f"bubblewrap cannot be used here ({sandboxing.unavailable_reason()}): nothing to compare")
    tmp = Path(tempfile.mkdtemp(prefix="openpert-overhead-"))
    try:
        root = tmp / "project"
        shutil.copytree(FIXTURE_PROJECT, root)
        data = make_test_resources(root)
        config = read_config(root / "src/tiny/methods/group_mean/config.vsh.yaml")
        files = {"file_train": data / "train.h5ad", "file_test": data / "test.h5ad", "file_solution": data / "solution.h5ad"}
        limits = limits_for(config.labels, label_resources(root), where="group_mean")
        engine = local_engine.LocalEngine(tmp / "results", progress=False)
        unlimited = dataclasses.replace(limits, processes=None, disk_mb=None)
        times: dict[str, list[float]] = {"bare": [], "harness": [], "sandboxed": [], "unlimited": []}
        cpu: dict[str, list[float]] = {"harness": [], "sandboxed": [], "unlimited": []}

        # The bare script's resources (its task library), laid out as the harness lays them out.
        bare_resources = tmp / "bare_resources"
        copy_resources(config, bare_resources)

        def bare(i: int) -> None:
            script = tmp / f"bare_{i}.py"
            par = {"input_train": str(files["file_train"]), "input_test": str(files["file_test"]), "output": str(tmp / f"bare_{i}.h5ad")}
            meta = {"name": "group_mean", "resources_dir": str(bare_resources)}
            script.write_text(substitute_block(config.script.read_text(), par, meta, path=config.script))
            start = time.perf_counter()
            subprocess.run([sys.executable, str(script)], check=True, cwd=tmp)
            times["bare"].append(time.perf_counter() - start)

        def through_engine(i: int, kind: str) -> None:
            job = Job(job_id=f"syn/group_mean_{kind}_{i}", stage="method", config=config, dataset_id="syn", method_id="group_mean",
                      inputs={"input_train": files["file_train"], "input_test": files["file_test"]},
                      outputs={"output": "prediction.h5ad"}, params={}, limits=unlimited if kind == "unlimited" else limits,
                      context=files,
                      allowed={"file_train", "file_test"}, publish_dir=tmp / "published" / kind / str(i))
            # a fresh results folder each time: the job must really run, not come from the cache
            engine.outdir = tmp / f"results_{kind}_{i}"
            original = local_engine.run_component
            local_engine.run_component = forcing_sandbox(kind in ("sandboxed", "unlimited"))
            try:
                start, cpu_start = time.perf_counter(), time.thread_time()
                record = engine.run_job(job)
                times[kind].append(time.perf_counter() - start)
                cpu[kind].append(time.thread_time() - cpu_start)
            finally:
                local_engine.run_component = original
            # sandbox=True fails the job where bubblewrap does not work: a success ran sandboxed
            assert record.succeeded, record.reason

        runs: list[Callable[[int], None]] = [bare, lambda i: through_engine(i, "harness"), lambda i: through_engine(i, "sandboxed"),
                                             lambda i: through_engine(i, "unlimited")]
        through_engine(-1, "sandboxed")  # warm-up: the sandbox probe and the first imports
        times["sandboxed"].clear()
        cpu["sandboxed"].clear()
        for i in range(args.n):
            for k in range(len(runs)):
                runs[(i + k) % len(runs)](i)
        med = {kind: statistics.median(values) for kind, values in times.items()}
        med_cpu = {kind: statistics.median(values) for kind, values in cpu.items()}
        print(f"{'runs of each kind':<36}{args.n}")
        print(f"{'bare script (median s)':<36}{med['bare']:.3f}")
        print(f"{'harness, no sandbox (median s)':<36}{med['harness']:.3f}")
        print(f"{'harness, sandboxed (median s)':<36}{med['sandboxed']:.3f}")
        print(f"{'harness overhead per job (s)':<36}{med['harness'] - med['bare']:.3f}   (target <= 0.300)")
        print(f"{'sandbox overhead per job (s)':<36}{med['sandboxed'] - med['harness']:.3f}   (target < 0.100)")
        print(f"{'ratio harness / bare':<36}{med['harness'] / med['bare']:.2f}")
        print(f"{'ratio sandboxed / bare':<36}{med['sandboxed'] / med['bare']:.2f}")
        print(f"{'ratio sandboxed / harness':<36}{med['sandboxed'] / med['harness']:.2f}")
        print(f"{'sandboxed, no proc/disk limits (s)':<36}{med['unlimited']:.3f}")
        print(f"{'process+disk limits per job (s)':<36}{med['sandboxed'] - med['unlimited']:.3f}")
        print(f"{'ratio limited / unlimited':<36}{med['sandboxed'] / med['unlimited']:.3f}")
        print(f"{'harness thread CPU, limited (s)':<36}{med_cpu['sandboxed']:.3f}")
        print(f"{'harness thread CPU, unlimited (s)':<36}{med_cpu['unlimited']:.3f}")
        print(f"{'ratio CPU limited / unlimited':<36}{med_cpu['sandboxed'] / med_cpu['unlimited']:.3f}")
        figures = {
            "bare_s": med["bare"], "harness_s": med["harness"], "sandboxed_s": med["sandboxed"],
            "harness_overhead_s": med["harness"] - med["bare"], "sandbox_overhead_s": med["sandboxed"] - med["harness"],
            "unlimited_s": med["unlimited"], "limits_overhead_s": med["sandboxed"] - med["unlimited"],
            "harness_cpu_limited_s": med_cpu["sandboxed"], "harness_cpu_unlimited_s": med_cpu["unlimited"],
        }
        details: dict = {}
        if args.reach:
            found = reach(tmp, args.reach)
            print(f"limits' reach over {args.reach} run(s) each (process limit {PROCESS_LIMIT}, disk limit {DISK_LIMIT_MB} MB):")
            for name, values in found.items():
                print(f"  {name:<44} median {statistics.median(values):>12,.3f}  max {max(values):>12,.3f}")
                figures[f"{name}_median"] = statistics.median(values)
                figures[f"{name}_max"] = max(values)
            details["reach"] = found
        dest = write_figures("harness_overhead", figures, runs=args.n, **details)
        print(f"figures: {dest}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
