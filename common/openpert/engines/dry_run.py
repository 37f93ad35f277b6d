"""A benchmark's language-model cost before it runs: LLM components in dry-run mode, their plans summed.

``openpert benchmark --dry-run`` makes the datasets as a benchmark would (or reads ``--input``),
then runs the task's LLM components (those taking ``--llm_base_url``) with ``OPENPERT_LLM_BACKEND=dry_run``: every prompt is built by the component's own code, so
what is counted is exactly what a real run would send, but nothing is sent; each ``generate`` call
logs a plan line (:mod:`pertsci.llm_plan`) and answers with a placeholder. This module reads those
lines from the jobs' logs and sums them per component and dataset (and, for an LLM metric, per
method it judges), into ``llm_plan.json`` and a printed table.

The run goes into its own folder (``<output>/<task>/dry_run``), never resumed: its predictions
are placeholders and must never be mistaken for, or reused as, a real run's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from openpert.config.task import Task
from openpert.config.viash import ConfigError
from openpert.files import write_text_atomic
from openpert.run.sandbox import needs_llm

#: Start of the log line a component's client writes per ``generate`` call in a dry run (written by
#: ``pertsci.llm_plan.plan_line``; the harness reads logs, it does not import the science library).
PLAN_MARK = "openpert-llm-plan "
#: The model's ``tokenizer.json`` the components count tokens with.
ENV_TOKENIZER = "OPENPERT_LLM_TOKENIZER"

#: Sub-folder of a task's results folder holding its dry run.
DRY_RUN_DIR = "dry_run"
#: Counters of a plan line that add up over calls and jobs.
SUMMED = ("requests", "repeated", "samples", "prompt_tokens", "max_completion_tokens",
          "shared_prefix_tokens_caller_order", "shared_prefix_tokens_prefix_order")


def read_plan_lines(lines: Iterable[str], *, where: str = "log") -> list[dict[str, Any]]:
    """The plan records (one per ``generate`` call) among a job log's lines.

    Raises
    ------
    ValueError
        Naming ``where`` and the line, when a marked line does not hold a JSON object.
    """
    records = []
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line.startswith(PLAN_MARK):
            continue
        try:
            record = json.loads(line[len(PLAN_MARK):])
        except json.JSONDecodeError as err:
            raise ValueError(f"{where}:{number}: a dry-run plan line that is not JSON: {err}") from err
        if not isinstance(record, dict):
            raise ValueError(f"{where}:{number}: a dry-run plan line must hold a JSON object")
        records.append(record)
    return records


@contextlib.contextmanager
def dry_run_environment(tokenizer: str | os.PathLike | None) -> Iterator[str]:
    """Set the environment that turns every LLM component's client into a dry run, then restore it.

    Yields how tokens are counted. A server configured in the environment is hidden for the
    duration, so that nothing can be sent to it.

    Raises
    ------
    FileNotFoundError
        When ``tokenizer`` is given but is no file (checked once here rather than failing every job).
    """
    if tokenizer is not None:
        path = Path(tokenizer).expanduser().resolve()
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no tokenizer file (expected a model's tokenizer.json)")
        tokenizer = str(path)
    method = f"tokenizer: {tokenizer}" if tokenizer is not None else "approximation: characters / 4"
    settings = {"OPENPERT_LLM_BACKEND": "dry_run", "OPENPERT_LLM_BASE_URL": None, "OPENPERT_LLM_API_KEY": None,
                ENV_TOKENIZER: tokenizer}

    def apply(values: dict[str, str | None]) -> None:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    saved = {name: os.environ.get(name) for name in settings}
    try:
        apply(settings)
        yield method
    finally:
        apply(saved)


def llm_component_names(task: Task) -> tuple[list[str], list[str]]:
    """The task's LLM methods and LLM metrics, by name."""
    methods = [c.name for c in task.of_type("method") if needs_llm(c)]
    metrics = [c.name for c in task.of_type("metric") if needs_llm(c)]
    return methods, metrics


def summarise_plans(results: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
    """Sum the plan lines of each LLM job of a dry run, per component, dataset and judged method.

    Parameters
    ----------
    results
        The dry run's ``results.json`` content (its ``resources`` name every job).
    run_dir
        The dry run's folder (job logs are ``logs/<job_id>.log`` in it).

    Returns
    -------
    list of dict
        One row per (component, dataset, method judged or ``None``): ``jobs`` (seeds run), the
        :data:`SUMMED` counters, ``max_prompt_tokens`` (the longest prompt of any call), ``calls``
        (each ``generate`` call's plan, in order, of the first job) and ``status`` of the jobs (a
        failed job's row holds what it logged before failing).

    Raises
    ------
    ValueError
        Naming the log, when a plan line in it cannot be read.
    """
    rows: dict[tuple, dict[str, Any]] = {}
    for job in results.get("resources", []):
        log = run_dir / "logs" / f"{job['job_id']}.log"
        if job.get("stage") in ("build", "dataset") or not log.is_file():
            continue
        with log.open(errors="replace") as handle:
            calls = read_plan_lines(handle, where=str(log))
        if not calls:
            continue
        judged = job.get("method_id") if job.get("stage") == "metric" else None
        key = (job["component"], job["dataset_id"], judged)
        row = rows.setdefault(key, {"component": job["component"], "dataset_id": job["dataset_id"], "method_id": judged,
                                    "jobs": 0, **{name: 0 for name in SUMMED}, "max_prompt_tokens": 0, "calls": calls,
                                    "status": []})
        row["jobs"] += 1
        row["status"].append(job.get("status"))
        for call in calls:
            for name in SUMMED:
                row[name] += int(call.get(name) or 0)
            row["max_prompt_tokens"] = max(row["max_prompt_tokens"], int(call.get("max_prompt_tokens") or 0))
        row["token_count"] = calls[0].get("token_count")
    return sorted(rows.values(), key=lambda r: (r["component"], r["dataset_id"], r["method_id"] or ""))


def format_plan_table(rows: Sequence[dict[str, Any]]) -> str:
    """The plan as an aligned text table, one line per component, dataset and judged method.

    A ``GPU-hours`` column is added when the rows carry ``gpu_hours`` (a dry run given a throughput).
    """
    hours = bool(rows) and all("gpu_hours" in r for r in rows)
    header = ("component", "dataset", "judged", "jobs", "requests", "samples", "prompt tokens", "longest prompt",
              "shared before", "shared after", "max completion") + (("GPU-hours",) if hours else ())
    lines = [header]
    incomplete = False
    for r in rows:
        # A job that stopped (a judge finding no readable score in the placeholders) logged only
        # its calls up to there: its counts are a lower bound, marked with "+".
        more = "" if all(s == "succeeded" for s in r["status"]) else "+"
        incomplete = incomplete or bool(more)
        lines.append((r["component"], r["dataset_id"], r["method_id"] or "-", str(r["jobs"]), f"{r['requests']:,}{more}",
                      f"{r['samples']:,}{more}", f"{r['prompt_tokens']:,}{more}", f"{r['max_prompt_tokens']:,}",
                      f"{r['shared_prefix_tokens_caller_order']:,}", f"{r['shared_prefix_tokens_prefix_order']:,}",
                      f"{r['max_completion_tokens']:,}{more}") + ((f"{r['gpu_hours']:,.1f}{more}",) if hours else ()))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(cell.ljust(w) if i < 3 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths)))
            for line in lines]
    if incomplete:
        text.append("+ a job stopped before its last call (see its failure): at least this much")
    return "\n".join(text)


@dataclass(frozen=True)
class Throughput:
    """A lab's measured rates on one GPU, to turn a plan's tokens into GPU-hours.

    Attributes
    ----------
    prefill
        Prompt tokens per second the server processes (prefill), measured on the lab's GPU and
        model (e.g. with ``vllm bench throughput``).
    decode
        Generated tokens per second, summed over concurrent requests.
    completion_tokens
        Mean tokens generated per sample; ``None`` takes each sample's ``max_tokens``, so that the
        figure is an upper bound.
    """

    prefill: float
    decode: float
    completion_tokens: float | None = None

    def __post_init__(self) -> None:
        if not (self.prefill > 0 and self.decode > 0):
            raise ConfigError(f"throughput: prefill and decode must be positive tokens per second, not "
                              f"{self.prefill} and {self.decode}")
        if self.completion_tokens is not None and self.completion_tokens < 0:
            raise ConfigError(f"throughput: completion tokens per sample must be >= 0, not {self.completion_tokens}")


def gpu_hours(row: dict[str, Any], throughput: Throughput) -> float:
    """GPU-hours a plan row would take at a lab's measured rates.

    Prefill counts each prompt's tokens less those it shares with the prompt sent before it in
    prefix order (what vLLM's prefix cache serves instead of recomputing, if the prefix is still
    resident); decode counts every sample's generated tokens.

    Parameters
    ----------
    row
        A row of :func:`summarise_plans`.
    throughput
        The rates.

    Returns
    -------
    float
        Hours on one GPU.
    """
    prefill = max(row["prompt_tokens"] - row["shared_prefix_tokens_prefix_order"], 0)
    if throughput.completion_tokens is None:
        generated = row["max_completion_tokens"]
    else:
        generated = row["samples"] * throughput.completion_tokens
    return (prefill / throughput.prefill + generated / throughput.decode) / 3600


def dry_run_benchmark(task: Task, outdir: str | Path, *, tokenizer: str | os.PathLike | None = None,
                      throughput: Throughput | None = None, methods: Sequence[str] | None = None, controls: Sequence[str] | None = None,
                      metrics: Sequence[str] | None = None, **options: Any) -> dict[str, Any]:
    """Run a task's LLM components in dry-run mode and write what a real run would send.

    Parameters
    ----------
    task
        The task.
    outdir
        The task's results folder; the dry run goes into its ``dry_run`` sub-folder (replaced).
    tokenizer
        A model's ``tokenizer.json`` to count tokens with (default ``$OPENPERT_LLM_TOKENIZER``;
        without either, characters / 4).
    throughput
        The lab's measured rates: each row then says its GPU-hours (:func:`gpu_hours`), and the
        plan records the rates.
    methods, controls, metrics
        Names to keep (default: the task's LLM methods; no control method, none calls a model; its
        LLM metrics, or all metrics when it has none, as a benchmark needs one).
    **options
        Passed on to :func:`openpert.engines.local.run_benchmark` (``input_dir``, ``datasets``,
        ``jobs``, ``sandbox``, ``progress``, ``include_large``...).

    Returns
    -------
    dict
        ``llm_plan.json``'s content: ``task``, ``token_count`` (how tokens were counted),
        ``rows`` (:func:`summarise_plans`) and ``failures`` (jobs that failed, with their reasons).

    Raises
    ------
    ConfigError
        When the task has no LLM method or metric (nothing to plan).
    """
    from openpert.engines.benchmark import run_benchmark

    llm_methods, llm_metrics = llm_component_names(task)
    if not llm_methods and not llm_metrics:
        raise ConfigError(f"{task.dir}: no component takes --llm_base_url; a dry run has nothing to count")
    methods = llm_methods if methods is None else methods
    controls = [] if controls is None else controls
    metrics = (llm_metrics or None) if metrics is None else metrics
    run_dir = Path(outdir) / DRY_RUN_DIR
    shutil.rmtree(run_dir, ignore_errors=True)
    with dry_run_environment(tokenizer if tokenizer is not None else os.environ.get(ENV_TOKENIZER)) as method:
        results = run_benchmark(task, run_dir, methods=methods, controls=controls, metrics=metrics, resume=False,
                                engine="local", **options)
    rows = summarise_plans(results, run_dir.resolve())
    if throughput is not None:
        for row in rows:
            row["gpu_hours"] = gpu_hours(row, throughput)
    plan = {
        "task": task.name,
        # what the components said they counted with (a tokenizer they could not read fails its jobs)
        "token_count": rows[0]["token_count"] if rows else method,
        "throughput": None if throughput is None else asdict(throughput),
        "rows": rows,
        "failures": [{"job_id": f["job_id"], "reason": f["reason"]} for f in results.get("failures", [])],
    }
    write_text_atomic(Path(outdir) / "llm_plan.json", json.dumps(plan, indent=2))
    return plan
