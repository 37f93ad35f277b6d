"""The distributed engine: run a plan through Nextflow and read back what happened.

``openpert benchmark --engine nextflow`` writes ``plan.json`` (see ``docs/plan_json.md``) and hands
it to the repository's generic ``main.nf`` as ``-params-file``. Nextflow runs every method on every
dataset and every metric on every prediction, publishes outputs into
``<outdir>/outputs/<dataset_id>/<method_id>[/<metric_id>]/`` and writes a trace file. This module
builds the command line, launches it, parses the trace and turns it into one
:class:`~openpert.run.records.JobRecord` per job of the plan, so that results are collected exactly as for
the local engine.

Decisions worth knowing:

- A job is matched to its trace row by the process ``tag``, which ``main.nf`` sets to the job id.
  When a tag appears more than once (retries), a successful row wins, else the last attempt.
- Nextflow's local executor stops a task that exceeds its ``time`` without an exit code; such a row
  (no exit code, run time at or above the job's time limit) is reported with exit code 143, like a
  scheduler's time limit.
- A job that Nextflow reports as completed but whose published output is missing is failed with
  exit code -1: results are collected from published files only.
- Jobs of the plan that are absent from the trace never ran: a metric job whose method failed is
  reported as ``"not run: upstream job <id> failed"``, anything else as ``"not run"``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from openpert.files import write_text_atomic
from openpert.run.records import EXIT_INVALID, EXIT_MEMORY, EXIT_TIME, JobRecord

__all__ = [
    "TRACE_FILE_NAME",
    "collect_job_records",
    "config_profiles",
    "nextflow_command",
    "parse_label_resources",
    "parse_resource_directive",
    "parse_trace",
    "run_nextflow",
]

#: Name of the trace file that ``nextflow.config`` writes into the plan's ``outdir``.
TRACE_FILE_NAME = "nextflow_trace.tsv"

#: Exit status Nextflow records when a task was stopped without one (``Integer.MAX_VALUE``).
_NO_EXIT_STATUS = 2**31 - 1

_MEMORY_UNITS_MB = {
    "B": 1 / 1024**2,
    "KB": 1 / 1024,
    "MB": 1.0,
    "GB": 1024.0,
    "TB": 1024.0**2,
    "PB": 1024.0**3,
}
_TIME_UNITS_S = {
    "ms": 0.001,
    "milli": 0.001,
    "millis": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
}


# --------------------------------------------------------------------------------------------------
# Resource labels
# --------------------------------------------------------------------------------------------------

_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)\s*\.?\s*([A-Za-z]+)$")


def parse_resource_directive(text: str) -> dict[str, int]:
    """Parse one Nextflow resource directive, as written in a label.

    Parameters
    ----------
    text
        ``"memory = 4.GB"``, ``"cpus = 2"`` or ``"time = 10.m"``. Memory accepts the units B, KB,
        MB, GB, TB and PB (powers of 1024, as Nextflow); time accepts ms, s, m, h and d (and their
        long forms). ``4.GB``, ``4 GB``, ``4GB`` and ``'4 GB'`` are all read alike.

    Returns
    -------
    ``{"memory_mb": int}`` (rounded up to whole MB), ``{"cpus": int}`` or ``{"time_s": int}``
    (rounded up to whole seconds).

    Raises
    ------
    ValueError
        If the directive is not one of these or its value cannot be read.
    """
    name, sep, value = text.partition("=")
    name, value = name.strip(), value.strip().strip("'\"").strip()
    if not sep or not name or not value:
        raise ValueError(f"expected '<directive> = <value>', got {text!r}")
    if name == "cpus":
        if not re.fullmatch(r"\d+", value) or int(value) < 1:
            raise ValueError(f"cpus must be a positive integer, got {value!r}")
        return {"cpus": int(value)}
    if name not in ("memory", "time"):
        raise ValueError(f"unknown resource directive {name!r} (expected memory, cpus or time)")
    match = _QUANTITY.match(value)
    if match is None:
        raise ValueError(f"cannot read {name} value {value!r} (expected e.g. '4.GB' or '10.m')")
    amount, unit = float(match.group(1)), match.group(2)
    if name == "memory":
        factor = _MEMORY_UNITS_MB.get(unit.upper())
        if factor is None:
            raise ValueError(f"unknown memory unit {unit!r} in {value!r} (use B, KB, MB, GB, TB)")
        return {"memory_mb": int(math.ceil(amount * factor))}
    factor = _TIME_UNITS_S.get(unit.lower())
    if factor is None:
        raise ValueError(f"unknown time unit {unit!r} in {value!r} (use ms, s, m, h, d)")
    return {"time_s": int(math.ceil(amount * factor))}


_LABELS_MOD = re.compile(r"\.labels\s*:=\s*\{(?P<body>.*)\}\s*$", re.DOTALL)
_LABEL_ENTRY = re.compile(
    r"""\s*(?P<label>[A-Za-z_][\w-]*)\s*:\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)')\s*(?:,|$)"""
)


def parse_label_resources(viash_yaml_path: str | os.PathLike) -> dict[str, dict[str, int]]:
    """Read the resource labels that ``_viash.yaml``'s ``config_mods`` define.

    Viash's config-mod syntax is
    ``.runners[.type == "nextflow"].config.labels := { lowmem : "memory = 4.GB", ... }``; every
    label maps to one Nextflow directive. Both engines use this mapping, so a label means the
    same limit on a laptop and on a cluster.

    Parameters
    ----------
    viash_yaml_path
        Path of ``_viash.yaml``.

    Returns
    -------
    Label -> ``{"memory_mb": int}``, ``{"cpus": int}`` or ``{"time_s": int}``.

    Raises
    ------
    ValueError
        Naming the file, when ``config_mods`` has no labels mod or an entry cannot be read.
    FileNotFoundError
        If the file does not exist.
    """
    path = Path(viash_yaml_path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from exc
    mods = (data or {}).get("config_mods") if isinstance(data, dict) else None
    if isinstance(mods, str):
        mods = mods.splitlines()
    if not isinstance(mods, list):
        raise ValueError(f"{path}: no 'config_mods' defining resource labels")

    labels: dict[str, dict[str, int]] = {}
    found = False
    for mod in mods:
        if not isinstance(mod, str) or ".labels" not in mod:
            continue
        match = _LABELS_MOD.search(mod.strip())
        if match is None:
            raise ValueError(
                f"{path}: malformed labels config mod (expected "
                f"'.runners[...].config.labels := {{ label : \"directive = value\", ... }}'): "
                f"{mod.strip()!r}"
            )
        found = True
        body = match.group("body")
        pos = 0
        while body[pos:].strip():
            entry = _LABEL_ENTRY.match(body, pos)
            if entry is None:
                raise ValueError(
                    f"{path}: malformed label entry in config_mods near {body[pos:].strip()[:40]!r} "
                    "(expected 'label : \"directive = value\"')"
                )
            label = entry.group("label")
            directive = entry.group("dq") if entry.group("dq") is not None else entry.group("sq")
            try:
                parsed = parse_resource_directive(directive)
            except ValueError as exc:
                raise ValueError(f"{path}: label {label!r}: {exc}") from None
            labels.setdefault(label, {}).update(parsed)
            pos = entry.end()
    if not found:
        raise ValueError(f"{path}: 'config_mods' has no '.labels := {{...}}' defining resource labels")
    return labels


# --------------------------------------------------------------------------------------------------
# nextflow.config and the command line
# --------------------------------------------------------------------------------------------------


def _strip_groovy(text: str) -> str:
    """Blank out comments and string literals of Groovy source, keeping braces and identifiers."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
            continue
        for quote in ('"""', "'''", '"', "'"):
            if text.startswith(quote, i):
                j = i + len(quote)
                while j < n and not text.startswith(quote, j):
                    j += 2 if text[j] == "\\" else 1
                i = j + len(quote)
                out.append('""')
                break
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def config_profiles(config_path: str | os.PathLike) -> list[str]:
    """Names of the profiles defined in a ``nextflow.config``'s ``profiles { ... }`` block.

    Raises
    ------
    ValueError
        Naming the file, when it has no ``profiles`` block or its braces do not balance.
    """
    path = Path(config_path)
    code = _strip_groovy(path.read_text())
    match = re.search(r"(?<![\w.])profiles\s*\{", code)
    if match is None:
        raise ValueError(f"{path}: no 'profiles {{ ... }}' block")
    names: list[str] = []
    depth = 1
    pos = match.end()
    name_at_depth1 = re.compile(r"\s*([A-Za-z_][\w-]*)\s*\{")
    while pos < len(code) and depth > 0:
        char = code[pos]
        if depth == 1:
            entry = name_at_depth1.match(code, pos)
            if entry is not None:
                names.append(entry.group(1))
                depth += 1
                pos = entry.end()
                continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        pos += 1
    if depth != 0:
        raise ValueError(f"{path}: unbalanced braces in the 'profiles' block")
    return names


def nextflow_command(
    plan_path: str | os.PathLike,
    *,
    main_nf: str | os.PathLike,
    profile: str = "local",
    work_dir: str | os.PathLike,
    resume: bool = False,
    extra_args: Sequence[str] = (),
    config_path: str | os.PathLike | None = None,
    nextflow: str = "nextflow",
) -> list[str]:
    """The ``nextflow run`` command line for a plan.

    Parameters
    ----------
    plan_path
        The plan, passed as ``-params-file`` (its top-level keys become ``params.*``).
    main_nf
        The pipeline script.
    profile
        One profile of ``nextflow.config``, or several joined by commas (``slurm,singularity``).
    work_dir
        Nextflow's work directory (task folders and its cache).
    resume
        Add ``-resume``: reuse tasks whose inputs and script are unchanged.
    extra_args
        Appended as given (e.g. ``["--max_cpus", "4"]`` or ``["-with-report", "report.html"]``).
    config_path
        The ``nextflow.config`` whose profiles are allowed; by default the one next to ``main_nf``.
    nextflow
        The executable.

    Returns
    -------
    The argument list, ready for :func:`subprocess.run`.

    Raises
    ------
    ValueError
        If a profile is not defined in the configuration (the message lists those that are).
    """
    main_nf = Path(main_nf)
    config = Path(config_path) if config_path is not None else main_nf.parent / "nextflow.config"
    known = config_profiles(config)
    requested = [p.strip() for p in profile.split(",")]
    unknown = [p for p in requested if p not in known]
    if not profile.strip() or unknown:
        raise ValueError(
            f"unknown Nextflow profile {', '.join(map(repr, unknown or [profile]))}: "
            f"{config} defines {', '.join(known)}"
        )
    cmd = [
        nextflow,
        "run",
        str(main_nf),
        "-params-file",
        str(plan_path),
        "-profile",
        ",".join(requested),
        "-work-dir",
        str(work_dir),
    ]
    if resume:
        cmd.append("-resume")
    cmd += ["-ansi-log", "false"]
    cmd += [str(arg) for arg in extra_args]
    return cmd


def _local_limits() -> list[str]:
    """``--max_cpus``/``--max_memory_mb`` for this machine (Nextflow's local executor refuses
    tasks that ask for more than the machine has)."""
    import psutil

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = psutil.virtual_memory().total
    # inside a container the JVM (and so Nextflow) sees the cgroup's memory limit, not the host's
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        text = Path(limit_file).read_text().strip() if Path(limit_file).is_file() else ""
        if text.isdigit():
            memory = min(memory, int(text))
    return ["--max_cpus", str(cpus or 1), "--max_memory_mb", str(memory // 2**20)]


def run_nextflow(
    plan: Mapping[str, Any],
    plan_path: str | os.PathLike,
    *,
    log_path: str | os.PathLike,
    main_nf: str | os.PathLike | None = None,
    profile: str = "local",
    work_dir: str | os.PathLike | None = None,
    resume: bool = False,
    extra_args: Sequence[str] = (),
    launch_dir: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Write the plan and run it through Nextflow.

    Parameters
    ----------
    plan
        The plan (``docs/plan_json.md``); written to ``plan_path`` as JSON.
    plan_path
        Where to write the plan.
    log_path
        Nextflow's console output (stdout and stderr) is written here.
    main_nf
        The pipeline; default ``<repo_root>/main.nf``.
    profile
        See :func:`nextflow_command`. For profiles including ``local``, ``--max_cpus`` and
        ``--max_memory_mb`` are added so that no task asks for more than this machine has.
    work_dir
        Nextflow's work directory; default ``<outdir>/work``.
    resume
        Reuse tasks that already ran with the same inputs (``-resume``).
    extra_args
        More arguments for ``nextflow run``.
    launch_dir
        Working directory of the Nextflow process (holds its ``.nextflow`` cache, which
        ``-resume`` needs); default ``outdir``.
    env
        Environment of the Nextflow process; default this process's environment. The directory of
        the running Python interpreter is put first on ``PATH`` so that local tasks find the same
        ``openpert``.

    Returns
    -------
    The finished process; its ``returncode`` is Nextflow's (failed jobs alone do not make it
    non-zero, since they are ignored). Read the trace with :func:`parse_trace`.

    Raises
    ------
    RuntimeError
        If ``nextflow`` is not on ``PATH`` or ``main.nf`` does not exist.
    """
    executable = shutil.which("nextflow", path=(env or os.environ).get("PATH"))
    if executable is None:
        raise RuntimeError(
            "the Nextflow engine needs 'nextflow' on PATH, and it was not found; install Nextflow "
            "(https://www.nextflow.io) or run the benchmark with the local engine"
        )
    outdir = Path(plan["outdir"])
    main_nf = Path(main_nf) if main_nf is not None else Path(plan["repo_root"]) / "main.nf"
    if not main_nf.is_file():
        raise RuntimeError(f"the Nextflow pipeline {main_nf} does not exist")
    work_dir = Path(work_dir) if work_dir is not None else outdir / "work"
    launch_dir = Path(launch_dir) if launch_dir is not None else outdir
    launch_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(plan_path, json.dumps(plan, indent=2))

    args = list(extra_args)
    if "local" in [p.strip() for p in profile.split(",")]:
        args = _local_limits() + args
    cmd = nextflow_command(
        Path(plan_path).resolve(),
        main_nf=main_nf.resolve(),
        profile=profile,
        work_dir=work_dir.resolve(),
        resume=resume,
        extra_args=args,
        nextflow=executable,
    )
    run_env = dict(env if env is not None else os.environ)
    bin_dir = str(Path(sys.executable).parent)
    run_env["PATH"] = os.pathsep.join([bin_dir, run_env.get("PATH", "")])
    run_env["NXF_ANSI_LOG"] = "false"

    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        return subprocess.run(
            cmd, cwd=launch_dir, env=run_env, stdout=log, stderr=subprocess.STDOUT, check=False
        )


# --------------------------------------------------------------------------------------------------
# Trace
# --------------------------------------------------------------------------------------------------

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
        total += float(match.group(1)) * _TIME_UNITS_S[match.group(2)]
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
    return float(match.group(1)) * _MEMORY_UNITS_MB[unit]


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
                raise ValueError(
                    f"{path}, line {line_no}: {len(fields)} fields, the header has {len(header)}"
                )
            row: dict[str, Any] = {}
            for name, raw in zip(header, fields):
                try:
                    row[name] = _convert(name, raw.strip())
                except ValueError as exc:
                    raise ValueError(f"{path}, line {line_no}, field {name!r}: {exc}") from None
            rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------------
# Job records
# --------------------------------------------------------------------------------------------------


def _job_limits(plan: Mapping[str, Any], component: Mapping[str, Any]) -> dict[str, int]:
    limits: dict[str, int] = {}
    resources = plan.get("resources") or {}
    for label in component.get("labels") or []:
        limits.update(resources.get(label) or {})
    return limits


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
    if code == EXIT_TIME or (
        code is None and time_limit is not None and realtime is not None and realtime >= time_limit
    ):
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


def _record(
    plan: Mapping[str, Any],
    rows_by_tag: Mapping[str, list[dict[str, Any]]],
    *,
    job_id: str,
    stage: str,
    component: Mapping[str, Any],
    dataset_id: str,
    method_id: str,
    publish_dir: Path,
    upstream: JobRecord | None,
) -> JobRecord:
    record = JobRecord(
        job_id=job_id,
        stage=stage,  # type: ignore[arg-type]
        component=component["id"],
        component_type=component.get("type", stage),
        dataset_id=dataset_id,
        method_id=method_id,
    )
    rows = rows_by_tag.get(job_id)
    if not rows:
        record.exit_code = EXIT_INVALID
        if upstream is not None and not upstream.succeeded:
            record.reason = f"not run: upstream job {upstream.job_id} failed"
        else:
            record.reason = "not run"
        return record

    row = _pick_row(rows)
    realtime = row.get("realtime")
    record.duration_s = realtime if realtime is not None else row.get("duration")
    record.peak_memory_mb = row.get("peak_rss")
    record.log = _log_path(row)
    record.cached = row.get("status") == "CACHED"

    if row.get("status") not in ("COMPLETED", "CACHED"):
        record.exit_code, record.reason = _failure(row, _job_limits(plan, component))
        return record

    outputs = {
        arg: str(publish_dir / name) for arg, name in (component.get("output_names") or {}).items()
    }
    missing = [arg for arg, out in outputs.items() if not Path(out).is_file()]
    if missing:
        record.exit_code = EXIT_INVALID
        record.reason = "; ".join(
            f"output {arg!r} was not published: {outputs[arg]} is missing" for arg in missing
        )
        return record
    record.status = "succeeded"
    record.exit_code = row.get("exit") if row.get("exit") is not None else 0
    record.outputs = outputs
    return record


def collect_job_records(
    plan: Mapping[str, Any], trace_rows: Iterable[Mapping[str, Any]]
) -> list[JobRecord]:
    """One :class:`~openpert.run.records.JobRecord` for every job of the plan.

    Parameters
    ----------
    plan
        The plan that was run.
    trace_rows
        Rows from :func:`parse_trace`; matched to jobs by their ``tag`` (the job id).

    Returns
    -------
    Records in plan order: for every dataset, every method job followed by its metric jobs.
    Succeeded jobs have ``outputs`` pointing at the published files
    ``<outdir>/outputs/<dataset_id>/<method_id>[/<metric_id>]/<output_name>``. Duration is the
    trace's ``realtime`` (or ``duration``) in seconds, peak memory its ``peak_rss`` in MB, ``log``
    the task's ``.command.log``.
    """
    rows_by_tag: dict[str, list[dict[str, Any]]] = {}
    for row in trace_rows:
        tag = row.get("tag")
        if tag:
            rows_by_tag.setdefault(str(tag), []).append(dict(row))

    outputs_root = Path(plan["outdir"]) / "outputs"
    records: list[JobRecord] = []
    for dataset in plan.get("datasets") or []:
        dataset_id = dataset["id"]
        for method in plan.get("methods") or []:
            method_id = method["id"]
            method_dir = outputs_root / dataset_id / method_id
            method_record = _record(
                plan,
                rows_by_tag,
                job_id=f"{dataset_id}/{method_id}",
                stage="method",
                component=method,
                dataset_id=dataset_id,
                method_id=method_id,
                publish_dir=method_dir,
                upstream=None,
            )
            records.append(method_record)
            for metric in plan.get("metrics") or []:
                records.append(
                    _record(
                        plan,
                        rows_by_tag,
                        job_id=f"{dataset_id}/{method_id}/{metric['id']}",
                        stage="metric",
                        component=metric,
                        dataset_id=dataset_id,
                        method_id=method_id,
                        publish_dir=method_dir / metric["id"],
                        upstream=method_record,
                    )
                )
    return records
