"""Per-job overhead of the local engine, with and without the sandbox, over running the script directly.

Runs the fixture task's ``group_mean`` method (h5ad in, h5ad out) N times each of three ways,
interleaved (the order rotating), in one process:

* bare: ``python script.py`` with the VIASH block filled in by hand;
* harness: ``LocalEngine.run_job`` (hashing, staging, input and output validation, limits,
  publishing), unsandboxed;
* sandboxed: the same in a bubblewrap sandbox (:mod:`openpert.run.sandbox`).

Prints the medians, the overheads (differences of medians) and the ratios. Targets: the harness
adds <= 0.3 s per job, the sandbox < 0.1 s more. The figures go to ``benchmarks/results/``.

    python benchmarks/harness_overhead.py [--n 15]
"""

from __future__ import annotations

import argparse
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
from openpert.run.component import run_component  # noqa: E402
from openpert.run.viash_block import substitute_block  # noqa: E402


def forcing_sandbox(sandbox: bool) -> Callable:
    """``run_component`` with ``sandbox`` fixed, whatever the engine passes (or does not)."""

    def run(*args, **kwargs):
        kwargs["sandbox"] = sandbox
        return run_component(*args, **kwargs)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=15, help="runs of each kind")
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
        times: dict[str, list[float]] = {"bare": [], "harness": [], "sandboxed": []}

        def bare(i: int) -> None:
            script = tmp / f"bare_{i}.py"
            par = {"input_train": str(files["file_train"]), "input_test": str(files["file_test"]), "output": str(tmp / f"bare_{i}.h5ad")}
            script.write_text(substitute_block(config.script.read_text(), par, {"name": "group_mean"}, path=config.script))
            start = time.perf_counter()
            subprocess.run([sys.executable, str(script)], check=True, cwd=tmp)
            times["bare"].append(time.perf_counter() - start)

        def through_engine(i: int, kind: str) -> None:
            job = Job(job_id=f"syn/group_mean_{kind}_{i}", stage="method", config=config, dataset_id="syn", method_id="group_mean",
                      inputs={"input_train": files["file_train"], "input_test": files["file_test"]},
                      outputs={"output": "prediction.h5ad"}, params={}, limits=limits, context=files,
                      allowed={"file_train", "file_test"}, publish_dir=tmp / "published" / kind / str(i))
            # a fresh results folder each time: the job must really run, not come from the cache
            engine.outdir = tmp / f"results_{kind}_{i}"
            original = local_engine.run_component
            local_engine.run_component = forcing_sandbox(kind == "sandboxed")
            try:
                start = time.perf_counter()
                record = engine.run_job(job)
                times[kind].append(time.perf_counter() - start)
            finally:
                local_engine.run_component = original
            # sandbox=True fails the job where bubblewrap does not work: a success ran sandboxed
            assert record.succeeded, record.reason

        runs: list[Callable[[int], None]] = [bare, lambda i: through_engine(i, "harness"), lambda i: through_engine(i, "sandboxed")]
        through_engine(-1, "sandboxed")  # warm-up: the sandbox probe and the first imports
        times["sandboxed"].clear()
        for i in range(args.n):
            for k in range(3):
                runs[(i + k) % 3](i)
        med = {kind: statistics.median(values) for kind, values in times.items()}
        print(f"{'runs of each kind':<36}{args.n}")
        print(f"{'bare script (median s)':<36}{med['bare']:.3f}")
        print(f"{'harness, no sandbox (median s)':<36}{med['harness']:.3f}")
        print(f"{'harness, sandboxed (median s)':<36}{med['sandboxed']:.3f}")
        print(f"{'harness overhead per job (s)':<36}{med['harness'] - med['bare']:.3f}   (target <= 0.300)")
        print(f"{'sandbox overhead per job (s)':<36}{med['sandboxed'] - med['harness']:.3f}   (target < 0.100)")
        print(f"{'ratio harness / bare':<36}{med['harness'] / med['bare']:.2f}")
        print(f"{'ratio sandboxed / bare':<36}{med['sandboxed'] / med['bare']:.2f}")
        print(f"{'ratio sandboxed / harness':<36}{med['sandboxed'] / med['harness']:.2f}")
        dest = write_figures("harness_overhead", {
            "bare_s": med["bare"], "harness_s": med["harness"], "sandboxed_s": med["sandboxed"],
            "harness_overhead_s": med["harness"] - med["bare"], "sandbox_overhead_s": med["sandboxed"] - med["harness"],
        }, runs=args.n)
        print(f"figures: {dest}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
