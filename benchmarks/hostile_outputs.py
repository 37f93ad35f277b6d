"""Peak memory of the harness on hostile outputs: files small on disk and huge once read.

Each attack of ``tests/adversarial/output_bombs.py`` runs as one job through
``LocalEngine.run_job`` (staging, the job in its sandbox, output validation, the log, publishing),
each in a fresh Python process: the harness. That process reports

* its own peak resident size (``VmHWM``, reset once its modules are imported) and how far it rose
  above its resident size at that moment: the memory an output took from the harness;
* the peak of its children (``RUSAGE_CHILDREN``): the job itself, capped by its resource label, and
  any process the harness reads a file in;
* the job's outcome and the log it left, and the wall time.

The attacks (sizes are those of the issue; ``--scale`` shrinks them all):

* ``huge_layer``: a layer declared 12 x 59,000,000 float64 (5.7 GB), a fill value, no chunk written;
* ``compressed_bomb``: an obsm matrix of 3 GB of gzip-compressed zeros (3 MB on disk);
* ``huge_index``: an obs index of 31 million names (gzip, 4 MB on disk);
* ``huge_log``: a job whose log is 1 GB (a sparse hole), which then fails;
* ``parquet_bomb``: a loader whose parquet output holds 302 million int64 rows (2.4 GB; 60 kB on disk).

Run it against another copy of the harness (e.g. before a change) with ``--harness DIR``, a folder
holding ``openpert/``; figures go to ``benchmarks/results/hostile_outputs.json``.

    python benchmarks/hostile_outputs.py [--scale 0.1] [--only huge_layer huge_log] [--harness DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from adversarial.hostile import copy_project  # noqa: E402
from adversarial.output_bombs import add_output_bombs, add_parquet_loader  # noqa: E402
from conftest import FIXTURE_PROJECT, make_test_resources  # noqa: E402
from figures import write_figures  # noqa: E402

#: One job through the local engine in this process; prints what it measured as one JSON line.
RUNNER = r"""
import json, resource, sys, time
from pathlib import Path

import anndata, h5py, pandas, pyarrow.parquet  # noqa: F401 - loaded before the baseline, as in a running harness

from openpert.config.task import Task
from openpert.config.viash import read_config
from openpert.engines.local import LocalEngine
from openpert.engines.plan import Job, dataset_jobs, label_resources, limits_for


def status(key):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(key + ":")) / 1024


root, out, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
engine = LocalEngine(out, progress=False)
resources = label_resources(root)
if name == "parquet_bomb":
    (job,) = dataset_jobs(Task(root / "src" / "tiny"), out, resources, ["bomb"])
else:
    syn = root / "resources_test" / "tiny" / "syn"
    files = {"file_train": syn / "train.h5ad", "file_test": syn / "test.h5ad", "file_solution": syn / "solution.h5ad"}
    config = read_config(root / "src" / "tiny" / "methods" / name / "config.vsh.yaml")
    job = Job(job_id=f"syn/{name}", stage="method", config=config, dataset_id="syn", method_id=name,
              inputs={"input_train": files["file_train"], "input_test": files["file_test"]}, outputs={"output": "prediction.h5ad"},
              params={}, limits=limits_for(config.labels, resources, where=name), context=files,
              allowed={"file_train", "file_test"}, publish_dir=out / "outputs" / "syn" / name)
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # the peak from here on: the imports above are the harness's, whatever it reads
before = status("VmRSS")
start = time.perf_counter()
record = engine.run_job(job)
seconds = time.perf_counter() - start
peak = status("VmHWM")
log = out / record.log
print(json.dumps({"peak_mb": peak, "rise_mb": peak - before, "children_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  "seconds": seconds, "status": record.status, "exit_code": record.exit_code, "reason": record.reason[:300],
                  "log_bytes": log.stat().st_size if log.exists() else None}))
"""

ATTACKS = ("huge_layer", "compressed_bomb", "huge_index", "huge_log", "parquet_bomb")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every attack's size (default: the issue's sizes)")
    parser.add_argument("--only", nargs="+", choices=ATTACKS, default=list(ATTACKS), help="attacks to run")
    parser.add_argument("--harness", type=Path, help="a folder holding the openpert package to measure (default: this repository's)")
    parser.add_argument("--name", default="hostile_outputs", help="name of the figures file in benchmarks/results/")
    args = parser.parse_args()
    sizes = {"layer_width": int(59_000_000 * args.scale), "bomb_width": int(31_250_000 * args.scale),
             "index_names": int(30 * 2**20 * args.scale), "log_bytes": int(2**30 * args.scale)}
    groups = max(1, int(72 * args.scale))
    env = dict(os.environ)
    harness = (args.harness or REPO / "common").resolve()
    env["PYTHONPATH"] = os.pathsep.join([str(harness), str(REPO / "common"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    tmp = Path(tempfile.mkdtemp(prefix="openpert-hostile-"))
    figures: dict[str, float] = {}
    table = {}
    try:
        root = copy_project(FIXTURE_PROJECT, tmp / "project")
        make_test_resources(root)
        add_output_bombs(root, **sizes)
        add_parquet_loader(root, groups=groups)
        print(f"harness: {harness / 'openpert'}   scale: {args.scale:g}")
        print(f"{'attack':<17}{'harness peak MB':>16}{'rise MB':>9}{'children MB':>13}{'s':>7}  outcome")
        for name in args.only:
            out = tmp / f"results_{name}"
            proc = subprocess.run([sys.executable, "-c", RUNNER, str(root), str(out), name], env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["?"])[-1]
                print(f"{name:<17}the harness process died: exit {proc.returncode}: {last[:200]}")
                table[name] = {"harness_exit": proc.returncode, "error": last[:500]}
                continue
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            table[name] = got
            outcome = "succeeded" if got["status"] == "succeeded" else f"failed: {got['reason'][:110]}"
            print(f"{name:<17}{got['peak_mb']:>16.0f}{got['rise_mb']:>9.0f}{got['children_mb']:>13.0f}{got['seconds']:>7.1f}  {outcome}")
            if got["log_bytes"] is not None and name == "huge_log":
                print(f"{'':<17}published log: {got['log_bytes']:,} bytes")
            figures[f"{name}_rise_mb"] = got["rise_mb"]
            figures[f"{name}_peak_mb"] = got["peak_mb"]
            shutil.rmtree(out, ignore_errors=True)  # a copied gigabyte log must not stay on disk
        dest = write_figures(args.name, figures, scale=args.scale, harness=str(harness), attacks=table)
        print(f"figures: {dest}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
