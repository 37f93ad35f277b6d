"""How the plan, collection, scaling, statistics and website grow with the number of methods.

A synthetic benchmark of N methods x 20 datasets x 10 metrics of one task (a copy of the fixture
task ``tests/fixtures/project`` with N method components and five metric components of two metrics
each), whose job records and score files are written without running a job, in the formats the
local engine writes them: a ``record.json`` per job under ``work/<key[:2]>/<key>/`` and a
``score.h5ad`` per metric job under ``outputs/<dataset>/<method>/<metric>/`` (``uns`` metric ids
and values, one ``obs`` row per scored item with each metric's per-item value and a covariate).
The harness's own code then reads them: the task and its plan (``make_plan``, ``plan_jobs``,
every method job's metric jobs), the records (``JobRecord.read``) and ``write_results``, and
``render_site``.

Each size runs in its own process (so that one size's memory does not count against another):
once for time, once under ``tracemalloc`` for each step's peak memory above what the process held
when the step began (the timing pass runs without it, since it slows Python code). Steps:

- ``plan``: reading the task's components, ``make_plan`` (every job, metric jobs included) and ``plan_jobs``;
- ``collection``: reading the job records and ``write_results`` less its scaling and statistics
  (reading score files, provenance, writing ``results.json`` and the Open Problems files);
- ``scaling``: seed averaging, control scaling, aggregation, gameability and dynamic range;
- ``statistics``: bootstrap CIs of every score cell, paired permutation tests against the best
  method, the dynamic range's bootstrap standard errors and the covariate regressions;
- ``report``: ``render_site`` of the task.

Times are CPU seconds of the process (``time.process_time``, with numerical libraries held to one
thread): on a machine shared with other work, wall time measures the others' load as much as
the harness. The table gives each step's CPU seconds and peak MB at each size and its growth exponent: the slope
of log(cost) against log(methods) from the smallest to the largest size (1: linear; 2: quadratic),
and the heaviest page of the site with its assets (``openpert.report.page_weight``), named, beside
the task page's own weight, which ``render_site`` keeps under ``PAGE_WEIGHT_LIMIT`` by handing each
dataset's section, the test matrix and then its heaviest sections to pages of their own.

Run with ``PYTHONPATH=common python benchmarks/scale.py`` (``--methods 10 30 100``, ``--items``,
``--keep DIR`` to keep the synthetic runs).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from figures import write_figures

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "project"
N_DATASETS = 20
#: Metric components, each reporting two metrics (ten metrics in all; the second of each is minimised).
N_METRIC_COMPONENTS = 5
#: Held-out items per dataset (a perturbation-prediction test split has a few hundred perturbations).
N_ITEMS = 200
#: Every tenth method fails on one dataset (exit 137), as real runs have failures.
FAILING_EVERY = 10
STEPS = ("plan", "collection", "scaling", "statistics", "report")
#: Functions of openpert.results.collect (module names) timed as each step inside write_results.
SCALING_FUNCTIONS = ("average_seeds", "scale_scores", "aggregate_scores", "gameability_table", "dynamic_range_table")
STATISTICS_FUNCTIONS = ("range_standard_errors", "regression_table")
#: Imported from openpert.results.resampling when write_results runs.
RESAMPLING_FUNCTIONS = ("bootstrap_ci", "compare_to_best")

METRIC_CONFIG = """__merge__: ../../api/comp_metric.yaml
name: {name}
label: Metric {k}
summary: A synthetic metric component of the scale benchmark.
description: Reports {a} (higher is better) and {b} (lower is better) per held-out row.
references:
  doi: [10.1000/fixture]
info:
  metrics:
    - {{name: {a}, label: {a}, summary: Synthetic., description: Synthetic., min: 0, max: 1, maximize: true}}
    - {{name: {b}, label: {b}, summary: Synthetic., description: Synthetic., min: 0, max: +.inf, maximize: false}}
resources:
  - type: python_script
    path: script.py
engines:
  - type: native
runners:
  - type: executable
  - type: nextflow
    directives:
      label: [lowmem, lowcpu, lowtime]
"""


def metric_ids(k: int) -> tuple[str, str]:
    """The two metric ids of synthetic metric component ``k``."""
    return f"agreement_{k}", f"error_{k}"


def make_task(root: Path, n_methods: int) -> Path:
    """A copy of the fixture project with ``n_methods`` methods and the synthetic metrics; returns the task folder."""
    shutil.copytree(FIXTURE, root)
    task_dir = root / "src" / "tiny"
    (task_dir / "analysis.py").unlink()
    for folder in (task_dir / "methods").iterdir():
        if folder.name != "group_mean":
            shutil.rmtree(folder)
    template = (task_dir / "methods" / "group_mean" / "config.vsh.yaml").read_text()
    script = task_dir / "methods" / "group_mean" / "script.py"
    for i in range(1, n_methods):
        folder = task_dir / "methods" / f"method_{i:03d}"
        folder.mkdir()
        (folder / "config.vsh.yaml").write_text(template.replace("name: group_mean", f"name: method_{i:03d}")
                                                .replace("label: Group mean", f"label: Method {i}"))
        shutil.copy(script, folder / "script.py")
    metric_script = (task_dir / "metrics" / "errors" / "script.py").read_bytes()
    for folder in list((task_dir / "metrics").iterdir()):
        shutil.rmtree(folder)
    headline, diagnostic = [], []
    for k in range(N_METRIC_COMPONENTS):
        a, b = metric_ids(k)
        folder = task_dir / "metrics" / f"metric_{k}"
        folder.mkdir()
        (folder / "config.vsh.yaml").write_text(METRIC_CONFIG.format(name=f"metric_{k}", k=k, a=a, b=b))
        (folder / "script.py").write_bytes(metric_script)
        headline.append(a)
        (diagnostic if k == N_METRIC_COMPONENTS - 1 else headline).append(b)
    info = task_dir / "api" / "task_info.yaml"
    text = info.read_text().replace("{metric: rmse, covariate: truth_spread}", "{metric: agreement_0, covariate: truth_spread}")
    info.write_text(text + f"headline_metrics: {json.dumps(headline)}\ndiagnostic_metrics: {json.dumps(diagnostic)}\n")
    return task_dir


def make_datasets(root: Path) -> list:
    """Twenty datasets, each a copy of the files the fixture task's dataset component makes once."""
    from openpert.config.task import Task
    from openpert.config.viash import read_config
    from openpert.run.component import run_component

    first = root / "datasets" / "ds00"
    first.mkdir(parents=True)
    generator = read_config(root / "src/tiny/datasets/synthetic/config.vsh.yaml")
    result = run_component(generator, {"output_train": first / "train.h5ad", "output_test": first / "test.h5ad",
                                       "output_solution": first / "solution.h5ad", "dataset_id": "ds00", "seed": 7},
                           work_dir=root / "_work")
    if not result.succeeded:
        raise RuntimeError(f"the fixture's dataset component failed: {result.reason}")
    for j in range(1, N_DATASETS):
        shutil.copytree(first, root / "datasets" / f"ds{j:02d}")
    shutil.rmtree(root / "_work")
    return Task(root / "src" / "tiny").find_datasets(root / "datasets")


def score_template(path: Path, dataset_id: str, ids: tuple[str, str], n_items: int) -> None:
    """A score file as a metric component writes it (anndata), to copy and fill for each method."""
    import anndata as ad
    import pandas as pd

    obs = pd.DataFrame({ids[0]: np.zeros(n_items), ids[1]: np.zeros(n_items), "truth_spread": np.zeros(n_items)},
                       index=[f"item_{i}" for i in range(n_items)])
    ad.AnnData(obs=obs, uns={"dataset_id": dataset_id, "method_id": "template", "metric_ids": list(ids),
                             "metric_values": [0.0, 0.0]}).write_h5ad(path)


def fill_score(template: Path, dest: Path, method_id: str, columns: dict[str, np.ndarray]) -> None:
    """Copy a score template and write one method's per-item values and their means into it."""
    import h5py
    from anndata.io import write_elem

    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, dest)
    with h5py.File(dest, "r+") as fh:
        for name, values in columns.items():
            fh["obs"][name][...] = values
        del fh["uns"]["method_id"]
        write_elem(fh["uns"], "method_id", method_id)
        metric_names = [n.decode() if isinstance(n, bytes) else str(n) for n in fh["uns"]["metric_ids"][()]]
        fh["uns"]["metric_values"][...] = [float(np.mean(columns[n])) for n in metric_names]


def make_run(root: Path, task_dir: Path, datasets: list, n_items: int) -> tuple[dict, Path]:
    """Job records and score files of a finished run, written as the local engine writes them.

    Returns the plan and the run's folder.
    """
    from openpert.config.task import Task
    from openpert.engines.plan import make_plan, plan_jobs
    from openpert.files import hash_file, hash_text, write_text_atomic
    from openpert.results.provenance import dataset_digest, environment_provenance
    from openpert.run.records import JobRecord

    outdir = root / "run"
    task = Task(task_dir)
    plan = make_plan(task, datasets, outdir)
    write_text_atomic(outdir / "plan.json", json.dumps(plan, indent=2))
    jobs = plan_jobs(plan, task.config_at)
    method_jobs = [job for job in jobs if job.stage == "method"]
    env = environment_provenance(task.root)
    digests = {e["id"]: "sha256:" + e["digest"] for e in [*plan["methods"], *plan["metrics"]]}
    dataset_digests = {d["id"]: dataset_digest(d["files"]) for d in plan["datasets"]}
    roles = {e["id"]: e["control"] for e in plan["methods"]}
    methods = [e["id"] for e in plan["methods"]]
    rng = np.random.default_rng(0)
    # Each method's quality between the negative (0) and positive (1) control, and each item's difficulty.
    quality = {m: {"positive": 1.0, "negative": 0.0, "baseline": 0.2}.get(roles[m], float(rng.uniform(0.25, 0.9)))
               for m in methods}
    templates = root / "templates"
    templates.mkdir()
    for ds in plan["datasets"]:
        for k in range(N_METRIC_COMPONENTS):
            score_template(templates / f"{ds['id']}-{k}.h5ad", ds["id"], metric_ids(k), n_items)
    failing = {(plan["datasets"][i % N_DATASETS]["id"], m) for i, m in enumerate(methods)
               if roles[m] is None and i % FAILING_EVERY == 3}

    def write_record(record: JobRecord, job) -> None:
        record.component_digest = digests[job.config.name]
        record.dataset_digest = dataset_digests[job.dataset_id]
        record.key = hash_text(job.job_id, record.component_digest)
        record.log = f"logs/{job.job_id}.log"
        record.engine, record.provenance, record.sandbox = "local", env, "bubblewrap"
        record.write(outdir / "work" / record.key[:2] / record.key / "record.json")

    for job in method_jobs:
        record = JobRecord(job_id=job.job_id, stage="method", component=job.config.name, component_type=job.config.type,
                           dataset_id=job.dataset_id, method_id=job.method_id, params=dict(job.params),
                           duration_s=1.5, peak_memory_mb=180.0)
        if (job.dataset_id, job.method_id) in failing:
            record.exit_code, record.reason = 137, "memory limit exceeded (peak 4.2 GB > 4.0 GB)"
            log = outdir / "logs" / f"{job.job_id}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text("Traceback (most recent call last):\nMemoryError\n")
            write_record(record, job)
            continue
        record.status, record.exit_code = "succeeded", 0
        record.outputs = {"output": str(job.publish_dir / "prediction.h5ad")}
        record.output_sha256 = {"output": "0" * 64}
        write_record(record, job)
        for metric_job in [j for j in jobs if j.after == job.job_id]:
            k = int(metric_job.config.name.rsplit("_", 1)[1])
            a, b = metric_ids(k)
            difficulty = np.linspace(0.0, 0.3, n_items)
            noise = rng.normal(0, 0.05, size=n_items) if roles[job.method_id] not in ("positive", "negative") else 0.0
            good = np.clip(quality[job.method_id] - difficulty + noise, 0, 1)
            dest = metric_job.publish_dir / "score.h5ad"
            fill_score(templates / f"{job.dataset_id}-{k}.h5ad", dest, job.method_id,
                       {a: 0.5 + 0.5 * good, b: 1.0 - good, "truth_spread": 1.0 + difficulty})
            metric = JobRecord(job_id=metric_job.job_id, stage="metric", component=metric_job.config.name,
                               component_type="metric", dataset_id=job.dataset_id, method_id=job.method_id,
                               status="succeeded", exit_code=0, duration_s=0.8, peak_memory_mb=120.0,
                               outputs={"output": str(dest)}, output_sha256={"output": hash_file(dest)},
                               params=dict(metric_job.params))
            write_record(metric, metric_job)
    return plan, outdir


class StepMeter:
    """Seconds and peak traced memory per step, with the harness's functions wrapped to charge their step.

    Calls nested in a charged call (``range_standard_errors`` calling ``bootstrap_ci``) count
    once, for the outer one. Memory is measured only while ``tracemalloc`` traces.
    """

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(STEPS, 0.0)
        self.peak_bytes = dict.fromkeys(STEPS, 0)
        self._depth = 0
        self._patches: list[tuple[object, str, Callable]] = []

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Charge the block's time and memory to ``name``."""
        tracing = tracemalloc.is_tracing()
        if tracing:
            start_bytes = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
        start = time.process_time()
        try:
            yield
        finally:
            self.seconds[name] += time.process_time() - start
            if tracing:
                self.peak_bytes[name] = max(self.peak_bytes[name], tracemalloc.get_traced_memory()[1] - start_bytes)

    def charge(self, module: object, attribute: str, step: str) -> None:
        """Wrap ``module.attribute`` so that its calls are charged to ``step`` (undone by :meth:`restore`)."""
        original = getattr(module, attribute)

        @functools.wraps(original)
        def wrapped(*args, **kwargs):
            if self._depth:
                return original(*args, **kwargs)
            self._depth += 1
            try:
                with self.step(step):
                    return original(*args, **kwargs)
            finally:
                self._depth -= 1

        self._patches.append((module, attribute, original))
        setattr(module, attribute, wrapped)

    def restore(self) -> None:
        for module, attribute, original in reversed(self._patches):
            setattr(module, attribute, original)
        self._patches.clear()


def measure(task_dir: Path, datasets: list, outdir: Path, site: Path, *, memory: bool) -> tuple[StepMeter, tuple[int, str]]:
    """Run the steps once on the synthetic run; return the meter and the heaviest page's weight and path."""
    import warnings

    import openpert.results.collect as collect
    import openpert.results.resampling as resampling
    from openpert.config.task import Task
    from openpert.engines.plan import make_plan, plan_jobs
    from openpert.report.site import page_weight, render_site
    from openpert.run.records import JobRecord

    meter = StepMeter()
    if memory:
        tracemalloc.start()
    try:
        with meter.step("plan"):
            task = Task(task_dir)
            task.components  # noqa: B018 - reading every component config is part of planning
            plan = make_plan(task, datasets, outdir)
            plan_jobs(plan, task.config_at)  # reading the jobs back is part of planning
        for name in SCALING_FUNCTIONS:
            meter.charge(collect, name, "scaling")
        for name in STATISTICS_FUNCTIONS:
            meter.charge(collect, name, "statistics")
        for name in RESAMPLING_FUNCTIONS:
            meter.charge(resampling, name, "statistics")
        with meter.step("collection"):
            records = [JobRecord.read(p) for p in sorted((outdir / "work").glob("*/*/record.json"))]
            collect.write_results(task, plan, records, outdir)
        meter.restore()
        # write_results' time includes its scaling and statistics, charged to them as well.
        meter.seconds["collection"] -= meter.seconds["scaling"] + meter.seconds["statistics"]
        with meter.step("report"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an over-weight page is measured below, not warned about
            render_site([outdir], site)
    finally:
        meter.restore()
        if memory:
            tracemalloc.stop()
    heaviest = max((page_weight(p), p.relative_to(site).as_posix()) for p in site.rglob("*.html"))
    return meter, heaviest


def run_size(n_methods: int, n_items: int, keep: Path | None) -> dict:
    """Build and measure one size (in this process); return its figures."""
    root = Path(tempfile.mkdtemp(prefix=f"openpert-scale-{n_methods}-", dir=keep))
    try:
        task_dir = make_task(root / "project", n_methods)
        datasets = make_datasets(root / "project")
        start = time.perf_counter()
        plan, outdir = make_run(root / "project", task_dir, datasets, n_items)
        setup_s = time.perf_counter() - start
        timed, (heaviest, heaviest_path) = measure(task_dir, datasets, outdir, root / "site", memory=False)
        traced, _ = measure(task_dir, datasets, outdir, root / "site", memory=True)
        results = json.loads((outdir / "results.json").read_text())
        index = (root / "site").glob("*/index.html")
        return {"methods": len(plan["methods"]), "score_cells": len(results["scores"]),
                "score_files": sum(1 for r in results["resources"] if r["stage"] == "metric"),
                "setup_s": setup_s, "seconds": timed.seconds, "peak_mb": {k: v / 2**20 for k, v in traced.peak_bytes.items()},
                "heaviest_page_bytes": heaviest, "heaviest_page": heaviest_path,
                "task_page_bytes": max(page_weight_of(p) for p in index),
                "pages": sum(1 for _ in (root / "site").rglob("*.html"))}
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)


def page_weight_of(path: Path) -> int:
    from openpert.report.site import page_weight

    return page_weight(path)


def slope(xs: list[float], ys: list[float]) -> float:
    """log-log slope from the first to the last point (``nan`` when a cost is zero)."""
    if ys[0] <= 0 or ys[-1] <= 0:
        return float("nan")
    return math.log(ys[-1] / ys[0]) / math.log(xs[-1] / xs[0])


def table(rows: list[dict]) -> str:
    """The text table: each step's seconds and peak MB per size, and their growth exponents."""
    sizes = [r["methods"] for r in rows]
    head = f"{'step':<12}" + "".join(f"{f'{n} methods':>22}" for n in sizes) + f"{'exponent s':>12}{'exponent MB':>13}"
    lines = [head, f"{'':<12}" + "".join(f"{'CPU s':>11}{'peak MB':>11}" for _ in sizes)]
    for step in STEPS:
        secs = [r["seconds"][step] for r in rows]
        mbs = [r["peak_mb"][step] for r in rows]
        lines.append(f"{step:<12}" + "".join(f"{s:>11.2f}{m:>11.1f}" for s, m in zip(secs, mbs))
                     + f"{slope(sizes, secs):>12.2f}{slope(sizes, mbs):>13.2f}")
    for label, key in (("score cells", "score_cells"), ("score files", "score_files")):
        lines.append(f"{label:<12}" + "".join(f"{r[key]:>22,}" for r in rows))
    weights = [r["heaviest_page_bytes"] for r in rows]
    lines.append(f"{'page kB':<12}" + "".join(f"{w / 1000:>22,.0f}" for w in weights) + f"{slope(sizes, weights):>12.2f}")
    lines.append(f"{'  which':<12}" + "".join(f"{r['heaviest_page'][-21:]:>22}" for r in rows))
    tasks = [r["task_page_bytes"] for r in rows]
    lines.append(f"{'task page kB':<12}" + "".join(f"{w / 1000:>22,.0f}" for w in tasks) + f"{slope(sizes, tasks):>12.2f}")
    lines.append(f"{'pages':<12}" + "".join(f"{r['pages']:>22,}" for r in rows))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", type=int, nargs="+", default=[10, 30, 100],
                        help="numbers of methods (controls included), smallest first")
    parser.add_argument("--items", type=int, default=N_ITEMS, help="scored items per dataset")
    parser.add_argument("--keep", type=Path, help="keep the synthetic runs and sites in this folder")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # one size, in a child process
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        args.out.write_text(json.dumps(run_size(args.one, args.items, args.keep)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.methods:
            out = Path(tmp) / f"{n}.json"
            # Controls count among the methods: n components run on every dataset.
            command = [sys.executable, __file__, "--one", str(n - 3), "--items", str(args.items), "--out", str(out)]
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                command += ["--keep", str(args.keep)]
            threads = dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"), "1")
            subprocess.run(command, check=True, env={**os.environ, **threads})
            rows.append(json.loads(out.read_text()))
            print(f"{rows[-1]['methods']} methods measured (setup {rows[-1]['setup_s']:.0f} s)", file=sys.stderr)
    print(table(rows))
    sizes = [r["methods"] for r in rows]
    figures = {}
    for step in STEPS:
        figures[f"{step} time exponent"] = slope(sizes, [r["seconds"][step] for r in rows])
        figures[f"{step} memory exponent"] = slope(sizes, [r["peak_mb"][step] for r in rows])
        figures[f"{step} s at {sizes[-1]} methods"] = rows[-1]["seconds"][step]
    figures[f"heaviest page kB at {sizes[-1]} methods"] = rows[-1]["heaviest_page_bytes"] / 1000
    figures[f"task page kB at {sizes[-1]} methods"] = rows[-1]["task_page_bytes"] / 1000
    print(f"figures: {write_figures('scale', figures, rows=rows, items=args.items)}")


if __name__ == "__main__":
    main()
