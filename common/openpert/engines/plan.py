"""The plan of a benchmark: which component runs on which files, as jobs.

A plan is the plain JSON document both engines execute (``docs/plan_json.md``): datasets, the
methods and control methods crossed with them, the metrics that score each prediction, and the
resource labels. :class:`Job` is one component run of it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from openpert.config.formats import FormatError
from openpert.config.project import SHARED_DATA_ARGUMENT, shared_data_input
from openpert.config.task import Dataset, Task
from openpert.config.viash import PROJECT_FILE, ComponentConfig, ConfigError, read_config
from openpert.data.fetching import Sources, dataset_views, sources_from_environment
from openpert.data.manifest import task_manifest
from openpert.data.store import DataStore, default_store_dir
from openpert.engines.cache_keys import component_digest, file_digest
from openpert.engines.resource_labels import DEFAULT_DISK_MB, DEFAULT_PROCESSES, parse_label_resources
from openpert.files import hash_text, write_text_atomic
from openpert.images import ImageError
from openpert.images.naming import component_image_name
from openpert.run.process import Limits
from openpert.run.records import EXIT_INVALID, JobRecord
from openpert.run.sandbox import needs_llm

PLAN_VERSION = 1


def label_resources(root: Path) -> dict[str, dict[str, float]]:
    """Resource limits per label, from ``_viash.yaml``'s ``config_mods``."""
    return parse_label_resources(Path(root) / PROJECT_FILE)


def limits_for(labels: Sequence[str], resources: dict[str, dict[str, float]], *, where: str) -> Limits:
    """Combine a component's labels into limits; an unknown label is an error naming the component.

    Every job also gets the process limit :data:`~openpert.engines.resource_labels.DEFAULT_PROCESSES`,
    and a disk limit of :data:`~openpert.engines.resource_labels.DEFAULT_DISK_MB` unless a label sets one.
    """
    values: dict[str, float] = {}
    for label in labels:
        if label not in resources:
            raise ConfigError(f"{where}: unknown resource label {label!r}; known: {sorted(resources)}")
        values.update(resources[label])
    cpus, gpus = values.get("cpus"), values.get("gpus")
    return Limits(time_s=values.get("time_s"), memory_mb=values.get("memory_mb"), cpus=int(cpus) if cpus else None,
                  processes=DEFAULT_PROCESSES, disk_mb=values.get("disk_mb", DEFAULT_DISK_MB),
                  gpus=int(gpus) if gpus else None)


def llm_configured() -> bool:
    """Whether the environment names a language model for LLM components to use (or asks for a dry run)."""
    return bool(os.environ.get("OPENPERT_LLM_BASE_URL") or os.environ.get("OPENPERT_LLM_MODEL")
                or os.environ.get("OPENPERT_LLM_BACKEND", "").lower() == "dry_run")


def _component_image(config: ComponentConfig) -> str:
    """The image a component runs in on container executors (as ``openpert images`` names it)."""
    try:
        return str(component_image_name(config))
    except ImageError as err:
        raise ConfigError(f"{config.path}: cannot name its image: {err}") from None


def _component_entry(task: Task, config: ComponentConfig) -> dict[str, Any]:
    # image and digest: the Nextflow engine runs the job in that image and hashes the digest, so
    # that an edited script, resource, task library or pertsci re-runs it under -resume.
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
        "seeds": config.seeds,
        "image": _component_image(config),
        "digest": component_digest(config),
        "needs_llm": needs_llm(config),
    }


def _dataset_job_entry(task: Task, job: Job) -> dict[str, Any]:
    """A dataset job of the plan: the loader, its parameters and inputs, where it publishes."""
    return {
        "id": job.dataset_id,
        "job_id": job.job_id,
        "component": _component_entry(task, job.config),
        "params": {k: v for k, v in job.params.items() if v is not None},
        "inputs": {name: str(path) for name, path in job.inputs.items()},
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
    dataset_stage: Sequence[Job] = (),
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
    dataset_stage
        Dataset jobs (:func:`dataset_jobs`) that the engine runs itself, before the methods (the
        Nextflow engine runs the whole benchmark as one workflow); their datasets join ``datasets``.
    """
    if not datasets and not dataset_stage:
        raise ConfigError(f"{task.dir}: no datasets to benchmark")
    chosen = _select(task.of_type("control_method"), controls, "control methods", task)
    chosen += _select(task.of_type("method"), methods, "methods", task)
    scorers = _select(task.of_type("metric"), metrics, "metrics", task)
    skipped = []
    if not llm_configured():
        # Without a model to talk to, LLM components could only fail; they are left out and listed.
        for comp in [c for c in [*chosen, *scorers] if needs_llm(c)]:
            entry = {"id": comp.name, "type": comp.type,
                     "reason": "needs a language model: set OPENPERT_LLM_BASE_URL (or OPENPERT_LLM_MODEL for vLLM in process)"}
            if comp.type == "metric":
                # The metrics it would have computed, so that the results can say why they have no value.
                entry["metrics"] = [{"id": m.get("name"), "label": m.get("label") or m.get("name")} for m in comp.metrics]
            skipped.append(entry)
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
        "dataset_jobs": [_dataset_job_entry(task, job) for job in dataset_stage],
        "shared_data_argument": SHARED_DATA_ARGUMENT,
        "methods": [_component_entry(task, c) for c in chosen],
        "metrics": [_component_entry(task, c) for c in scorers],
        "skipped": skipped,
        "prediction_format": task.prediction_format,
        "method_formats": sorted(task.method_formats),
        "resources": label_resources(task.root),
    }


class Job:
    """One component run within a benchmark."""

    def __init__(self, *, job_id: str, stage: str, config: ComponentConfig, dataset_id: str, method_id: str | None,
                 inputs: dict[str, Path], outputs: dict[str, str], params: dict[str, Any], limits: Limits,
                 context: dict[str, Path], allowed: set[str] | None, publish_dir: Path, seed: int | None = None):
        self.job_id, self.stage, self.config = job_id, stage, config
        self.dataset_id, self.method_id, self.seed = dataset_id, method_id, seed
        self.inputs, self.outputs, self.params = inputs, outputs, params
        self.limits, self.context, self.allowed, self.publish_dir = limits, context, allowed, publish_dir

    def key(self, component_hash: str) -> str:
        inputs = {name: file_digest(path) for name, path in sorted(self.inputs.items())}
        return hash_text(component_hash, json.dumps(self.params, sort_keys=True, default=str),
                         json.dumps(inputs, sort_keys=True), json.dumps(self.outputs, sort_keys=True))


def check_datasets(task: Task, datasets: Sequence[Dataset], outdir: Path, *, jobs: int = 1) -> tuple[list[Dataset], list[JobRecord]]:
    """Validate ready-made datasets (``--input``) against the task's file formats.

    A dataset with a file that cannot be read or does not match its format is left out of the
    plan and recorded as a failed dataset job (``datasets/<id>``) naming the file and the problem,
    so that one corrupt file costs that dataset only, not the run.

    Parameters
    ----------
    task
        The task whose ``api/file_*.yaml`` formats apply.
    datasets
        The datasets found in the input folder.
    outdir
        The run's results folder; each failure's reason is also written to its log there.
    jobs
        How many datasets are checked at once.

    Returns
    -------
    The datasets that passed, in their order, and a failed record per dataset that did not.
    """
    formats = task.file_formats

    def problem(ds: Dataset) -> str:
        for format_id, path in ds.files.items():
            fmt = formats.get(format_id)
            if fmt is None:
                continue
            try:
                fmt.validate(path, ds.files)
            except (FormatError, OSError) as err:
                return f"invalid dataset file: {err}"
        return ""

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        problems = list(pool.map(problem, datasets))
    good, failed = [], []
    for ds, reason in zip(datasets, problems):
        if not reason:
            good.append(ds)
            continue
        record = JobRecord(job_id=f"datasets/{ds.id}", stage="dataset", component="input", component_type="dataset",
                           dataset_id=ds.id, exit_code=EXIT_INVALID, reason=reason)
        log = Path(outdir) / "logs" / "datasets" / f"{ds.id}.log"
        write_text_atomic(log, reason + "\n")
        record.log = str(log.relative_to(outdir))
        failed.append(record)
    return good, failed


def ready_datasets(task: Task, input_dir: Path, outdir: Path, names: Sequence[str] | None = None, *,
                   jobs: int = 1) -> tuple[list[Dataset], list[JobRecord]]:
    """The processed datasets of ``input_dir`` to benchmark, checked (:func:`check_datasets`).

    Parameters
    ----------
    task
        The task.
    input_dir
        A folder of processed datasets (``--input``).
    outdir
        The run's results folder (logs of unusable datasets).
    names
        Dataset ids to keep (``None``: all); an id not found is an error naming the folder.
    jobs
        How many datasets are checked at once.

    Returns
    -------
    The usable datasets, and a failed record per unusable one (a corrupt file costs its dataset,
    not the run).
    """
    found = task.find_datasets(input_dir)
    if names is not None:
        unknown = sorted(set(names) - {d.id for d in found})
        if unknown:
            raise ConfigError(f"{input_dir}: no dataset(s) {', '.join(unknown)}; found: {', '.join(d.id for d in found)}")
        found = [d for d in found if d.id in set(names)]
    return check_datasets(task, found, outdir, jobs=jobs)


#: Keys of an ``info.datasets`` entry that are the harness's, not parameters of the component.
HARNESS_ENTRY_KEYS = ("id", "large")


def dataset_entries(task: Task, names: Sequence[str] | None = None, *, include_large: bool = False
                    ) -> tuple[list[tuple[ComponentConfig, dict[str, Any]]], list[str]]:
    """The ``info.datasets`` entries a benchmark plans, and the large ones it leaves out.

    An entry marked ``large: true`` (a multi-GB download, hours of work) is planned only with
    ``include_large`` or when named in ``names``; the ids left out are returned so that the run
    says so.
    """
    chosen, left_out = [], []
    for comp in task.of_type("dataset"):
        for entry in comp.dataset_entries:
            if names is not None and entry["id"] not in names:
                continue
            if entry.get("large") and not include_large and names is None:
                left_out.append(entry["id"])
                continue
            chosen.append((comp, entry))
    return chosen, left_out


def _data_input(comp: ComponentConfig, root: Path, entry: dict, name: str, value: Any, data_folder: Path | None) -> Path:
    """A file input of a dataset entry: a repository path, or ``{data: <store path>}`` in the dataset's data."""
    if not isinstance(value, dict):
        return Path(value) if Path(value).is_absolute() else root / value
    if set(value) != {"data"} or not isinstance(value["data"], str):
        raise ConfigError(f"{comp.path}: info.datasets {entry['id']}: --{name} must be a path or {{data: <store path>}}")
    if data_folder is None or not (data_folder / value["data"]).is_file():
        raise ConfigError(f"{comp.path}: info.datasets {entry['id']}: --{name} reads {value['data']}, which the task's "
                          f"api/data_manifest.yaml does not give this dataset (add it, with the dataset id in its datasets)")
    return data_folder / value["data"]


def dataset_jobs(task: Task, outdir: Path, resources: dict, names: Sequence[str] | None = None, *,
                 data_folders: dict[str, Path] | None = None, include_large: bool = False) -> list[Job]:
    """Jobs of the dataset stage: one per planned entry of a dataset component's ``info.datasets``.

    ``data_folders`` maps a dataset id to the read-only view of the public files it reads
    (:func:`openpert.data.fetching.dataset_views`): its ``--shared_data`` input, and where
    ``{data: <store path>}`` inputs point. Without it (a task with no data manifest), loaders get
    the project's shared data folder when it exists.
    """
    jobs = []
    for comp, entry in dataset_entries(task, names, include_large=include_large)[0]:
        params = {k: v for k, v in entry.items() if k not in HARNESS_ENTRY_KEYS}
        if "dataset_id" in {a.name for a in comp.parameters}:
            params.setdefault("dataset_id", entry["id"])
        if data_folders is None:
            shared = shared_data_input(comp, task.root)
            data_folder = shared.get(SHARED_DATA_ARGUMENT)
        else:
            data_folder = data_folders.get(entry["id"])
            shared = {SHARED_DATA_ARGUMENT: data_folder} if data_folder is not None and \
                SHARED_DATA_ARGUMENT in {a.name for a in comp.file_inputs} else {}
        file_args = {a.name for a in comp.file_inputs}
        inputs = {k: _data_input(comp, task.root, entry, k, v, data_folder) for k, v in params.items() if k in file_args}
        params = {k: v for k, v in params.items() if k not in inputs}
        inputs = {**shared, **inputs}
        outputs = {a.name: task.format_filename(a.format_id) for a in comp.file_outputs if a.format_id}
        jobs.append(Job(job_id=f"datasets/{entry['id']}", stage="dataset", config=comp, dataset_id=entry["id"],
                        method_id=None, inputs=inputs, outputs=outputs, params=params,
                        limits=limits_for(comp.labels, resources, where=str(comp.path)), context={}, allowed=None,
                        publish_dir=outdir / "datasets" / entry["id"]))
    return jobs


def dataset_stage(task: Task, outdir: Path, resources: dict, names: Sequence[str] | None = None, *,
                  include_large: bool = False, store: DataStore | None = None, sources: Sources | None = None,
                  jobs: int = 4, stream: IO[str] | None = sys.stderr) -> list[Job]:
    """The dataset jobs of a benchmark, with the public files they read fetched and given to each.

    Everything a loader reads is fetched into the store (``$OPENPERT_DATA``) before any job starts,
    so that jobs need no network; each dataset job gets a read-only view of its own files. Large
    datasets left out are said on ``stream``.

    Raises
    ------
    FetchError
        When a file cannot be had (nothing has run yet).
    """
    entries, left_out = dataset_entries(task, names, include_large=include_large)
    if left_out and stream is not None:
        stream.write(f"{task.name}: large datasets left out (--include-large plans them): {', '.join(left_out)}\n")
    manifest = task_manifest(task.dir)
    data_folders = None
    if manifest:
        store = store or DataStore(default_store_dir())
        sources = sources or sources_from_environment(task.root)
        data_folders = dataset_views(task.name, manifest, [e["id"] for _, e in entries], store, sources,
                                     jobs=jobs, stream=stream)
    return dataset_jobs(task, outdir, resources, names, data_folders=data_folders, include_large=include_large)


def replicate_name(method_id: str, seed: int | None) -> str:
    """The name a method's run takes in job ids and output folders: ``<method>@seed<k>`` for a seed replicate."""
    return method_id if seed is None else f"{method_id}@seed{seed}"


def plan_jobs(plan: dict[str, Any], config_at: Callable[[str], ComponentConfig] = read_config
              ) -> tuple[list[Job], Callable[[Job, JobRecord], list[Job]]]:
    """Method jobs of a plan, and the function that turns a finished prediction into metric jobs.

    A method entry with ``seeds: [0, ..., n-1]`` runs once per seed and dataset, with ``--seed k``:
    job ``<dataset>/<method>@seed<k>``, published in ``outputs/<dataset>/<method>@seed<k>/``, and
    its metric jobs ``<dataset>/<method>@seed<k>/<metric>``. Every such job keeps ``method_id`` the
    method's name and carries ``seed`` so that results average the replicates.

    ``config_at`` turns a plan's config path into the config (default: read it; a task's
    :meth:`~openpert.config.task.Task.config_at` gives the configs it has read).
    """
    outdir = Path(plan["outdir"])
    resources = plan["resources"]
    configs = {e["config"]: config_at(e["config"]) for e in [*plan["methods"], *plan["metrics"]]}
    allowed = set(plan["method_formats"])
    jobs: list[Job] = []
    for ds in plan["datasets"]:
        files = {k: Path(v) for k, v in ds["files"].items()}
        for entry in plan["methods"]:
            config = configs[entry["config"]]
            seeds = entry.get("seeds") or [None]
            for seed in seeds:
                name = replicate_name(entry["id"], seed)
                params = dict(entry["params"]) if seed is None else {**entry["params"], "seed": int(seed)}
                jobs.append(Job(job_id=f"{ds['id']}/{name}", stage="method", config=config, dataset_id=ds["id"],
                                method_id=entry["id"], inputs={a: files[f] for a, f in entry["inputs"].items()},
                                outputs=entry["output_names"], params=params,
                                limits=limits_for(entry["labels"], resources, where=entry["config"]), context=files,
                                allowed=allowed if entry["type"] == "method" else None,
                                publish_dir=outdir / "outputs" / ds["id"] / name, seed=seed))

    def metric_jobs(job: Job, record: JobRecord) -> list[Job]:
        if job.stage != "method" or not record.succeeded:
            return []
        files = {k: Path(v) for k, v in next(d for d in plan["datasets"] if d["id"] == job.dataset_id)["files"].items()}
        (prediction,) = record.outputs.values()
        files[plan["prediction_format"]] = Path(prediction)
        name = replicate_name(job.method_id, job.seed)
        out = []
        for entry in plan["metrics"]:
            config = configs[entry["config"]]
            out.append(Job(job_id=f"{job.dataset_id}/{name}/{entry['id']}", stage="metric", config=config,
                           dataset_id=job.dataset_id, method_id=job.method_id,
                           inputs={a: files[f] for a, f in entry["inputs"].items()}, outputs=entry["output_names"],
                           params=entry["params"], limits=limits_for(entry["labels"], resources, where=entry["config"]),
                           context=files, allowed=None,
                           publish_dir=outdir / "outputs" / job.dataset_id / name / entry["id"], seed=job.seed))
        return out

    return jobs, metric_jobs
