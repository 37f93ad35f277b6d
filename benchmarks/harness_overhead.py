"""Per-job overhead of the local engine over running the same script directly.

Runs the fixture task's ``group_mean`` method (h5ad in, h5ad out) N times each way, interleaved, in
one process: directly (``python script.py`` with the VIASH block filled in by hand) and through
``LocalEngine.run_job`` (hashing, staging, input and output validation, limits, publishing). Prints
the medians, the overhead (difference of medians) and the ratio. Target: overhead <= 0.3 s per job.

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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import FIXTURE_PROJECT, make_test_resources  # noqa: E402

from openpert.config.viash import read_config  # noqa: E402
from openpert.engines.local import Job, LocalEngine, label_resources, limits_for  # noqa: E402
from openpert.run.component import substitute_block  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=15, help="runs of each kind")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="openpert-overhead-"))
    try:
        root = tmp / "project"
        shutil.copytree(FIXTURE_PROJECT, root)
        data = make_test_resources(root)
        config = read_config(root / "src/tiny/methods/group_mean/config.vsh.yaml")
        files = {"file_train": data / "train.h5ad", "file_test": data / "test.h5ad", "file_solution": data / "solution.h5ad"}
        limits = limits_for(config.labels, label_resources(root), where="group_mean")
        engine = LocalEngine(tmp / "results", progress=False)
        direct_times, engine_times = [], []
        for i in range(args.n):
            script = tmp / f"direct_{i}.py"
            par = {"input_train": str(files["file_train"]), "input_test": str(files["file_test"]), "output": str(tmp / f"direct_{i}.h5ad")}
            script.write_text(substitute_block(config.script.read_text(), par, {"name": "group_mean"}, path=config.script))
            start = time.perf_counter()
            subprocess.run([sys.executable, str(script)], check=True, cwd=tmp)
            direct_times.append(time.perf_counter() - start)

            job = Job(job_id=f"syn/group_mean_{i}", stage="method", config=config, dataset_id="syn", method_id="group_mean",
                      inputs={"input_train": files["file_train"], "input_test": files["file_test"]},
                      outputs={"output": "prediction.h5ad"}, params={}, limits=limits, context=files,
                      allowed={"file_train", "file_test"}, publish_dir=tmp / "results" / "outputs" / f"run{i}")
            # a fresh results folder each time: the job must really run, not come from the cache
            engine.outdir = tmp / f"results_{i}"
            start = time.perf_counter()
            record = engine.run_job(job)
            engine_times.append(time.perf_counter() - start)
            assert record.succeeded, record.reason
        direct, through = statistics.median(direct_times), statistics.median(engine_times)
        print(f"{'runs':<28}{args.n}")
        print(f"{'direct (median s)':<28}{direct:.3f}")
        print(f"{'local engine (median s)':<28}{through:.3f}")
        print(f"{'overhead per job (s)':<28}{through - direct:.3f}   (target <= 0.300)")
        print(f"{'ratio engine / direct':<28}{through / direct:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
