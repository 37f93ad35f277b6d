"""Run one component natively, as ``viash run`` would, without Viash or Docker.

The script's ``## VIASH START`` ... ``## VIASH END`` block (example values for running the script by
hand) is replaced by the real ``par`` and ``meta``, on as many lines, so that a traceback's line
numbers are the source's. The script runs in a fresh work directory that holds only its declared
inputs (hard links, or copies across file systems: never symlinks, which would reveal where the
other files of the dataset lie), under a time and a memory limit, with its output captured to a
log. It starts in an empty folder of its own (:data:`START_DIR`), not the one its outputs are
written to: an output reaches the harness only through the path ``par`` gives. Inputs are
validated before, outputs after; an output only reaches its destination once it is valid.

Where bubblewrap works, the script runs in a sandbox (:mod:`openpert.run.sandbox`): the work
directory appears at ``/job``, the staged inputs and resources read-only, and ``par``/``meta``
carry those sandbox paths. Where it does not, the script runs unsandboxed, with a warning in the
log (and once per process in Python's log); ``RunResult.sandbox`` says which.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import shutil
import stat
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from openpert.config.formats import FormatError, compared_attribute
from openpert.config.viash import PROJECT_FILE, Argument, ComponentConfig, ConfigError, as_list
from openpert.engines.resource_labels import label_advice, parse_label_resources
from openpert.files import read_tail, shown_path
from openpert.run import forkserver
from openpert.run import sandbox as sandboxing
from openpert.run.llm_proxy import ENV_RELAY, RELAY_PORT, LLMProxy, LLMProxyError
from openpert.run.process import DiskMeter, Limits, PeakReport, execute
from openpert.run.records import EXIT_DISK, EXIT_INVALID, EXIT_MEMORY, EXIT_TIME
from openpert.run.viash_block import substitute_block

log_ = logging.getLogger(__name__)

#: ``RunResult.sandbox`` of a job run in a bubblewrap sandbox, and of one run without.
SANDBOX_BWRAP = "bubblewrap"
SANDBOX_NONE = "none"
_warned_unsandboxed = False

#: How a job's script is run: ``python -c FAST_EXIT_LAUNCHER REPORT_FD TASKS script.py args...`` runs
#: the script as ``python script.py args...`` would (``__main__``, its ``sys.argv`` and ``sys.path[0]``).
#: ``TASKS`` (``-1``: none) is the job's ``RLIMIT_NPROC``, set before the script runs (see
#: :func:`task_limit`).
#: When ``$OPENPERT_LLM_RELAY`` is ``<socket> <port>`` (a language-model component in a sandbox, whose
#: network namespace has nothing but its loopback), the launcher first listens on ``127.0.0.1:<port>``
#: and relays every connection to the Unix socket of the harness's proxy
#: (:mod:`openpert.run.llm_proxy`), from one thread that waits on all of them (``selectors``): one
#: task, whatever the number of requests in flight. The variable is removed before the script runs.
#: As the script ends, even by an exception, the launcher writes its peak resident size in kB
#: (``VmHWM``) to the file descriptor ``REPORT_FD`` (``-1``: none; see
#: :class:`openpert.run.process.PeakReport`). Once the script has returned, the exit handlers run,
#: the streams are flushed and the interpreter leaves without tearing its modules down, which
#: costs about 0.15 s a job for the scientific stack (seconds under load). An exception or
#: ``sys.exit`` in the script exits as usual.
FAST_EXIT_LAUNCHER = """\
import atexit, os, runpy, sys
report, tasks = int(sys.argv[1]), int(sys.argv[2])
sys.argv = sys.argv[3:]
if tasks >= 0:
    import resource
    resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))
sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
relay = os.environ.pop('OPENPERT_LLM_RELAY', '')
if relay:
    import selectors, socket, threading
    where, port = relay.rsplit(' ', 1)
    listener = socket.create_server(('127.0.0.1', int(port)), backlog=128)
    def pump():
        select, peer, live = selectors.DefaultSelector(), {}, set()
        select.register(listener, selectors.EVENT_READ)
        def close(*socks):
            for one in socks:
                if one in live:
                    select.unregister(one)
                    live.discard(one)
                peer.pop(one, None)
                one.close()
        while True:
            for key, _ in select.select():
                sock = key.fileobj
                if sock is listener:
                    client, upstream = listener.accept()[0], socket.socket(socket.AF_UNIX)
                    try:
                        upstream.connect(where)
                    except OSError:
                        close(client, upstream)
                        continue
                    peer[client], peer[upstream] = upstream, client
                    for one in (client, upstream):
                        select.register(one, selectors.EVENT_READ)
                        live.add(one)
                    continue
                other = peer[sock]
                try:
                    data = sock.recv(65536)
                    if data:
                        other.sendall(data)
                        continue
                    other.shutdown(socket.SHUT_WR)
                except OSError:
                    close(sock, other)
                    continue
                select.unregister(sock)
                live.discard(sock)
                if other not in live:
                    close(sock, other)
    threading.Thread(target=pump, name='openpert-llm-relay', daemon=True).start()
try:
    runpy.run_path(sys.argv[0], run_name='__main__')
finally:
    if report >= 0 and os.path.exists('/proc/self/status'):
        with open('/proc/self/status') as status:
            peak = [line.split()[1] for line in status if line.startswith('VmHWM:')]
        try:
            os.write(report, (' '.join(peak) + '\\n').encode())
        except OSError as err:  # the script closed it: the harness keeps its own samples
            sys.stderr.write('openpert launcher: peak memory not reported (%s)\\n' % err)
atexit._run_exitfuncs(); sys.stdout.flush(); sys.stderr.flush(); os._exit(0)
"""


#: Tasks (processes and their threads) per process of a job's process limit, for its ``RLIMIT_NPROC``.
TASKS_PER_PROCESS = 4


def task_limit(limits: Limits, *, sandboxed: bool, uid: int | None = None, kernel: str | None = None) -> int | None:
    """The ``RLIMIT_NPROC`` of a job, or ``None`` where setting it is unsafe or useless.

    The kernel counts ``RLIMIT_NPROC`` per user and per user namespace (Linux 5.14 and later), at
    each level against the limit its creator had: set inside a job's sandbox (its own user
    namespace), it counts that job's tasks only, and the user's other processes count against the
    unchanged limit outside. Without a sandbox, or before 5.14, it would count every process of the
    user on the machine; for root the kernel does not apply it at all. Where it is safe it stops
    a fork bomb in the kernel; the watcher's count (:mod:`openpert.run.process`) holds everywhere.
    It counts threads too: the limit is :data:`TASKS_PER_PROCESS` tasks per allowed process.
    """
    uid = os.getuid() if uid is None else uid
    kernel = os.uname().release if kernel is None else kernel
    if limits.processes is None or not sandboxed or uid == 0:
        return None
    version = re.match(r"(\d+)\.(\d+)", kernel)
    if version is None or (int(version.group(1)), int(version.group(2))) < (5, 14):
        return None
    return limits.processes * TASKS_PER_PROCESS


@dataclasses.dataclass
class RunResult:
    """What one run of a component did."""

    exit_code: int
    reason: str
    duration_s: float
    peak_memory_mb: float
    outputs: dict[str, Path]
    log: Path
    #: How the job was isolated: ``"bubblewrap"`` or ``"none"`` (ran unsandboxed).
    sandbox: str = "none"
    #: What the harness's language-model proxy counted (:data:`openpert.run.llm_proxy.COUNT_KEYS`);
    #: ``None`` when the job had no proxy (no LLM server, or no sandbox).
    llm_usage_counted: dict[str, int] | None = None

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0 and not self.reason


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


def _link_or_copy(src: str | Path, dest: str | Path) -> None:
    """Stage an input: a hard link (a copy across file systems); a folder file by file, the same way."""
    src, dest = Path(src), Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dest, copy_function=_link_or_copy)
        return
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


def _component_id(config: ComponentConfig) -> str:
    """``<task>/<component>`` (the component's name alone outside a task): names its LLM cache."""
    task_dir = config.task_dir
    return f"{task_dir.name}/{config.name}" if task_dir is not None else config.name


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


def sandbox_mode(sandbox: bool | None) -> tuple[str, str]:
    """How a job will be isolated: ``(mode, warning)``, the warning empty unless it runs unsandboxed.

    Parameters
    ----------
    sandbox
        ``None``: bubblewrap when it works here, else none (with a warning); ``True``: bubblewrap
        or an error; ``False``: none.

    Raises
    ------
    ConfigError
        ``sandbox=True`` where bubblewrap does not work.
    """
    global _warned_unsandboxed
    if sandbox is False:
        return SANDBOX_NONE, ""
    if sandboxing.available():
        return SANDBOX_BWRAP, ""
    why = sandboxing.unavailable_reason()
    if sandbox:
        raise ConfigError(f"a sandbox was required but bubblewrap cannot be used here: {why}")
    warning = (f"openpert: WARNING: this job runs WITHOUT a sandbox ({why}): it can read and write everything "
               "this user can. Install bubblewrap (scripts/install_system_deps.sh) to isolate jobs.")
    if not _warned_unsandboxed:
        _warned_unsandboxed = True
        log_.warning(warning)
    return SANDBOX_NONE, warning


#: How a failed read of a path shows in a job's log: Python's FileNotFoundError, or a C library's ENOENT.
_MISSING_PATH = re.compile(r"(?:FileNotFoundError: \[Errno 2\] [^:\n]*: |No such file or directory: |"
                           r"unable to open file: name = |ENOENT[^'\"\n/]*)['\"]?(?P<path>/[^'\",\s]+)")


def undeclared_path_hint(config: ComponentConfig, log: Path, reason: str) -> str:
    """What to add to a failed job's reason when it failed on a path that does not exist (``""`` if it did not).

    Under the sandbox a job sees its declared inputs only: a path of the host that the script
    reads (a dataset file it was not given, a file of the repository) does not exist there. The
    hint names the path and where the inputs a component may read are declared.

    Parameters
    ----------
    config
        The component.
    log
        The job's log (its last 64 kB are searched).
    reason
        The job's reason so far (its last line of output).
    """
    try:
        text = reason + "\n" + read_tail(log, 64 * 1024).decode(errors="replace")
    except OSError:
        text = reason
    found = _MISSING_PATH.findall(text)
    if not found:
        return ""
    path = found[-1]
    where = [shown_path(config.path, config.root)]
    task_dir = config.task_dir
    if task_dir is not None and config.type:
        api = task_dir / "api" / f"comp_{config.type}.yaml"
        where.append(shown_path(api if api.exists() else task_dir / "api", config.root))
    return (f" ({path} does not exist for the job: a component reads only its declared inputs, which it is "
            f"given through par; the allowed inputs are listed in {' and '.join(where)})")


#: Exit code of a job stopped at a limit -> the limit (a field of :class:`~openpert.run.process.Limits`).
_LIMIT_OF_EXIT = {EXIT_TIME: "time_s", EXIT_MEMORY: "memory_mb", EXIT_DISK: "disk_mb"}


def limit_hint(config: ComponentConfig, code: int) -> str:
    """What to add to the reason of a job stopped at a limit: its label and the next one up (``""`` if none).

    Rerunning a job that ran out of time runs out of time again: the fix is a larger label (or a
    faster component), so the reason names both labels and the config that holds them.
    """
    key = _LIMIT_OF_EXIT.get(code)
    if key is None:
        return ""
    try:
        resources = parse_label_resources(config.root / PROJECT_FILE)
    except ValueError:
        return ""  # the limits came from elsewhere (no labels): there is no label to raise
    advice = label_advice(config.labels, resources, key, config=shown_path(config.path, config.root))
    return f"; {advice}" if advice else ""


#: The folder a job starts in, inside its work folder: empty, writable, and not where its outputs go.
START_DIR = ".start"


def missing_output_reason(name: str, given: str, start_dir: Path) -> str:
    """The reason of a job that did not write a required output: the ``par`` entry and the path it held.

    A script that writes a name of its own (``'prediction.h5ad'``) in place of ``par[name]`` leaves
    it in the folder it started in; the reason says so when it finds it there.
    """
    reason = f"output --{name}: the script did not write par[{name!r}] ({given}); write the output to the path par[{name!r}] holds"
    stray = sorted(entry.name for entry in start_dir.iterdir()) if start_dir.is_dir() else []
    if stray:
        reason += (f", not to a name of its own (it wrote {', '.join(stray[:5])}{' ...' if len(stray) > 5 else ''} "
                   "in the folder it started in)")
    return reason


def claimed_identity_problem(config: ComponentConfig, output: Path, inputs: Mapping[str, Path]) -> str:
    """What a method's output says of whose it is that is not so, or ``""``.

    A prediction's ``uns['method_id']`` is the method's name, and its ``uns['dataset_id']`` the id
    its dataset's files (``inputs``, the job's staged inputs, by argument) hold: a method cannot pass itself off as a control (whose score sets the
    scale) nor file its prediction under another dataset. Only h5ad outputs of methods and control
    methods that carry these keys are checked; the values are read alone, not the file.
    """
    if config.type not in ("method", "control_method") or output.suffix != ".h5ad":
        return ""

    def claim(path: Path, key: str) -> str | None:
        try:
            value = compared_attribute(path, f"uns:{key}")
        except KeyError:
            return None
        return str(value) if np.isscalar(value) else None  # an id is a scalar; anything else claims nothing

    claimed = claim(output, "method_id")
    if claimed is not None and claimed != config.name:
        return f"uns['method_id'] is {claimed!r}, but the job ran {config.name!r}"
    claimed = claim(output, "dataset_id")
    datasets = {d for d in (claim(p, "dataset_id") for p in inputs.values() if p.suffix == ".h5ad") if d is not None}
    if claimed is not None and datasets and claimed not in datasets:
        return f"uns['dataset_id'] is {claimed!r}, but its inputs are of dataset {', '.join(sorted(datasets))}"
    return ""


def output_file_problem(path: Path) -> str:
    """Why an output may not be read, or ``""``: only regular files (and folders of them) are outputs.

    Checked with :func:`os.lstat` before anything opens the output: a symbolic link would make the
    harness read (and publish) a file the job chose outside its sandbox, and a FIFO or device would
    block the reader forever, after the job's time limit has stopped counting.
    """
    def kind(mode: int) -> str:
        return "a symbolic link" if stat.S_ISLNK(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a special file"

    mode = os.lstat(path).st_mode
    if stat.S_ISREG(mode):
        return ""
    if not stat.S_ISDIR(mode):
        return f"{path.name} is {kind(mode)}, not a regular file"
    for folder, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            entry = Path(folder) / name
            entry_mode = os.lstat(entry).st_mode
            if not (stat.S_ISREG(entry_mode) or stat.S_ISDIR(entry_mode)):
                return f"{entry.relative_to(path.parent)} is {kind(entry_mode)}, not a regular file"
    return ""


def copy_resources(config: ComponentConfig, resources_dir: Path) -> None:
    """Copy the component's resources into the new folder ``resources_dir``, each at its ``dest`` as Viash lays them out.

    Raises
    ------
    ConfigError
        When a declared resource does not exist.
    """
    resources_dir.mkdir()
    for res in config.resources:
        src = config.resource_path(res)
        if not src.exists():
            raise ConfigError(f"{config.path}: resource {res.get('path')!r} not found")
        dest = resources_dir / (res.get("dest") or src.name)
        if src.is_dir():
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)


def run_component(config: ComponentConfig, args: Mapping[str, Any], *, work_dir: str | Path,
                  limits: Limits | None = None, log: str | Path | None = None,
                  context: Mapping[str, str | Path] | None = None, allowed_input_formats: set[str] | None = None,
                  validate: bool = True, sandbox: bool | None = None,
                  on_llm_proxy: Callable[[LLMProxy], None] | None = None) -> RunResult:
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
    sandbox
        ``None`` (the default): run in a bubblewrap sandbox when bubblewrap works here, else
        without one, with a warning; ``True``: require the sandbox; ``False``: run without.
    on_llm_proxy
        Called with the job's language-model proxy once it serves, before the job starts (not
        called for a job without one): a caller may read its :attr:`~LLMProxy.progress` from
        another thread while the job runs.

    Returns
    -------
    RunResult
        A non-zero ``exit_code`` or a ``reason`` means the run failed; outputs are published only
        when it succeeded.

    Raises
    ------
    ConfigError
        For errors in the call itself (unknown arguments, missing required ones, a method given
        a file it may not read, a sandbox required where bubblewrap does not work): nothing ran.
    """
    limits = limits if limits is not None else Limits()
    mode, warning = sandbox_mode(sandbox)
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
    # The job starts in an empty folder of its own, not where its outputs are written: a script that
    # writes a name of its own in place of par["output"] fails here as it would anywhere else.
    start_dir = work_dir / START_DIR
    start_dir.mkdir()
    start = time.perf_counter()
    llm = sandboxing.needs_llm(config)
    box = sandboxing.Sandbox(work_dir) if mode == SANDBOX_BWRAP else None
    # The script sees sandbox paths (/job/...) in a sandbox, host paths without one.
    seen_as = box.inside if box is not None else str

    def failed(code: int, reason: str) -> RunResult:
        if not log.exists():
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(reason + "\n")
        return RunResult(code, reason, time.perf_counter() - start, 0.0, {}, log, mode)

    # Stage inputs: validate, then link into the work dir under their own names.
    validation_context: dict[str, Path] = {k: Path(v) for k, v in (context or {}).items()}
    script_par = dict(par)
    used_names: set[str] = set()
    input_files: dict[str, Path] = {}  # the staged inputs (validated below), by argument
    given: list[tuple[Argument, Any]] = []  # each input file as the call gave it, by argument
    for arg in config.file_inputs:
        if par.get(arg.name) is None:
            continue
        staged = []
        for value in as_list(par[arg.name]):
            given.append((arg, value))
            src = Path(value).resolve()
            if not src.exists():
                return failed(EXIT_INVALID, f"input --{arg.name}: {src}: file not found")
            name = src.name if src.name not in used_names else f"{arg.name}_{src.name}"
            used_names.add(name)
            _link_or_copy(src, work_dir / name)
            staged.append(seen_as(work_dir / name))
            if box is not None:
                # A hard link shares the dataset's inode: only a read-only mount keeps writes out.
                box.read_only.append(work_dir / name)
            if arg.format_id:
                validation_context.setdefault(arg.format_id, src)
            input_files.setdefault(arg.name, src)
        script_par[arg.name] = staged if arg.multiple else staged[0]
    for arg, value in given if validate else []:
        if arg.file_format is not None:
            try:
                arg.file_format.validate(value, validation_context, memory_mb=limits.memory_mb)
            except FormatError as err:
                return failed(EXIT_INVALID, f"invalid input --{arg.name}: {err}")
    # Outputs are written inside the work dir and published after validation.
    destinations: dict[str, Path] = {}
    written: dict[str, Path] = {}
    for arg in config.file_outputs:
        value = par.get(arg.name)
        if value is None:
            continue
        dest = Path(value).resolve()
        destinations[arg.name] = dest
        # An output named like a staged input (de_train.h5ad in, de_train.h5ad out) gets its own name.
        name = dest.name if dest.name not in used_names else f"{arg.name}_{dest.name}"
        used_names.add(name)
        written[arg.name] = work_dir / name
        script_par[arg.name] = seen_as(work_dir / name)

    # Copy the component's resources; the script gets the real values in place of its VIASH block.
    try:
        copy_resources(config, resources_dir)
    except ConfigError as err:
        return failed(EXIT_INVALID, str(err))
    script = resources_dir / config.script.name
    (resources_dir / ".config.vsh.yaml").write_text(config.public_yaml)
    memory_b = int(limits.memory_mb * 2**20) if limits.memory_mb else None
    meta = {
        "name": config.name,
        "functionality_name": config.name,
        "resources_dir": seen_as(resources_dir),
        "executable": seen_as(script),
        # As in a Viash build: the merged config beside the script, not the repository's file.
        "config": seen_as(resources_dir / ".config.vsh.yaml"),
        "temp_dir": seen_as(temp_dir),
        "cpus": limits.cpus,
        "memory_b": memory_b,
        "memory_kb": memory_b // 2**10 if memory_b else None,
        "memory_mb": memory_b // 2**20 if memory_b else None,
        "memory_gb": memory_b // 2**30 if memory_b else None,
    }
    if config.script_type != "python_script":
        return failed(EXIT_INVALID, f"{config.path}: only python_script components run natively (got {config.script_type!r})")
    llm_cache = None
    proxy: LLMProxy | None = None
    if box is not None and llm:
        # No network: the job reaches its server only through the harness's proxy, on a socket
        # bound read-only into its work folder, relayed to a port of its own loopback.
        upstream = par.get("llm_base_url") or os.environ.get("OPENPERT_LLM_BASE_URL")
        if upstream:
            socket_dir = work_dir / ".llm"
            socket_dir.mkdir()
            # The API key stays with the proxy, out of the job's reach (and of what it may publish).
            api_key = par.get("llm_api_key") or os.environ.get("OPENPERT_LLM_API_KEY")
            try:
                proxy = LLMProxy(str(upstream), socket_dir / "llm.sock", api_key=api_key)
            except LLMProxyError as err:
                return failed(EXIT_INVALID, f"{config.path}: {err}")
            box.read_only.append(socket_dir)
            if par.get("llm_base_url"):
                script_par["llm_base_url"] = proxy.job_base_url()
            if par.get("llm_api_key"):
                script_par["llm_api_key"] = None
        llm_cache = sandboxing.llm_cache_folder(par.get("llm_cache_dir"), _component_id(config))
        if llm_cache is not None:
            try:
                llm_cache.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                return failed(EXIT_INVALID, f"{llm_cache}: cannot create the LLM generation cache: {err}")
            box.writable[sandboxing.LLM_CACHE_DIR] = llm_cache
        box.shared += sandboxing.local_model_paths(par.get("llm_model"), os.environ.get("OPENPERT_LLM_MODEL"),
                                                    os.environ.get("OPENPERT_LLM_TOKENIZER"))
        if par.get("llm_cache_dir") is not None:
            # An explicit folder is bound at the sandbox's cache path; "none" stays "none".
            script_par["llm_cache_dir"] = str(sandboxing.LLM_CACHE_DIR) if llm_cache is not None else par["llm_cache_dir"]
    # The text-embedding cache of the component's trust group (metrics and loaders, or methods).
    embed_cache = sandboxing.embedding_cache_folder(config)
    if embed_cache is not None:
        try:
            embed_cache.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            return failed(EXIT_INVALID, f"{embed_cache}: cannot create the text-embedding cache: {err}")
        if box is not None:
            box.writable[sandboxing.EMBED_CACHE_DIR] = embed_cache
    script.write_text(substitute_block(config.script.read_text(), script_par, meta, path=config.script))

    report = PeakReport()
    tasks = task_limit(limits, sandboxed=box is not None)

    joined: forkserver.JobStart | None = None
    if box is not None:
        box.read_only.append(resources_dir)
        box.chdir = PurePosixPath(box.inside(start_dir))
        box.env = sandboxing.job_environment(cpus=limits.cpus, llm=llm, llm_cache=llm_cache is not None,
                                             embed_cache=embed_cache is not None)
        if proxy is not None:
            box.env["OPENPERT_LLM_BASE_URL"] = proxy.job_base_url()
            box.env[ENV_RELAY] = f"{box.inside(proxy.socket_path)} {RELAY_PORT}"
        python = str(sandboxing.python_environment().executable)
        env = box.env  # bubblewrap's own environment too: the sandbox's PID 1 shows it
        server_env = sandboxing.job_environment(cpus=limits.cpus, llm=False, llm_cache=False)
    else:
        python = sys.executable
        # The same threads as in the sandbox: the label's, never the host's.
        server_env = {**os.environ, "PYTHONUNBUFFERED": "1", **sandboxing.thread_environment(limits.cpus)}
        env = {**server_env, "TMPDIR": str(temp_dir), "VIASH_TEMP": str(temp_dir)}
        if embed_cache is not None:
            env[sandboxing.ENV_EMBED_CACHE] = str(embed_cache)

    def fresh_interpreter(report: PeakReport) -> list[str]:
        # Bytecode is used only where it matches its source (hash-based .pyc files included), so what
        # the job runs is what its cache key hashed (openpert.engines.cache_keys).
        cmd = [python, "--check-hash-based-pycs", "always", "-c", FAST_EXIT_LAUNCHER, str(report.write_fd),
               str(tasks if tasks is not None else -1), seen_as(script)]
        return box.command(cmd) if box is not None else cmd

    # The same job forked from a server that has imported the scientific stack already: into its
    # sandbox, or (a component test in its image's environment runs hundreds of jobs without one)
    # beside an anchor, with the harness's privileges as a fresh interpreter would have.
    server = forkserver.server_for(server_env, FAST_EXIT_LAUNCHER)
    if server is None:
        cmd = fresh_interpreter(report)
    else:
        joined = forkserver.JobStart(server, argv=[seen_as(script)], env=env, cwd=seen_as(start_dir), tasks=tasks,
                                     report_fd=report.write_fd, sandboxed=box is not None)
        cmd = joined.anchor_argv(python)
        if box is not None:
            cmd = box.command(cmd, info_fd=joined.info_fd)
    header = warning + "\n" if warning else ""
    # What the job writes counts toward its disk limit (its resources too: a few files, and
    # writable without a sandbox); its staged inputs do not (links of the dataset's files).
    disk = DiskMeter(work_dir, exclude=[work_dir / name for name in used_names if (work_dir / name).exists()], files=[log])
    if proxy is not None:
        try:
            proxy.start()
        except OSError as err:
            return failed(EXIT_INVALID, f"cannot start the language-model proxy at {proxy.socket_path}: {err}")
    try:
        if proxy is not None and on_llm_proxy is not None:
            on_llm_proxy(proxy)
        try:
            code, reason, duration, peak_mb = execute(cmd, cwd=start_dir, log=log, limits=limits, env=env,
                                                      sandboxed=box is not None, header=header, peak_report=report,
                                                      disk=disk, joined=joined)
        except forkserver.ForkServerError as err:
            assert joined is not None
            # No code of the job ran: it starts again in a fresh interpreter, and so do the
            # jobs after it.
            log_.warning("openpert: %s; jobs start a fresh interpreter from now on", err)
            forkserver.retire(joined.server)
            report = PeakReport()
            code, reason, duration, peak_mb = execute(fresh_interpreter(report), cwd=start_dir, log=log, limits=limits,
                                                      env=env, sandboxed=box is not None, header=header,
                                                      peak_report=report, disk=disk)
    finally:
        if proxy is not None:
            proxy.stop()
    counted = proxy.counts if proxy is not None else None

    def ended(code: int, reason: str, outputs: dict[str, Path] | None = None) -> RunResult:
        return RunResult(code, reason, duration, peak_mb, outputs or {}, log, mode, llm_usage_counted=counted)

    if code != 0:
        # In a sandbox, a path the script was not given does not exist: say so, and where inputs are declared.
        hint = undeclared_path_hint(config, log, reason) if box is not None else ""
        return ended(code, reason + hint + limit_hint(config, code))

    produced: dict[str, Path] = {}
    for arg in config.file_outputs:
        if arg.name not in destinations:
            continue
        out = written[arg.name]  # where the script wrote it (par may name /job/...)
        if not os.path.lexists(out):
            if arg.required:
                return ended(EXIT_INVALID, missing_output_reason(arg.name, script_par[arg.name], start_dir))
            continue
        problem = output_file_problem(out)
        if not problem and validate and arg.file_format is not None:
            try:
                # Read within the job's own memory limit: an output cannot take more of the harness's.
                arg.file_format.validate(out, validation_context, memory_mb=limits.memory_mb)
            except FormatError as err:
                problem = str(err)
            else:
                problem = claimed_identity_problem(config, out, input_files)
        if problem:
            return ended(EXIT_INVALID, f"invalid output --{arg.name}: {problem}")
        produced[arg.name] = out
    for name, out in produced.items():
        _move(out, destinations[name])
    return ended(0, "", {n: destinations[n] for n in produced})
