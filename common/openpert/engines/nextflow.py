"""The distributed engine: run a plan through Nextflow and read back what happened.

``openpert benchmark --engine nextflow`` writes ``plan.json`` (see ``docs/plan_json.md``) and hands
it to the repository's generic ``main.nf`` as ``-params-file``. Nextflow runs every method on every
dataset and every metric on every prediction, publishes outputs into
``<outdir>/outputs/<dataset_id>/<method_id>[/<metric_id>]/`` and writes a trace file. This module
builds the command line and launches it; :mod:`openpert.engines.nextflow_trace` reads the trace
back into job records, so that results are collected exactly as for the local engine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from openpert.files import write_text_atomic

__all__ = ["TRACE_FILE_NAME", "config_profiles", "nextflow_command", "run_nextflow"]

#: Name of the trace file that ``nextflow.config`` writes into the plan's ``outdir``.
TRACE_FILE_NAME = "nextflow_trace.tsv"

#: Exit status Nextflow records when a task was stopped without one (``Integer.MAX_VALUE``).
_NO_EXIT_STATUS = 2**31 - 1


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
