"""One task's benchmark, on either engine: plan it, fetch its data, run its jobs, collect the results.

The engines differ only in how they run the plan's jobs (:class:`Engine`: jobs in, records out):
the local engine runs them here (:class:`~openpert.engines.local.LocalEngine`), the Nextflow
engine hands the plan to ``main.nf`` and reads its trace back
(:class:`~openpert.engines.nextflow.NextflowEngine`). Everything else (which datasets, the plan,
the datasets the loaders made, the dataset digests of the records, ``results.json``) is here, once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from openpert.config.task import Task
from openpert.config.viash import ConfigError
from openpert.engines.plan import Job, dataset_stage, label_resources, make_plan, plan_jobs, ready_datasets
from openpert.files import write_text_atomic
from openpert.run.records import JobRecord

if TYPE_CHECKING:
    from openpert.engines.local import JobSlots


class Engine(Protocol):
    """What runs a plan's jobs: one record per job that ran (or should have run and did not)."""

    def run_plan(self, plan: dict[str, Any], jobs: list[Job]) -> list[JobRecord]:
        """Run ``jobs`` (the plan's ``jobs``, read back) and return their records."""


def produced_datasets(plan: dict[str, Any], records: Iterable[JobRecord]) -> list[dict[str, Any]]:
    """The datasets the plan's dataset jobs made, as plan entries ``{"id", "files": {format: path}}``.

    Files are the published outputs of each succeeded dataset job, keyed by the format of the
    output argument that wrote them (from the method jobs' wiring: each names the job's output it
    reads by format). They come in the plan's order of dataset jobs, not the order the jobs
    finished in, so that results.json is the same however many jobs ran at once.
    """
    formats: dict[str, dict[str, str]] = {}
    for entry in plan["jobs"]:
        for fmt, source in entry["context"].items():
            if "job" in source:
                formats.setdefault(source["job"], {})[source["output"]] = fmt
    succeeded = {r.job_id: r for r in records if r.stage == "dataset" and r.succeeded and r.job_id in formats}
    made = []
    for job_id in [e["id"] for e in plan["jobs"] if e["id"] in succeeded]:
        record, by_arg = succeeded[job_id], formats[job_id]
        made.append({"id": record.dataset_id,
                     "files": {by_arg[arg]: path for arg, path in record.outputs.items() if arg in by_arg}})
    return made


def run_benchmark(task: Task, outdir: str | Path, *, input_dir: str | Path | None = None,
                  datasets: Sequence[str] | None = None, methods: Sequence[str] | None = None,
                  controls: Sequence[str] | None = None, metrics: Sequence[str] | None = None, jobs: int = 1,
                  llm_jobs: int = 1, resume: bool = False, progress: bool | str | None = None, engine: str = "local",
                  sandbox: bool | None = None, slots: JobSlots | None = None, include_large: bool = False,
                  profile: str = "local", work_dir: str | Path | None = None, nextflow_args: Sequence[str] | str = (),
                  user_configs: Sequence[str | Path] = (), llm_datasets: Sequence[str] | None = None) -> dict[str, Any]:
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
        Parallel jobs (local engine), and datasets checked or fetched at once.
    llm_jobs
        Parallel language-model jobs, beside ``jobs`` (local engine; :class:`~openpert.engines.local.JobSlots`).
    resume
        Reuse finished jobs of an earlier run into ``outdir`` (Nextflow: ``-resume``).
    progress
        The local engine's progress display (:class:`~openpert.engines.local.LocalEngine`).
    engine
        ``local`` or ``nextflow``.
    sandbox
        ``True``/``False`` require or turn off bubblewrap; ``None``: where it works.
    slots
        Job slots shared with other tasks running at once (local engine; their log lines then
        name the task).
    include_large
        Plan the datasets marked ``large`` too (multi-GB downloads).
    profile, work_dir, nextflow_args, user_configs
        The Nextflow engine's profiles, work directory, more ``nextflow run`` arguments and config
        files of one's own (:class:`~openpert.engines.nextflow.NextflowEngine`).
    llm_datasets
        Shell patterns of the datasets the language-model components run on (``--llm-datasets``,
        :func:`~openpert.engines.plan.runs_on`); ``None``: every dataset.

    Raises
    ------
    ConfigError
        For an unknown engine, a task with nothing to benchmark, or a run where no dataset could
        be used (naming each dataset job's reason).
    """
    from openpert.results.collect import write_results
    from openpert.results.provenance import dataset_digest

    outdir = Path(outdir).resolve()
    runner: Engine
    if engine == "local":
        from openpert.engines.local import LocalEngine

        runner = LocalEngine(outdir, jobs=jobs, llm_jobs=llm_jobs, resume=resume, progress=progress,
                             sandbox=sandbox, slots=slots, label=task.dir.name if slots is not None else "")
    elif engine == "nextflow":
        from openpert.engines.nextflow import NextflowEngine

        runner = NextflowEngine(task.root, outdir, profile=profile, work_dir=work_dir, nextflow_args=nextflow_args,
                                user_configs=user_configs, sandbox=sandbox, resume=resume)
    else:
        raise ConfigError(f"unknown engine {engine!r}; expected local or nextflow")
    outdir.mkdir(parents=True, exist_ok=True)
    records: list[JobRecord] = []
    ready, stage = [], []
    if input_dir is not None:
        # A corrupt file costs its dataset (a failed dataset job naming it), not the run.
        ready, records = ready_datasets(task, input_dir, outdir, datasets, jobs=jobs)
        if not ready:
            raise ConfigError(f"{task.dir}: no usable dataset: {_reasons(records)}")
    else:
        stage = dataset_stage(task, outdir, label_resources(task.root), datasets, include_large=include_large, jobs=jobs)
        if not stage:
            raise ConfigError(f"{task.dir}: no dataset component declares info.datasets; pass a folder of processed datasets with --input")
    plan = make_plan(task, ready, outdir, methods=methods, controls=controls, metrics=metrics, dataset_stage=stage,
                     llm_datasets=llm_datasets)
    write_text_atomic(outdir / "plan.json", json.dumps(plan, indent=2))
    records += runner.run_plan(plan, plan_jobs(plan, task.config_at))
    made = produced_datasets(plan, records)
    if not plan["datasets"] and not made:
        # Nothing to benchmark is the task's error; the reasons of the dataset jobs say what to fix.
        raise ConfigError(f"{task.dir}: no usable dataset: {_reasons(records)}")
    collected = dict(plan, datasets=[*plan["datasets"], *made])
    # The digest of the dataset files each job ran on, for its record's provenance, where the engine
    # did not record it (the local engine does, in the records it caches).
    digests = {d["id"]: dataset_digest(d["files"]) for d in collected["datasets"]}
    for record in records:
        if record.stage != "dataset" and record.dataset_digest is None and record.dataset_id in digests:
            record.dataset_digest = digests[record.dataset_id]
    return write_results(task, collected, records, outdir, engine=engine)


def _reasons(records: Iterable[JobRecord]) -> str:
    return "; ".join(f"{r.job_id}: {r.reason}" for r in records if not r.succeeded)
