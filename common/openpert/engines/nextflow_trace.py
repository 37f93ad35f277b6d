"""Reading back a Nextflow run: its trace file, turned into one job record per job of the plan.

Decisions worth knowing:

- A job is matched to its trace row by the process ``tag``, which ``main.nf`` sets to the job id.
  When a tag appears more than once (retries), a successful row wins, else the last attempt.
- Nextflow's local executor stops a task that exceeds its ``time`` without an exit code; such a row
  (no exit code, run time at or above the job's time limit) is reported with exit code 143, like a
  scheduler's time limit.
- A job that Nextflow reports as completed but whose published output is missing is failed with
  exit code -1: results are collected from published files only.
- Jobs of the plan that are absent from the trace never ran (``"not run"``), unless the job they
  follow failed: those have no record, as with the local engine.
- Everything else about a job (its id, component, seed, parameters, where it publishes, its limits
  on each attempt) is the plan's: nothing is derived here.
- A job that retried after exit 137 or 143 has one row per attempt; the last (or a successful) one
  tells its outcome.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from openpert.config.viash import ConfigError, read_config
from openpert.engines.plan import build_failed
from openpert.engines.resource_labels import MEMORY_UNITS_MB, TIME_UNITS_S
from openpert.run.component import limit_hint
from openpert.run.records import EXIT_INVALID, EXIT_MEMORY, EXIT_TIME, JobRecord

#: Exit status Nextflow records when a task was stopped without one (``Integer.MAX_VALUE``).
_NO_EXIT_STATUS = 2**31 - 1

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)(?![a-z])")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGTPE]?B)?$", re.IGNORECASE)

_DURATION_FIELDS = {"duration", "realtime", "time"}
_MEMORY_FIELDS = {"peak_rss", "peak_vmem", "rss", "vmem", "memory", "disk", "rchar", "wchar"}
_PERCENT_FIELDS = {"%cpu", "%mem"}
_INT_FIELDS = {"task_id", "attempt", "cpus", "syscr", "syscw", "read_bytes", "write_bytes"}


def _parse_duration(value: str) -> float:
    """Seconds of a Nextflow duration: ``350ms``, ``2.5s``, ``1m 2s``, ``1d 2h 3m 4s``."""
    text = value.strip()
    total, pos = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if text[pos : match.start()].strip():
            break
        total += float(match.group(1)) * TIME_UNITS_S[match.group(2)]
        pos = match.end()
    if pos == 0 or text[pos:].strip():
        raise ValueError(f"not a Nextflow duration: {value!r}")
    return total


def _parse_memory(value: str) -> float:
    """MB of a Nextflow memory value: ``12.5 MB``, ``1 GB``, ``1024 KB``, ``0``."""
    match = _MEMORY.match(value.strip())
    if match is None:
        raise ValueError(f"not a Nextflow memory value: {value!r}")
    unit = (match.group(2) or "B").upper()
    return float(match.group(1)) * MEMORY_UNITS_MB[unit]


def _convert(field: str, value: str) -> Any:
    if value in ("-", ""):
        return None
    if field == "exit":
        code = int(value)
        return None if code == _NO_EXIT_STATUS else code
    if field in _DURATION_FIELDS:
        return _parse_duration(value)
    if field in _MEMORY_FIELDS:
        return _parse_memory(value)
    if field in _PERCENT_FIELDS:
        return float(value.rstrip("%"))
    if field in _INT_FIELDS:
        return int(value)
    return value


def parse_trace(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Read a Nextflow trace file (tab-separated, one row per task attempt).

    Parameters
    ----------
    path
        The trace file.

    Returns
    -------
    One dict per row, keyed by the header's field names. ``-`` (not available) becomes ``None``;
    ``exit`` is an int (``None`` when the task never exited by itself); ``duration``,
    ``realtime`` and ``time`` are seconds; ``peak_rss``, ``peak_vmem``, ``rss``, ``vmem``,
    ``memory`` (and ``disk``, ``rchar``, ``wchar``) are MB; ``%cpu`` and ``%mem`` are floats
    without ``%``; ``task_id`` is an int; everything else stays a string.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        Naming the file and line, for a row with the wrong number of fields or a value that cannot
        be read.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Nextflow trace {path} does not exist (did Nextflow start?)")
    rows: list[dict[str, Any]] = []
    with open(path, newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if not header:
            return rows
        for line_no, fields in enumerate(reader, start=2):
            if not fields or fields == [""]:
                continue
            if len(fields) != len(header):
                raise ValueError(f"{path}, line {line_no}: {len(fields)} fields, the header has {len(header)}")
            row: dict[str, Any] = {}
            for name, raw in zip(header, fields):
                try:
                    row[name] = _convert(name, raw.strip())
                except ValueError as exc:
                    raise ValueError(f"{path}, line {line_no}, field {name!r}: {exc}") from None
            rows.append(row)
    return rows


def _pick_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The row that tells a job's outcome: a successful attempt, else the last one."""
    done = [r for r in rows if r.get("status") in ("COMPLETED", "CACHED")]
    pool = done or rows
    return max(pool, key=lambda r: (r.get("task_id") is not None, r.get("task_id") or 0))


def _format_mb(mb: float) -> str:
    return f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb:.0f} MB"


def _failure(row: dict[str, Any], limits: Mapping[str, int]) -> tuple[int, str]:
    """Exit code and one-line reason of a failed trace row."""
    status = row.get("status")
    code = row.get("exit")
    realtime = row.get("realtime") if row.get("realtime") is not None else row.get("duration")
    peak = row.get("peak_rss")
    if code == EXIT_MEMORY:
        detail = []
        if peak is not None:
            detail.append(f"peak {_format_mb(peak)}")
        if "memory_mb" in limits:
            detail.append(f"limit {_format_mb(limits['memory_mb'])}")
        return EXIT_MEMORY, "memory limit exceeded" + (f" ({', '.join(detail)})" if detail else "")
    time_limit = limits.get("time_s")
    if code == EXIT_TIME or (code is None and time_limit is not None and realtime is not None and realtime >= time_limit):
        detail = f" (limit {time_limit} s)" if time_limit is not None else ""
        return EXIT_TIME, "time limit exceeded" + detail
    if code is None:
        if status == "ABORTED":
            return EXIT_INVALID, "aborted by Nextflow before it finished"
        if status == "FAILED":
            return EXIT_INVALID, "stopped by Nextflow without an exit code"
        return EXIT_INVALID, f"did not finish (Nextflow status {status})"
    if code == 0:
        return EXIT_INVALID, "exited with code 0 but Nextflow marked it failed (outputs missing?)"
    return code, f"exited with code {code}"


def _log_path(row: dict[str, Any]) -> str | None:
    workdir = row.get("workdir")
    if not workdir:
        return None
    if "://" in workdir:
        return f"{workdir.rstrip('/')}/.command.log"
    log = Path(workdir) / ".command.log"
    return str(log) if log.exists() else None


def _label_hint(entry: Mapping[str, Any], code: int) -> str:
    """The label that set a limit the job hit and the next one up, as the local engine says it."""
    try:
        config = read_config(entry["config"])
    except (ConfigError, OSError, KeyError):
        return ""  # a config that cannot be read again names no label; the limit's reason stands
    return limit_hint(config, code)


def _record(entry: Mapping[str, Any], rows: list[dict[str, Any]]) -> JobRecord:
    """The record of a job of the plan from its trace rows (none: it never ran)."""
    record = JobRecord(job_id=entry["id"], stage=entry["stage"], component=entry["component"],
                       component_type=entry.get("component_type", entry["stage"]), dataset_id=entry["dataset_id"],
                       method_id=entry["method_id"], seed=entry["seed"], params=dict(entry["params"]),
                       component_digest=f"sha256:{entry['digest']}" if entry.get("digest") else None, engine="nextflow")
    if not rows:
        record.exit_code, record.reason = EXIT_INVALID, "not run"
        return record
    row = _pick_row(rows)
    realtime = row.get("realtime")
    record.duration_s = realtime if realtime is not None else row.get("duration")
    record.peak_memory_mb = row.get("peak_rss")
    record.log = _log_path(row)
    record.cached = row.get("status") == "CACHED"
    if row.get("status") not in ("COMPLETED", "CACHED"):
        # the limits of the attempt that failed (they grow with the attempt: main.nf retries bigger)
        attempts = entry["attempts"]
        attempt = row.get("attempt") or 1
        limits = {k: v for k, v in attempts[min(attempt, len(attempts)) - 1]["limits"].items() if v is not None}
        record.exit_code, record.reason = _failure(row, limits)
        if attempt > 1:
            record.reason += f" on attempt {attempt}"
        record.reason += _label_hint(entry, record.exit_code)
        return record
    outputs = {arg: str(Path(entry["publish_dir"]) / name) for arg, name in entry["outputs"].items()}
    # An optional output the job did not write is no failure; a required one is (the component's
    # run already failed for it, so a missing file here means publishing went wrong).
    missing = [arg for arg, out in outputs.items() if not Path(out).is_file()]
    if missing and len(missing) == len(outputs):
        record.exit_code = EXIT_INVALID
        record.reason = "; ".join(f"output {arg!r} was not published: {outputs[arg]} is missing" for arg in missing)
        return record
    record.status = "succeeded"
    record.exit_code = row.get("exit") if row.get("exit") is not None else 0
    record.outputs = {arg: out for arg, out in outputs.items() if arg not in missing}
    return record


def collect_job_records(jobs: Iterable[Mapping[str, Any]], trace_rows: Iterable[Mapping[str, Any]]) -> list[JobRecord]:
    """One :class:`~openpert.run.records.JobRecord` for every job of the plan that could run.

    Parameters
    ----------
    jobs
        The jobs ``main.nf`` ran (:func:`openpert.engines.nextflow.nextflow_jobs`), upstream jobs first.
    trace_rows
        Rows from :func:`parse_trace`; matched to jobs by their ``tag`` (the job id).

    Returns
    -------
    Records in the order of ``jobs``. A job whose upstream job (``after``) failed has none, as with
    the local engine: the upstream's record says why; a dataset job cut from a failed build has a
    failed one naming the build. Succeeded jobs have ``outputs`` pointing at
    the published files (``publish_dir``); duration is the trace's ``realtime`` (or ``duration``) in
    seconds, peak memory its ``peak_rss`` in MB, ``log`` the task's ``.command.log``.
    """
    rows_by_tag: dict[str, list[dict[str, Any]]] = {}
    for row in trace_rows:
        if row.get("tag"):
            rows_by_tag.setdefault(str(row["tag"]), []).append(dict(row))
    records: list[JobRecord] = []
    by_id: dict[str, JobRecord] = {}
    for entry in jobs:
        upstream = by_id.get(entry["after"]) if entry["after"] is not None else None
        if entry["after"] is not None and (upstream is None or not upstream.succeeded):
            if upstream is not None and upstream.stage == "build" and entry["stage"] == "dataset":
                # A dataset cut from a failed build is listed with the build's reason (as the local engine does).
                record = _record(entry, [])
                record.reason = build_failed(upstream.job_id, upstream.reason)
                records.append(record)
            continue
        record = _record(entry, rows_by_tag.get(entry["id"], []))
        records.append(record)
        by_id[entry["id"]] = record
    return records
