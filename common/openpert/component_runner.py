"""Run one component natively, as ``viash run`` would, without Viash or Docker.

The script's ``## VIASH START`` ... ``## VIASH END`` block (example values for running the script by
hand) is replaced by the real ``par`` and ``meta``. The script runs in a fresh work directory that
holds only its declared inputs (hard links, or copies across file systems: never symlinks, which
would reveal where the other files of the dataset lie), under a time and a memory limit, with its
output captured to a log. Inputs are validated before, outputs after; an output only reaches its
destination once it is valid.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping

import psutil

from openpert.file_formats import FormatError
from openpert.jobs import EXIT_INVALID, EXIT_MEMORY, EXIT_TIME
from openpert.viash_config import ComponentConfig, ConfigError

VIASH_START = "## VIASH START"
VIASH_END = "## VIASH END"
# Process groups of jobs running now, so that an interrupted benchmark can stop them all.
_ACTIVE: set[int] = set()

_BLOCK = re.compile(r"^[ \t]*## VIASH START[^\n]*\n.*?^[ \t]*## VIASH END[^\n]*$", re.S | re.M)


@dataclasses.dataclass(frozen=True)
class Limits:
    """Resource limits of one job (``None``: unlimited)."""

    time_s: float | None = None
    memory_mb: float | None = None
    cpus: int | None = None


@dataclasses.dataclass
class RunResult:
    """What one run of a component did."""

    exit_code: int
    reason: str
    duration_s: float
    peak_memory_mb: float
    outputs: dict[str, Path]
    log: Path

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0 and not self.reason


# --- the VIASH block ---------------------------------------------------------------------------------
def render_block(par: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    """The Python code that replaces the VIASH block: ``par``, ``meta`` and ``dep`` dictionaries."""

    def lines(name: str, values: Mapping[str, Any]) -> str:
        body = "".join(f"    {key!r}: {value!r},\n" for key, value in values.items())
        return f"{name} = {{\n{body}}}\n"

    return lines("par", par) + lines("meta", meta) + "dep = {}\n"


def substitute_block(source: str, par: Mapping[str, Any], meta: Mapping[str, Any], *, path: Path) -> str:
    """Replace the VIASH block of a Python script's source.

    Raises
    ------
    ConfigError
        When the script has no (or more than one) ``## VIASH START`` / ``## VIASH END`` block.
    """
    found = _BLOCK.findall(source)
    if len(found) != 1:
        what = "no" if not found else "more than one"
        raise ConfigError(f"{path}: {what} '{VIASH_START}' ... '{VIASH_END}' block; a component script needs exactly one")
    return _BLOCK.sub(lambda _: render_block(par, meta).rstrip("\n"), source, count=1)


# --- arguments -------------------------------------------------------------------------------------
def resolve_arguments(config: ComponentConfig, given: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with ``given``, coerced to their types; errors for unknown or missing ones."""
    known = {a.name: a for a in config.arguments}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ConfigError(f"{config.path}: unknown argument(s) {', '.join('--' + u for u in unknown)}; known: {', '.join('--' + k for k in known)}")
    par: dict[str, Any] = {}
    for name, arg in known.items():
        value = given.get(name, arg.default)
        if value is not None and not arg.is_file:
            value = arg.coerce(value, where=str(config.path))
        if value is None and arg.required:
            raise ConfigError(f"{config.path}: --{name} is required")
        par[name] = value
    return par


def _link_or_copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dest)
        return
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


def _move(src: Path, dest: Path) -> None:
    """Publish an output: rename when possible (atomic), else copy to a temp name and rename."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(src, dest)
    except OSError:
        tmp = dest.with_name(f".{dest.name}.tmp")
        if src.is_dir():
            shutil.copytree(src, tmp, dirs_exist_ok=True)
        else:
            shutil.copy2(src, tmp)
        os.replace(tmp, dest)


# --- running ------------------------------------------------------------------------------------------
def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue  # the process ended between listing and measuring: it holds no memory now
    return total


def _high_water_mark_kb(pid: int) -> int:
    """Peak resident size of a process so far (``VmHWM``), in kB; 0 where /proc does not tell."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return 0  # the process has ended (or this is not Linux): the polled sizes stand alone
    return 0


def _last_error_line(log: Path) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""


def execute(
    cmd: list[str],
    *,
    cwd: Path,
    log: Path,
    limits: Limits,
    env: Mapping[str, str] | None = None,
    poll_s: float = 0.1,
) -> tuple[int, str, float, float]:
    """Run ``cmd``, enforce limits, capture output.

    Returns
    -------
    exit_code, reason, duration_s, peak_memory_mb
        The exit code follows the shell's convention for signals (``128 + signal``); a job killed
        for exceeding its memory limit exits 137, one stopped at its time limit 143.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    peak = 0
    reason = ""
    forced: int | None = None
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=dict(env) if env is not None else None, start_new_session=True)
        _ACTIVE.add(proc.pid)
        ps = psutil.Process(proc.pid)
        # Poll quickly at first so that short jobs do not pay for a long sleep; back off after.
        delay = 0.005
        kill_at: float | None = None
        status: int | None = None
        hwm_kb = 0
        while True:
            pid, wstatus, _ = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status = wstatus
                break
            peak = max(peak, _tree_rss(ps))
            hwm_kb = max(hwm_kb, _high_water_mark_kb(proc.pid))
            elapsed = time.perf_counter() - start
            if forced is None and limits.memory_mb is not None and peak > limits.memory_mb * 2**20:
                reason = f"memory limit exceeded (peak {peak / 2**20:.0f} MB > {limits.memory_mb:.0f} MB)"
                forced = EXIT_MEMORY
                _kill_group(proc.pid, signal.SIGKILL)
            elif forced is None and limits.time_s is not None and elapsed > limits.time_s:
                reason = f"time limit exceeded ({limits.time_s:g} s)"
                forced = EXIT_TIME
                _kill_group(proc.pid, signal.SIGTERM)
                kill_at = elapsed + 5.0  # a grace period to clean up, then SIGKILL
            elif kill_at is not None and elapsed > kill_at:
                _kill_group(proc.pid, signal.SIGKILL)
                kill_at = None
            time.sleep(delay)
            delay = min(delay * 1.5, poll_s)
        proc.returncode = os.waitstatus_to_exitcode(status)
    # Children that outlive the script would keep writing into a work dir we are about to publish.
    _kill_group(proc.pid, signal.SIGKILL)
    _ACTIVE.discard(proc.pid)
    duration = time.perf_counter() - start
    # The script's own high-water mark catches peaks between two polls. (ru_maxrss of wait4 would
    # not do: Linux carries the parent's resident size at fork across exec into it.)
    peak_mb = max(peak / 2**20, hwm_kb / 1024)
    code = proc.returncode
    if code < 0:
        code = 128 - code
    if forced is not None:
        code = forced
    elif code != 0:
        reason = f"exited with code {code}: {_last_error_line(log)}"
    return code, reason, duration, peak_mb


def kill_active_jobs() -> None:
    """Kill the process groups of every job still running (used when a run is interrupted)."""
    for pid in list(_ACTIVE):
        _kill_group(pid, signal.SIGKILL)


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return  # the group has already gone


def run_component(
    config: ComponentConfig,
    args: Mapping[str, Any],
    *,
    work_dir: str | Path,
    limits: Limits = Limits(),
    log: str | Path | None = None,
    context: Mapping[str, str | Path] | None = None,
    allowed_input_formats: set[str] | None = None,
    validate: bool = True,
) -> RunResult:
    """Run a component on the given arguments.

    Parameters
    ----------
    config
        The component.
    args
        Argument name (no dashes) -> value. File inputs are paths; file outputs are where the
        outputs should be published. Missing arguments take their defaults.
    work_dir
        A fresh folder for the run (created; must not exist or be empty).
    limits
        Time and memory limits; ``cpus`` sets the thread count of numerical libraries.
    log
        Where to write stdout/stderr (default ``work_dir/output.log``).
    context
        Format id -> path of other files of the dataset, for the output formats' shape rules
        (e.g. the test file a prediction must match, which the component itself may not read).
    allowed_input_formats
        When given, a file input of any other format is refused before anything runs. The
        engines pass the task's method formats for components of type ``method``.
    validate
        Validate inputs and outputs against their formats.

    Returns
    -------
    RunResult
        A non-zero ``exit_code`` or a ``reason`` means the run failed; outputs are published only
        when it succeeded.

    Raises
    ------
    ConfigError
        For errors in the call itself (unknown arguments, missing required ones, a method given
        a file it may not read): nothing ran.
    """
    work_dir = Path(work_dir).resolve()
    if work_dir.exists() and any(work_dir.iterdir()):
        raise ConfigError(f"{work_dir}: the work directory must be new or empty")
    par = resolve_arguments(config, args)
    log = Path(log).resolve() if log is not None else work_dir / "output.log"
    if allowed_input_formats is not None:
        for arg in config.file_inputs:
            if par.get(arg.name) is not None and arg.format_id not in allowed_input_formats:
                raise ConfigError(f"{config.path}: --{arg.name} reads {arg.format_id or 'an undeclared format'}, "
                                  f"which a {config.type or 'component'} may not read (allowed: {sorted(allowed_input_formats)})")

    work_dir.mkdir(parents=True, exist_ok=True)
    resources_dir = work_dir / ".resources"
    temp_dir = work_dir / ".tmp"
    temp_dir.mkdir()
    start = time.perf_counter()

    def failed(code: int, reason: str) -> RunResult:
        if not log.exists():
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(reason + "\n")
        return RunResult(code, reason, time.perf_counter() - start, 0.0, {}, log)

    # Stage inputs: validate, then link into the work dir under their own names.
    validation_context: dict[str, Path] = {k: Path(v) for k, v in (context or {}).items()}
    script_par = dict(par)
    used_names: set[str] = set()
    for arg in config.file_inputs:
        value = par.get(arg.name)
        if value is None:
            continue
        sources = [Path(v).resolve() for v in (value if isinstance(value, list) else [value])]
        staged = []
        for src in sources:
            if not src.exists():
                return failed(EXIT_INVALID, f"input --{arg.name}: {src}: file not found")
            name = src.name if src.name not in used_names else f"{arg.name}_{src.name}"
            used_names.add(name)
            _link_or_copy(src, work_dir / name)
            staged.append(str(work_dir / name))
            if arg.format_id:
                validation_context.setdefault(arg.format_id, src)
        script_par[arg.name] = staged if arg.multiple else staged[0]
    if validate:
        for arg in config.file_inputs:
            if par.get(arg.name) is not None and arg.file_format is not None:
                for src in (par[arg.name] if isinstance(par[arg.name], list) else [par[arg.name]]):
                    try:
                        arg.file_format.validate(src, validation_context)
                    except FormatError as err:
                        return failed(EXIT_INVALID, f"invalid input --{arg.name}: {err}")
    # Outputs are written inside the work dir and published after validation.
    destinations: dict[str, Path] = {}
    for arg in config.file_outputs:
        value = par.get(arg.name)
        if value is None:
            continue
        dest = Path(value).resolve()
        destinations[arg.name] = dest
        script_par[arg.name] = str(work_dir / dest.name)

    # Copy the component's resources; the script gets the real values in place of its VIASH block.
    resources_dir.mkdir()
    for res in config.resources:
        src = config.resource_path(res)
        if not src.exists():
            return failed(EXIT_INVALID, f"{config.path}: resource {res.get('path')!r} not found")
        dest = resources_dir / (res.get("dest") or src.name)
        if src.is_dir():
            shutil.copytree(src, dest)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
    script = resources_dir / config.script.name
    memory_b = int(limits.memory_mb * 2**20) if limits.memory_mb else None
    meta = {
        "name": config.name,
        "functionality_name": config.name,
        "resources_dir": str(resources_dir),
        "executable": str(script),
        "config": str(config.path),
        "temp_dir": str(temp_dir),
        "cpus": limits.cpus,
        "memory_b": memory_b,
        "memory_kb": memory_b // 2**10 if memory_b else None,
        "memory_mb": memory_b // 2**20 if memory_b else None,
        "memory_gb": memory_b // 2**30 if memory_b else None,
    }
    if config.script_type != "python_script":
        return failed(EXIT_INVALID, f"{config.path}: only python_script components run natively (got {config.script_type!r})")
    script.write_text(substitute_block(config.script.read_text(), script_par, meta, path=config.script))

    env = dict(os.environ)
    env["TMPDIR"] = str(temp_dir)
    env["VIASH_TEMP"] = str(temp_dir)
    env["PYTHONUNBUFFERED"] = "1"
    if limits.cpus:
        # Numerical libraries otherwise start a thread per core in every parallel job.
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
            env.setdefault(var, str(limits.cpus))
    code, reason, duration, peak_mb = execute([sys.executable, str(script)], cwd=work_dir, log=log, limits=limits, env=env)
    if code != 0:
        return RunResult(code, reason, duration, peak_mb, {}, log)

    produced: dict[str, Path] = {}
    for arg in config.file_outputs:
        if arg.name not in destinations:
            continue
        out = Path(script_par[arg.name])
        if not out.exists():
            if arg.required:
                return RunResult(EXIT_INVALID, f"output --{arg.name}: the script did not write {out.name}", duration, peak_mb, {}, log)
            continue
        if validate and arg.file_format is not None:
            try:
                arg.file_format.validate(out, validation_context)
            except FormatError as err:
                return RunResult(EXIT_INVALID, f"invalid output --{arg.name}: {err}", duration, peak_mb, {}, log)
        produced[arg.name] = out
    for name, out in produced.items():
        _move(out, destinations[name])
    return RunResult(0, "", duration, peak_mb, {n: destinations[n] for n in produced}, log)
