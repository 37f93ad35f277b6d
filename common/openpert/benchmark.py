"""The local engine: plan dataset x (controls + methods) x metrics, run it, collect results.

A run has three stages. Dataset components that declare ``info.datasets`` (a list of ``{id: ...,
<argument>: <value>}``) run first and produce datasets; datasets may also come ready-made from a
folder (``--input``). Then every control method and method runs on every dataset, and every metric
on every prediction.

Every job is cached under ``<outdir>/work/<key>``, where the key hashes the component (its merged
config and resources), its parameters and the content of its inputs, as Nextflow's ``-resume`` does.
A job is finished when its ``record.json`` exists; that file is written last and atomically, so an
interrupted job is simply run again. Failed jobs are not cached (again as Nextflow): a resumed run
tries them again.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import shutil
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from openpert.component_runner import Limits, kill_active_jobs, run_component
from openpert.io import hash_file, hash_text, write_text_atomic
from openpert.jobs import EXIT_INVALID, JobRecord
from openpert.task import Dataset, Task
from openpert.viash_config import ComponentConfig, ConfigError

PLAN_VERSION = 1


# --- resources -----------------------------------------------------------------------------------------
def label_resources(root: Path) -> dict[str, dict[str, float]]:
    """Resource limits per label, from ``_viash.yaml``'s ``config_mods``."""
    from openpert.nextflow import parse_label_resources

    return parse_label_resources(Path(root) / "_viash.yaml")


def limits_for(labels: Sequence[str], resources: dict[str, dict[str, float]], *, where: str) -> Limits:
    """Combine a component's labels into limits; an unknown label is an error naming the component."""
    values: dict[str, float] = {}
    for label in labels:
        if label not in resources:
            raise ConfigError(f"{where}: unknown resource label {label!r}; known: {sorted(resources)}")
        values.update(resources[label])
    cpus = values.get("cpus")
    return Limits(time_s=values.get("time_s"), memory_mb=values.get("memory_mb"), cpus=int(cpus) if cpus else None)


# --- hashing -------------------------------------------------------------------------------------------
_FILE_HASHES: dict[tuple, str] = {}
_HASH_LOCK = threading.Lock()


def file_digest(path: Path) -> str:
    """Content hash of a file, memoised by path, size and mtime (datasets are hashed once per run)."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _HASH_LOCK:
        if key in _FILE_HASHES:
            return _FILE_HASHES[key]
    digest = hash_file(path)
    with _HASH_LOCK:
        _FILE_HASHES[key] = digest
    return digest


_LIBRARY_DIGEST: str | None = None


def library_digest() -> str:
    """Hash of the harness's own source (``openpert``), which every component script may import.

    Part of every job's cache key, so that a change to shared library code (a metric's helper, a
    data loader) invalidates the jobs it may affect instead of silently reusing stale outputs.
    """
    global _LIBRARY_DIGEST
    if _LIBRARY_DIGEST is None:
        package = Path(__file__).resolve().parent
        files = sorted(p for p in package.rglob("*") if p.is_file() and p.suffix in (".py", ".yaml", ".json"))
        _LIBRARY_DIGEST = hash_text(*(f"{p.relative_to(package)}:{hash_file(p)}" for p in files))
    return _LIBRARY_DIGEST


def component_digest(config: ComponentConfig) -> str:
    """Hash of everything that defines a component: merged config, resources and library code."""
    parts = [library_digest(), json.dumps(config.public_dict(), sort_keys=True, default=str)]
    for res in config.resources:
        path = config.resource_path(res)
        parts.append(hash_file(path) if path.exists() else f"missing:{res.get('path')}")
    return hash_text(*parts)


# --- planning ------------------------------------------------------------------------------------------
def needs_llm(config: ComponentConfig) -> bool:
    """Whether a component talks to a language model (it takes the shared LLM arguments)."""
    return any(a.name == "llm_base_url" for a in config.arguments)


def llm_configured() -> bool:
    """Whether the environment names a language model for LLM components to use."""
    return bool(os.environ.get("OPENPERT_LLM_BASE_URL") or os.environ.get("OPENPERT_LLM_MODEL"))


def _component_entry(task: Task, config: ComponentConfig) -> dict[str, Any]:
    return {
        "id": config.name,
        "type": config.type,
        "control": config.control,
        "config": str(config.path),
        "inputs": {a.name: a.format_id for a in config.file_inputs if a.format_id},
        "outputs": {a.name: a.format_id for a in config.file_outputs if a.format_id},
        "output_names": {a.name: task.format_filename(a.format_id) for a in config.file_outputs if a.format_id},
        "params": {k: v for k, v in config.parameter_defaults().items() if v is not None},
        "labels": config.labels,
    }


def _select(components: list[ComponentConfig], names: Sequence[str] | None, what: str, task: Task) -> list[ComponentConfig]:
    if names is None:
        return components
    known = {c.name for c in components}
    unknown = sorted(set(names) - known)
    if unknown:
        raise ConfigError(f"{task.dir}: unknown {what}: {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return [c for c in components if c.name in set(names)]


def make_plan(
    task: Task,
    datasets: Sequence[Dataset],
    outdir: Path,
    *,
    methods: Sequence[str] | None = None,
    controls: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The plan of a benchmark run (see ``docs/plan_json.md``).

    Parameters
    ----------
    task
        The task.
    datasets
        Processed datasets (from :meth:`Task.find_datasets` or the dataset stage).
    outdir
        Where the run writes its results.
    methods, controls, metrics
        Names to keep (``None``: all). Controls are kept by default even when ``methods`` is given,
        because scaling needs them.
    """
    if not datasets:
        raise ConfigError(f"{task.dir}: no datasets to benchmark")
    chosen = _select(task.of_type("control_method"), controls, "control methods", task)
    chosen += _select(task.of_type("method"), methods, "methods", task)
    scorers = _select(task.of_type("metric"), metrics, "metrics", task)
    skipped = []
    if not llm_configured():
        # Without a model to talk to, LLM components could only fail; they are left out and listed.
        for comp in [c for c in [*chosen, *scorers] if needs_llm(c)]:
            skipped.append({"id": comp.name, "type": comp.type,
                            "reason": "needs a language model: set OPENPERT_LLM_BASE_URL (or OPENPERT_LLM_MODEL for vLLM in process)"})
        chosen = [c for c in chosen if not needs_llm(c)]
        scorers = [c for c in scorers if not needs_llm(c)]
    if not chosen:
        raise ConfigError(f"{task.dir}: no methods or control methods to run")
    if not scorers:
        raise ConfigError(f"{task.dir}: no metrics")
    # A method that declares an input it may not read stays in the plan: its job is refused by the
    # runner and recorded as failed with the reason, so one bad contribution cannot stop a run.
    return {
        "plan_version": PLAN_VERSION,
        "task": task.name,
        "task_dir": str(task.dir),
        "repo_root": str(task.root),
        "outdir": str(Path(outdir).resolve()),
        "datasets": [{"id": d.id, "files": {k: str(v) for k, v in d.files.items()}} for d in datasets],
        "methods": [_component_entry(task, c) for c in chosen],
        "metrics": [_component_entry(task, c) for c in scorers],
        "skipped": skipped,
        "prediction_format": task.prediction_format,
        "method_formats": sorted(task.method_formats),
        "resources": label_resources(task.root),
    }


# --- jobs ----------------------------------------------------------------------------------------------
class Job:
    """One component run within a benchmark."""

    def __init__(self, *, job_id: str, stage: str, config: ComponentConfig, dataset_id: str, method_id: str | None,
                 inputs: dict[str, Path], outputs: dict[str, str], params: dict[str, Any], limits: Limits,
                 context: dict[str, Path], allowed: set[str] | None, publish_dir: Path):
        self.job_id, self.stage, self.config = job_id, stage, config
        self.dataset_id, self.method_id = dataset_id, method_id
        self.inputs, self.outputs, self.params = inputs, outputs, params
        self.limits, self.context, self.allowed, self.publish_dir = limits, context, allowed, publish_dir

    def key(self, component_hash: str) -> str:
        inputs = {name: file_digest(path) for name, path in sorted(self.inputs.items())}
        return hash_text(component_hash, json.dumps(self.params, sort_keys=True, default=str),
                         json.dumps(inputs, sort_keys=True), json.dumps(self.outputs, sort_keys=True))


class LocalEngine:
    """Runs jobs as subprocesses, in parallel, with caching and failure isolation.

    Parameters
    ----------
    outdir
        The run's output folder (``work/``, ``outputs/``, ``logs/`` are created inside).
    jobs
        How many jobs run at once.
    resume
        Reuse finished jobs from an earlier run into the same ``outdir``.
    progress
        Show progress on stderr; ``None`` shows it only when stderr is a terminal.
    """

    def __init__(self, outdir: Path, *, jobs: int = 1, resume: bool = False, progress: bool | None = None):
        self.outdir = Path(outdir).resolve()
        self.jobs = max(1, int(jobs))
        self.resume = resume
        self.progress = sys.stderr.isatty() if progress is None else progress
        self._component_hashes: dict[Path, str] = {}
        self._lock = threading.Lock()
        self._done = 0
        self._total = 0
        self._running: set[str] = set()
        self._start = time.perf_counter()

    # -- one job -----------------------------------------------------------------------------------------
    def _component_hash(self, config: ComponentConfig) -> str:
        with self._lock:
            if config.path not in self._component_hashes:
                self._component_hashes[config.path] = component_digest(config)
            return self._component_hashes[config.path]

    def run_job(self, job: Job) -> JobRecord:
        """Run (or reuse) one job and return its record. Never raises for a failure of the job."""
        record = JobRecord(job_id=job.job_id, stage=job.stage, component=job.config.name,
                           component_type=job.config.type, dataset_id=job.dataset_id, method_id=job.method_id)
        log_dest = self.outdir / "logs" / f"{job.job_id}.log"
        record.log = str(log_dest.relative_to(self.outdir))
        try:
            key = job.key(self._component_hash(job.config))
        except OSError as err:
            record.exit_code, record.reason = EXIT_INVALID, f"cannot read inputs: {err}"
            return record
        record.key = key
        job_dir = self.outdir / "work" / key[:2] / key
        record_path = job_dir / "record.json"
        if self.resume and record_path.is_file():
            cached = JobRecord.read(record_path)
            outputs = {k: Path(v) for k, v in cached.outputs.items()}
            if cached.succeeded and all(p.exists() for p in outputs.values()):
                cached.cached = True
                cached.job_id, cached.dataset_id, cached.method_id = job.job_id, job.dataset_id, job.method_id
                cached.outputs = {k: str(self._publish(job, p)) for k, p in outputs.items()}
                cached.log = record.log
                return cached
        attempt = job_dir / f"attempt-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        out_dir = attempt / "out"
        args: dict[str, Any] = {name: str(path) for name, path in job.inputs.items()}
        args.update({name: str(out_dir / filename) for name, filename in job.outputs.items()})
        args.update(job.params)
        with self._lock:
            self._running.add(job.job_id)
        self._show()
        try:
            result = run_component(job.config, args, work_dir=attempt / "run", limits=job.limits, log=attempt / "output.log",
                                   context=job.context, allowed_input_formats=job.allowed)
        except ConfigError as err:
            # The call itself is wrong (e.g. a method that asks for the solution): nothing ran.
            record.exit_code, record.reason = EXIT_INVALID, str(err)
            log_dest.parent.mkdir(parents=True, exist_ok=True)
            log_dest.write_text(str(err) + "\n")
            return record
        finally:
            with self._lock:
                self._running.discard(job.job_id)
        log_dest.parent.mkdir(parents=True, exist_ok=True)
        if result.log.exists():
            shutil.copyfile(result.log, log_dest)
        record.exit_code = result.exit_code
        # Work paths in messages are long and machine-specific; the results folder is their root.
        record.reason = result.reason.replace(f"{self.outdir}/", "")
        record.duration_s = round(result.duration_s, 4)
        record.peak_memory_mb = round(result.peak_memory_mb, 2)
        if result.succeeded:
            record.status = "succeeded"
            # The cache entry points at the attempt's files; what the results show are published copies.
            cached_record = JobRecord.from_dict(record.to_dict())
            cached_record.outputs = {k: str(p) for k, p in result.outputs.items()}
            cached_record.write(record_path)
            record.outputs = {k: str(self._publish(job, p)) for k, p in result.outputs.items()}
            shutil.rmtree(attempt / "run", ignore_errors=True)
        return record

    def _publish(self, job: Job, path: Path) -> Path:
        dest = job.publish_dir / path.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            os.link(path, tmp)
        except OSError:
            shutil.copy2(path, tmp)
        os.replace(tmp, dest)
        return dest

    # -- many jobs ---------------------------------------------------------------------------------------
    def run(self, jobs: Iterable[Job], then: Callable[[Job, JobRecord], list[Job]] | None = None) -> list[JobRecord]:
        """Run jobs in parallel; ``then(job, record)`` may return follow-up jobs (metrics of a prediction)."""
        records: list[JobRecord] = []
        pending = list(jobs)
        with self._lock:
            self._total += len(pending)
        with cf.ThreadPoolExecutor(max_workers=self.jobs) as pool:
            futures = {pool.submit(self.run_job, j): j for j in pending}
            try:
                while futures:
                    done, _ = cf.wait(futures, return_when=cf.FIRST_COMPLETED)
                    for fut in done:
                        job = futures.pop(fut)
                        record = fut.result()
                        records.append(record)
                        with self._lock:
                            self._done += 1
                        self._show()
                        for follow in (then(job, record) if then else []):
                            with self._lock:
                                self._total += 1
                            futures[pool.submit(self.run_job, follow)] = follow
            except BaseException:
                for fut in futures:
                    fut.cancel()
                kill_active_jobs()
                raise
        self._show(final=True)
        return records

    def _show(self, final: bool = False) -> None:
        if not self.progress:
            return
        with self._lock:
            running = sorted(self._running)
            line = f"[{self._done}/{self._total}] {time.perf_counter() - self._start:6.1f}s"
            if running:
                line += f"  running: {', '.join(running[:3])}" + (f" +{len(running) - 3}" if len(running) > 3 else "")
        width = shutil.get_terminal_size((100, 20)).columns
        sys.stderr.write("\r" + line[: width - 1].ljust(width - 1) + ("\n" if final else ""))
        sys.stderr.flush()


# --- the run -------------------------------------------------------------------------------------------
def dataset_jobs(task: Task, outdir: Path, resources: dict, names: Sequence[str] | None = None) -> list[Job]:
    """Jobs of the dataset stage: one per entry of a dataset component's ``info.datasets``."""
    jobs = []
    for comp in task.of_type("dataset"):
        entries = comp.info.get("datasets") or []
        if not isinstance(entries, list):
            raise ConfigError(f"{comp.path}: info.datasets must be a list of {{id: ..., <argument>: <value>}}")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                raise ConfigError(f"{comp.path}: info.datasets[{i}] needs an id")
            if names is not None and entry["id"] not in names:
                continue
            params = {k: v for k, v in entry.items() if k != "id"}
            if "dataset_id" in {a.name for a in comp.parameters}:
                params.setdefault("dataset_id", entry["id"])
            inputs = {k: (task.root / v if not Path(v).is_absolute() else Path(v)) for k, v in params.items()
                      if k in {a.name for a in comp.file_inputs}}
            params = {k: v for k, v in params.items() if k not in inputs}
            outputs = {a.name: task.format_filename(a.format_id) for a in comp.file_outputs if a.format_id}
            jobs.append(Job(job_id=f"datasets/{entry['id']}", stage="dataset", config=comp, dataset_id=entry["id"],
                            method_id=None, inputs=inputs, outputs=outputs, params=params,
                            limits=limits_for(comp.labels, resources, where=str(comp.path)), context={}, allowed=None,
                            publish_dir=outdir / "datasets" / entry["id"]))
    return jobs


def plan_jobs(plan: dict[str, Any]) -> tuple[list[Job], Callable[[Job, JobRecord], list[Job]]]:
    """Method jobs of a plan, and the function that turns a finished prediction into metric jobs."""
    from openpert.viash_config import read_config

    outdir = Path(plan["outdir"])
    resources = plan["resources"]
    configs = {e["config"]: read_config(e["config"]) for e in [*plan["methods"], *plan["metrics"]]}
    allowed = set(plan["method_formats"])
    jobs: list[Job] = []
    for ds in plan["datasets"]:
        files = {k: Path(v) for k, v in ds["files"].items()}
        for entry in plan["methods"]:
            config = configs[entry["config"]]
            jobs.append(Job(job_id=f"{ds['id']}/{entry['id']}", stage="method", config=config, dataset_id=ds["id"],
                            method_id=entry["id"], inputs={a: files[f] for a, f in entry["inputs"].items()},
                            outputs=entry["output_names"], params=entry["params"],
                            limits=limits_for(entry["labels"], resources, where=entry["config"]), context=files,
                            allowed=allowed if entry["type"] == "method" else None,
                            publish_dir=outdir / "outputs" / ds["id"] / entry["id"]))

    def metric_jobs(job: Job, record: JobRecord) -> list[Job]:
        if job.stage != "method" or not record.succeeded:
            return []
        files = {k: Path(v) for k, v in next(d for d in plan["datasets"] if d["id"] == job.dataset_id)["files"].items()}
        (prediction,) = record.outputs.values()
        files[plan["prediction_format"]] = Path(prediction)
        out = []
        for entry in plan["metrics"]:
            config = configs[entry["config"]]
            out.append(Job(job_id=f"{job.dataset_id}/{job.method_id}/{entry['id']}", stage="metric", config=config,
                           dataset_id=job.dataset_id, method_id=job.method_id,
                           inputs={a: files[f] for a, f in entry["inputs"].items()}, outputs=entry["output_names"],
                           params=entry["params"], limits=limits_for(entry["labels"], resources, where=entry["config"]),
                           context=files, allowed=None,
                           publish_dir=outdir / "outputs" / job.dataset_id / job.method_id / entry["id"]))
        return out

    return jobs, metric_jobs


def run_benchmark(
    task: Task,
    outdir: str | Path,
    *,
    input_dir: str | Path | None = None,
    datasets: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    controls: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
    jobs: int = 1,
    resume: bool = False,
    progress: bool | None = None,
    engine: str = "local",
    profile: str = "local",
) -> dict[str, Any]:
    """Plan, run and collect one task's benchmark. Returns the ``results.json`` content.

    Parameters
    ----------
    task
        The task.
    outdir
        Results folder (the task's results go straight in it).
    input_dir
        A folder of processed datasets; without it, the task's dataset components make them.
    datasets, methods, controls, metrics
        Names to keep (``None``: all).
    jobs
        Parallel jobs (local engine).
    resume
        Reuse finished jobs of an earlier run into ``outdir``.
    engine
        ``local`` or ``nextflow``.
    profile
        Nextflow profile (``local``, ``docker``, ``singularity``, ``slurm``, ``awsbatch``, ``k8s``).
    """
    from openpert.results import write_results

    outdir = Path(outdir).resolve()
    outdir.mkdir(parents=True, exist_ok=True)
    resources = label_resources(task.root)
    local = LocalEngine(outdir, jobs=jobs, resume=resume, progress=progress)
    records: list[JobRecord] = []
    if input_dir is not None:
        found = task.find_datasets(input_dir)
        if datasets is not None:
            unknown = sorted(set(datasets) - {d.id for d in found})
            if unknown:
                raise ConfigError(f"{input_dir}: no dataset(s) {', '.join(unknown)}; found: {', '.join(d.id for d in found)}")
            found = [d for d in found if d.id in set(datasets)]
    else:
        stage = dataset_jobs(task, outdir, resources, datasets)
        if not stage:
            raise ConfigError(f"{task.dir}: no dataset component declares info.datasets; pass a folder of processed datasets with --input")
        records += local.run(stage)
        found = []
        for rec in records:
            if rec.succeeded:
                files = {}
                comp = task.component(rec.component)
                for arg in comp.file_outputs:
                    if arg.name in rec.outputs:
                        files[arg.format_id] = Path(rec.outputs[arg.name])
                found.append(Dataset(id=rec.dataset_id, files=files, dir=Path(next(iter(rec.outputs.values()))).parent))
    plan = make_plan(task, found, outdir, methods=methods, controls=controls, metrics=metrics)
    write_text_atomic(outdir / "plan.json", json.dumps(plan, indent=2))
    if engine == "local":
        method_jobs, follow = plan_jobs(plan)
        records += local.run(method_jobs, then=follow)
    elif engine == "nextflow":
        from openpert import nextflow

        completed = nextflow.run_nextflow(plan, outdir / "plan.json", main_nf=task.root / "main.nf", profile=profile,
                                          work_dir=outdir / "nextflow_work", resume=resume,
                                          log_path=outdir / "logs" / "nextflow.log")
        trace = outdir / "nextflow_trace.tsv"
        if not trace.is_file():
            raise RuntimeError(f"nextflow exited with code {completed.returncode} and wrote no trace; see {outdir / 'logs' / 'nextflow.log'}")
        records += nextflow.collect_job_records(plan, nextflow.parse_trace(trace))
    else:
        raise ConfigError(f"unknown engine {engine!r}; expected local or nextflow")
    return write_results(task, plan, records, outdir, engine=engine)


def install_signal_handlers() -> None:
    """Turn SIGTERM into KeyboardInterrupt so that a stopped run kills its jobs and exits cleanly."""

    def handler(signum, frame):  # noqa: ARG001 - signal handler signature
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
