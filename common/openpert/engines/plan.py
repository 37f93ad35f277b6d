"""The plan of a benchmark: which component runs on which files, as jobs.

A plan is the plain JSON document both engines execute (``docs/plan_json.md``): datasets, the
methods and control methods crossed with them, the metrics that score each prediction, the resource
labels, and every job fully expanded (:func:`expand_jobs`). :class:`Job` is one component run of it,
each input wired to a file or to an upstream job's output (:class:`Output`); the ``@seed<k>`` name
of a seed replicate is made by :func:`replicate_name` alone.
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
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
from openpert.engines.resource_labels import DEFAULT_PROCESSES, implied_labels, parse_label_resources
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

    A time, memory or disk the labels leave unset is the project's lowest label of it
    (:func:`~openpert.engines.resource_labels.implied_labels`), so that no job runs without limits;
    every job also gets the process limit :data:`~openpert.engines.resource_labels.DEFAULT_PROCESSES`.
    """
    values: dict[str, float] = {}
    for label in labels:
        if label not in resources:
            raise ConfigError(f"{where}: unknown resource label {label!r}; known: {sorted(resources)}")
    for label in [*implied_labels(list(labels), resources), *labels]:
        values.update(resources[label])
    cpus, gpus = values.get("cpus"), values.get("gpus")
    return Limits(time_s=values.get("time_s"), memory_mb=values.get("memory_mb"), cpus=int(cpus) if cpus else None,
                  processes=DEFAULT_PROCESSES, disk_mb=values.get("disk_mb"),
                  gpus=int(gpus) if gpus else None)


def llm_configured() -> bool:
    """Whether the environment names a language model for LLM components to use (or asks for a dry run)."""
    return bool(os.environ.get("OPENPERT_LLM_BASE_URL") or os.environ.get("OPENPERT_LLM_MODEL")
                or os.environ.get("OPENPERT_LLM_BACKEND", "").lower() == "dry_run")


def llm_settings(llm_datasets: Sequence[str] | None = None) -> dict[str, Any] | None:
    """What a run tells its language-model components, as the plan records it (``None`` without a model).

    Parameters
    ----------
    llm_datasets
        Shell patterns of the dataset ids the language-model components run on (``--llm-datasets``);
        ``None``: every dataset.

    Returns
    -------
    dict or None
        ``model`` (``$OPENPERT_LLM_MODEL``; ``None``: the server's first), ``model_sha256``
        (``$OPENPERT_LLM_MODEL_SHA256``), ``max_tokens`` (``$OPENPERT_LLM_MAX_TOKENS``, the cap on
        each completion of a check of the path on a small model) and ``datasets``. The website
        shows them beside the language-model use, so that a small model's scores are never read as
        a result of the method's own model.
    """
    if not llm_configured():
        return None
    cap = os.environ.get("OPENPERT_LLM_MAX_TOKENS") or None
    if cap is not None and not (cap.isdigit() and int(cap) > 0):
        raise ConfigError(f"$OPENPERT_LLM_MAX_TOKENS must be a positive whole number of tokens, got {cap!r}")
    return {"model": os.environ.get("OPENPERT_LLM_MODEL") or None,
            "model_sha256": os.environ.get("OPENPERT_LLM_MODEL_SHA256") or None,
            "max_tokens": None if cap is None else int(cap),
            "datasets": None if llm_datasets is None else list(llm_datasets)}


def runs_on(plan: dict[str, Any], entry: dict[str, Any], dataset_id: str) -> bool:
    """Whether a plan's method or metric entry runs on a dataset.

    Every component runs on every dataset, but a language-model component of a run given
    ``--llm-datasets`` runs only on the datasets whose id matches one of its patterns.
    """
    patterns = (plan.get("llm") or {}).get("datasets")
    return not entry.get("needs_llm") or patterns is None or _matches(patterns, dataset_id)


def _matches(patterns: Sequence[str], dataset_id: str) -> bool:
    return any(fnmatch.fnmatchcase(dataset_id, pattern) for pattern in patterns)


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
        "params": {a.name: a.default for a in config.parameters if a.default is not None},
        "labels": config.labels,
        "seeds": config.seeds,
        "image": _component_image(config),
        "digest": component_digest(config),
        "needs_llm": needs_llm(config),
    }


def _select(components: list[ComponentConfig], names: Sequence[str] | None, what: str, task: Task) -> list[ComponentConfig]:
    if names is None:
        return components
    known = {c.name for c in components}
    unknown = sorted(set(names) - known)
    if unknown:
        raise ConfigError(f"{task.dir}: unknown {what}: {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return [c for c in components if c.name in set(names)]


def make_plan(task: Task, datasets: Sequence[Dataset], outdir: Path, *, methods: Sequence[str] | None = None,
              controls: Sequence[str] | None = None, metrics: Sequence[str] | None = None,
              dataset_stage: Sequence[Job] = (), llm_datasets: Sequence[str] | None = None) -> dict[str, Any]:
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
        Dataset jobs (:func:`dataset_jobs`); the methods run on what they make too.
    llm_datasets
        Shell patterns of the dataset ids the language-model components run on (``--llm-datasets``;
        :func:`runs_on`); ``None``: every dataset. Patterns that match no dataset of a task with
        such components are an error, as is giving them with no model configured.

    Returns
    -------
    The plan: its components (``methods``, ``metrics``, ``loaders``), the ready-made ``datasets``,
    and ``jobs``, every job fully expanded (:func:`expand_jobs`, :meth:`Job.entry`).
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
    llm = llm_settings(llm_datasets)
    if llm_datasets is not None:
        if llm is None:
            raise ConfigError("--llm-datasets chooses where the language-model components run, but no model is "
                              "configured: set OPENPERT_LLM_BASE_URL (scripts/serve_llm.sh, docs/llm.md)")
        ids = [d.id for d in datasets] + [j.dataset_id for j in dataset_stage if j.stage == "dataset"]
        if any(needs_llm(c) for c in [*chosen, *scorers]) and not any(_matches(llm_datasets, i) for i in ids):
            raise ConfigError(f"{task.dir}: no dataset matches --llm-datasets {' '.join(llm_datasets)} "
                              f"(the datasets: {', '.join(ids)}), so its language-model components would run nowhere")
    if not scorers:
        raise ConfigError(f"{task.dir}: no metrics")
    # A method that declares an input it may not read stays in the plan: its job is refused by the
    # runner and recorded as failed with the reason, so one bad contribution cannot stop a run.
    plan = {
        "plan_version": PLAN_VERSION,
        "task": task.name,
        "task_dir": str(task.dir),
        "repo_root": str(task.root),
        "outdir": str(Path(outdir).resolve()),
        "datasets": [{"id": d.id, "files": {k: str(v) for k, v in d.files.items()}} for d in datasets],
        "shared_data_argument": SHARED_DATA_ARGUMENT,
        "methods": [_component_entry(task, c) for c in chosen],
        "metrics": [_component_entry(task, c) for c in scorers],
        "loaders": [_component_entry(task, c) for c in {str(j.config.path): j.config for j in dataset_stage}.values()],
        "skipped": skipped,
        "prediction_format": task.prediction_format,
        "method_formats": sorted(task.method_formats),
        "resources": label_resources(task.root),
        "llm": llm,
    }
    configs = {str(c.path): c for c in [*chosen, *scorers]}
    plan["jobs"] = [job.entry() for job in expand_jobs(plan, configs, dataset_stage)]
    return plan


@dataclass(frozen=True)
class Output:
    """An input wired to what an upstream job writes: the file of its output argument ``arg``."""

    job_id: str
    arg: str


#: What a job's input (or a file of its context) is wired to: a file, or an upstream job's output.
Source = Path | Output


@dataclass
class Job:
    """One component run within a benchmark, fully expanded: the plan's unit (``docs/plan_json.md``).

    ``inputs`` and ``context`` (the dataset's files by format, for the check of what a method may
    read) are files or :class:`Output` of the job ``after`` (or of the job before that); an engine
    runs a job once ``after`` has succeeded, with those resolved (:meth:`resolved`).
    """

    job_id: str
    stage: str
    config: ComponentConfig
    dataset_id: str
    method_id: str | None
    inputs: dict[str, Source]
    outputs: dict[str, str]
    params: dict[str, Any]
    limits: Limits
    context: dict[str, Source]
    allowed: set[str] | None
    publish_dir: Path
    seed: int | None = None
    after: str | None = None

    def key(self, component_hash: str) -> str:
        """The cache key of the job: its component, parameters, the content of its inputs and its outputs."""
        inputs = {name: file_digest(path) for name, path in sorted(self.inputs.items())}
        return hash_text(component_hash, json.dumps(self.params, sort_keys=True, default=str),
                         json.dumps(inputs, sort_keys=True), json.dumps(self.outputs, sort_keys=True))

    def resolved(self, outputs: Callable[[str], dict[str, str]]) -> Job:
        """The job with every :class:`Output` replaced by the file it names.

        ``outputs(job_id)`` gives the output files of a finished job by argument.

        Raises
        ------
        ConfigError
            When an upstream job did not write the output an input is wired to (naming both).
        """
        def file_of(source: Source) -> Path:
            if isinstance(source, Path):
                return source
            written = outputs(source.job_id)
            if source.arg not in written:
                raise ConfigError(f"job {self.job_id}: upstream job {source.job_id} wrote no --{source.arg}")
            return Path(written[source.arg])

        return replace(self, inputs={k: file_of(v) for k, v in self.inputs.items()},
                       context={k: file_of(v) for k, v in self.context.items()})

    def entry(self) -> dict[str, Any]:
        """The job as the plan's JSON holds it (:func:`job_from_entry` reads it back)."""
        def source(value: Source) -> dict[str, str]:
            return {"file": str(value)} if isinstance(value, Path) else {"job": value.job_id, "output": value.arg}

        return {
            "id": self.job_id, "stage": self.stage, "component": self.config.name, "component_type": self.config.type,
            "config": str(self.config.path),
            "dataset_id": self.dataset_id, "method_id": self.method_id, "seed": self.seed, "after": self.after,
            "inputs": {k: source(v) for k, v in sorted(self.inputs.items())},
            "context": {k: source(v) for k, v in sorted(self.context.items())},
            "allowed": sorted(self.allowed) if self.allowed is not None else None,
            "outputs": dict(self.outputs), "params": dict(self.params), "limits": asdict(self.limits),
            "publish_dir": str(self.publish_dir),
        }


def job_from_entry(entry: dict[str, Any], config_at: Callable[[str], ComponentConfig] = read_config) -> Job:
    """A :class:`Job` from its plan entry (:meth:`Job.entry`)."""
    def source(value: dict[str, str]) -> Source:
        return Path(value["file"]) if "file" in value else Output(value["job"], value["output"])

    return Job(job_id=entry["id"], stage=entry["stage"], config=config_at(entry["config"]),
               dataset_id=entry["dataset_id"], method_id=entry["method_id"],
               inputs={k: source(v) for k, v in entry["inputs"].items()}, outputs=dict(entry["outputs"]),
               params=dict(entry["params"]), limits=Limits(**entry["limits"]),
               context={k: source(v) for k, v in entry["context"].items()},
               allowed=set(entry["allowed"]) if entry["allowed"] is not None else None,
               publish_dir=Path(entry["publish_dir"]), seed=entry["seed"], after=entry["after"])


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
HARNESS_ENTRY_KEYS = ("id", "large", "build")


def build_entries(task: Task) -> dict[str, tuple[ComponentConfig, dict[str, Any]]]:
    """Every ``info.builds`` entry of the task's dataset components, by build id.

    Raises
    ------
    ConfigError
        When two entries share an id (naming both components).
    """
    builds: dict[str, tuple[ComponentConfig, dict[str, Any]]] = {}
    for comp in task.of_type("dataset"):
        for entry in comp.build_entries:
            if entry["id"] in builds:
                raise ConfigError(f"{comp.path}: info.builds {entry['id']} is also built by {builds[entry['id']][0].path}")
            builds[entry["id"]] = (comp, entry)
    return builds


def build_failed(build_job_id: str, reason: str | None) -> str:
    """Why a dataset job cut from a build did not run: the build failed (both engines record it so)."""
    return f"its build {build_job_id} failed: {reason or 'no reason recorded'}"


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


def planned_builds(task: Task, entries: Sequence[tuple[ComponentConfig, dict[str, Any]]]
                   ) -> dict[str, tuple[ComponentConfig, dict[str, Any]]]:
    """The builds the dataset ``entries`` are cut from (``build: <id>``), by build id, each once.

    Raises
    ------
    ConfigError
        When an entry names a build no component declares (naming the entry and the known builds).
    """
    known = build_entries(task)
    used: dict[str, tuple[ComponentConfig, dict[str, Any]]] = {}
    for comp, entry in entries:
        if "build" not in entry:
            continue
        if entry["build"] not in known:
            raise ConfigError(f"{comp.path}: info.datasets {entry['id']}: build {entry['build']!r} is no info.builds id "
                              f"of the task; known: {', '.join(sorted(known)) or 'none'}")
        used[entry["build"]] = known[entry["build"]]
    return used


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

    An entry with ``build: <id>`` is cut from that ``info.builds`` entry: the build runs once, as
    job ``builds/<id>`` (stage ``build``, listed first), and the entry's job follows it, each of its
    inputs of a format the build writes wired to the build's output.

    ``data_folders`` maps a dataset id to the read-only view of the public files it reads
    (:func:`openpert.data.fetching.dataset_views`): its ``--shared_data`` input, and where
    ``{data: <store path>}`` inputs point. Without it (a task with no data manifest), loaders get
    the project's shared data folder when it exists.
    """
    entries = dataset_entries(task, names, include_large=include_large)[0]
    jobs: list[Job] = []
    built: dict[str, Job] = {}
    for build_id, (comp, entry) in planned_builds(task, entries).items():
        inputs, params = _entry_files(task, comp, entry, data_folders)
        built[build_id] = Job(job_id=f"builds/{build_id}", stage="build", config=comp, dataset_id=build_id,
                              method_id=None, inputs=inputs, outputs=_output_names(task, comp), params=params,
                              limits=limits_for(comp.labels, resources, where=str(comp.path)), context={},
                              allowed=None, publish_dir=outdir / "builds" / build_id)
        jobs.append(built[build_id])
    for comp, entry in entries:
        inputs, params = _entry_files(task, comp, entry, data_folders)
        if "dataset_id" in {a.name for a in comp.parameters}:
            params.setdefault("dataset_id", entry["id"])
        build = built.get(entry.get("build", ""))
        if build is not None:
            made = {a.format_id: Output(build.job_id, a.name) for a in build.config.file_outputs if a.format_id}
            reads = {a.name: made[a.format_id] for a in comp.file_inputs if a.format_id in made}
            if not reads:
                raise ConfigError(f"{comp.path}: info.datasets {entry['id']}: no input of the formats build "
                                  f"{build.dataset_id} writes ({', '.join(sorted(made))})")
            inputs = {**inputs, **reads}
        jobs.append(Job(job_id=f"datasets/{entry['id']}", stage="dataset", config=comp, dataset_id=entry["id"],
                        method_id=None, inputs=inputs, outputs=_output_names(task, comp), params=params,
                        limits=limits_for(comp.labels, resources, where=str(comp.path)), context={}, allowed=None,
                        publish_dir=outdir / "datasets" / entry["id"], after=build.job_id if build else None))
    return jobs


def _output_names(task: Task, comp: ComponentConfig) -> dict[str, str]:
    """The file name of each output of a dataset or build component (its format's)."""
    return {a.name: task.format_filename(a.format_id) for a in comp.file_outputs if a.format_id}


def _entry_files(task: Task, comp: ComponentConfig, entry: dict[str, Any], data_folders: dict[str, Path] | None
                 ) -> tuple[dict[str, Source], dict[str, Any]]:
    """The file inputs (its ``--shared_data`` view and ``{data: ...}`` files) and parameters of a dataset or build entry."""
    params = {k: v for k, v in entry.items() if k not in HARNESS_ENTRY_KEYS}
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
    return {**shared, **inputs}, params


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
        ids = [*planned_builds(task, entries), *(e["id"] for _, e in entries)]
        data_folders = dataset_views(task.name, manifest, ids, store, sources, jobs=jobs, stream=stream)
    return dataset_jobs(task, outdir, resources, names, data_folders=data_folders, include_large=include_large)


def replicate_name(method_id: str, seed: int | None) -> str:
    """The name a method's run takes in job ids and output folders: ``<method>@seed<k>`` for a seed replicate."""
    return method_id if seed is None else f"{method_id}@seed{seed}"


def expand_jobs(plan: dict[str, Any], configs: dict[str, ComponentConfig], stage: Sequence[Job] = ()) -> list[Job]:
    """Every job of a plan, each input wired to a file or to an upstream job's output.

    The dataset jobs ``stage`` come first; each dataset (the plan's ready-made ones, then those
    ``stage`` makes) gets every method, one job per seed of a method entry with ``seeds: [0, ...,
    n-1]`` (with ``--seed k``: job ``<dataset>/<method>@seed<k>``, published in
    ``outputs/<dataset>/<method>@seed<k>/``), each followed by the metric jobs that score it
    (``<dataset>/<method>@seed<k>/<metric>``). Every job of a replicate keeps ``method_id`` the
    method's name and carries ``seed``, so that results average the replicates.

    Raises
    ------
    ConfigError
        When a component's input has no file of its format (naming the job and the argument).
    """
    outdir = Path(plan["outdir"])
    resources = plan["resources"]
    allowed = set(plan["method_formats"])

    def wire(job_id: str, entry: dict[str, Any], sources: dict[str, Source]) -> dict[str, Source]:
        missing = sorted(arg for arg, fmt in entry["inputs"].items() if fmt not in sources)
        if missing:
            raise ConfigError(f"job {job_id}: nothing of format {entry['inputs'][missing[0]]!r} for --{missing[0]} "
                              f"of {entry['config']}")
        return {arg: sources[fmt] for arg, fmt in entry["inputs"].items()}

    def limits(entry: dict[str, Any]) -> Limits:
        return limits_for(entry["labels"], resources, where=entry["config"])

    jobs: list[Job] = list(stage)
    datasets: list[tuple[str, dict[str, Source], str | None]] = [
        (d["id"], {k: Path(v) for k, v in d["files"].items()}, None) for d in plan["datasets"]]
    for job in [j for j in stage if j.stage == "dataset"]:
        made = {a.format_id: Output(job.job_id, a.name) for a in job.config.file_outputs if a.format_id}
        datasets.append((job.dataset_id, made, job.job_id))
    for dataset_id, files, loader in datasets:
        for entry in [e for e in plan["methods"] if runs_on(plan, e, dataset_id)]:
            for seed in entry.get("seeds") or [None]:
                name = replicate_name(entry["id"], seed)
                job_id = f"{dataset_id}/{name}"
                params = dict(entry["params"]) if seed is None else {**entry["params"], "seed": int(seed)}
                method = Job(job_id=job_id, stage="method", config=configs[entry["config"]], dataset_id=dataset_id,
                             method_id=entry["id"], inputs=wire(job_id, entry, files), outputs=entry["output_names"],
                             params=params, limits=limits(entry), context=files,
                             allowed=allowed if entry["type"] == "method" else None,
                             publish_dir=outdir / "outputs" / dataset_id / name, seed=seed, after=loader)
                jobs.append(method)
                scored = {**files, **{fmt: Output(job_id, arg) for arg, fmt in entry["outputs"].items()}}
                for metric in [m for m in plan["metrics"] if runs_on(plan, m, dataset_id)]:
                    metric_id = f"{job_id}/{metric['id']}"
                    jobs.append(Job(job_id=metric_id, stage="metric", config=configs[metric["config"]],
                                    dataset_id=dataset_id, method_id=entry["id"], inputs=wire(metric_id, metric, scored),
                                    outputs=metric["output_names"], params=dict(metric["params"]), limits=limits(metric),
                                    context=scored, allowed=None, publish_dir=method.publish_dir / metric["id"],
                                    seed=seed, after=job_id))
    return jobs


def plan_jobs(plan: dict[str, Any], config_at: Callable[[str], ComponentConfig] = read_config) -> list[Job]:
    """The jobs of a plan (its ``jobs`` list, :func:`expand_jobs`), read back.

    ``config_at`` turns a plan's config path into the config (default: read it; a task's
    :meth:`~openpert.config.task.Task.config_at` gives the configs it has read).
    """
    configs: dict[str, ComponentConfig] = {}

    def config(path: str) -> ComponentConfig:
        if path not in configs:
            configs[path] = config_at(path)
        return configs[path]

    return [job_from_entry(entry, config) for entry in plan["jobs"]]
