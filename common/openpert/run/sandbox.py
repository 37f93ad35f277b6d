"""Build the bubblewrap (``bwrap``) command line that isolates one job, and tell whether it works here.

A benchmark runs code from pull requests next to the datasets, the solutions and the results that
score it. The sandbox lets a job see only what it was given.

What a job sees
---------------
``/job``
    Its own work folder (the host's ``<work_dir>``), writable: outputs are written here. Every staged
    input (a hard link of the dataset file, or a folder of them) is bound read-only on top of its
    own name, so that no write reaches the dataset through the shared inode (``h5py`` ``r+`` and
    ``open(..., "r+b")`` fail with "read-only file system").
``/job/.resources``
    The component's resources (its script, its task library), read-only.
``/job/.start``
    Where a component's job starts (its current folder): empty and writable, and not the folder its
    outputs are written to, so that an output reaches the harness only through the path ``par`` gives.
``/tmp`` and ``/home/job``
    Private, writable: the host folders ``<work_dir>/.tmp`` and ``<work_dir>/.home``. Disk rather
    than a tmpfs, because tmpfs pages would escape the memory limit (they belong to no process).
The Python environment, read-only
    The virtual environment (``sys.prefix``) and the base interpreter (``sys.base_prefix`` and
    what the venv's ``python`` links to) at their own paths: the venv's links and ``pyvenv.cfg``
    name the base, and a job forked from :mod:`openpert.run.forkserver` runs modules imported from
    there. (So ``sys.prefix`` may name the folder of the repository; a path grants nothing, see
    below.) Science packages installed in editable mode from the repository
    (``pertsci``) are bound alone, at ``/opt/openpert/lib/<name>``, which ``PYTHONPATH`` names: the
    editable install's own path entry (the repository's ``common/``) does not exist in the
    sandbox, so the rest of the repository (the harness included) stays out of reach. (The
    venv's console scripts name the host's interpreter path in their ``#!`` line and do not run
    inside; a component runs tools as ``python -m ...``.)
The system, read-only
    ``/usr`` (and ``/bin``, ``/lib*``, ``/sbin`` as the host has them: links into ``/usr`` or
    folders), the few files of ``/etc`` that programs need (dynamic linker, users, name
    resolution, time zone, certificates; not ``/etc/shadow``), ``/sys/devices/system/cpu`` (for
    the thread pools of numerical libraries), NVIDIA device files when the host has them.
A local model, for LLM components only
    When ``--llm_model`` or ``$OPENPERT_LLM_MODEL`` names an existing folder (in-process vLLM), it
    is bound read-only at its own path.
``/proc``, ``/dev``
    A private ``/proc`` of a new PID namespace (the job sees its own processes only) and a minimal
    ``/dev``.

What a job does not see: the repository, the results folder, the shared data folder (unless it is
a declared input, staged like any other), other files of its dataset, the host's processes, the
network (none: a dataset loader's public files are fetched by the data store before its job; a
component that talks to a language model, it declares ``--llm_base_url``, reaches its server only,
through :mod:`openpert.run.llm_proxy`), the host's environment variables.

What it can still learn, and why that is accepted: the host paths of what is bound into it, from
``/proc/self/mountinfo`` (a bind mount shows its source), from bubblewrap's command line (its PID
1's) and from the link of its stdout (the log file). Knowing a path grants nothing: what is not
bound cannot be opened. ``par``, ``meta`` and the environment name sandbox paths only.

How
---
``bwrap --unshare-all --unshare-user`` (user, PID, network, IPC, UTS and cgroup namespaces) with
``--disable-userns`` (no nested user namespace, through which a job could regain capabilities);
no ``--share-net`` for any job; ``--die-with-parent`` and ``--new-session``:
when the runner kills bubblewrap (time or memory limit, an interrupted benchmark, the runner's own
death), the job's PID 1 dies and the kernel kills every process of the namespace with it, so no
descendant (not even one that double-forked into its own session) outlives the job. The new user
namespace matters when the runner is root: without it the job would keep root's capabilities
inside the sandbox; with it the job has none. The root of the sandbox is remounted read-only;
``/dev`` stays a small writable tmpfs (``/dev/shm`` for Python's multiprocessing).

Environment
-----------
Only ``PATH`` (the environment's ``bin`` and the system's), ``HOME``, ``LANG``/``LC_ALL``,
``TMPDIR`` (and Viash's ``VIASH_TEMP``), ``PYTHONUNBUFFERED``, ``PYTHONPATH`` (sandbox paths),
the thread-count variables (``OMP_NUM_THREADS`` ...: the job's CPU count, whatever the host sets;
:func:`thread_environment`), the host's OpenBLAS kernel settings (``OPENBLAS_CORETYPE``,
``OPENBLAS_L2_SIZE``: some processors need them for correct results),
``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1``, and for LLM components the
``OPENPERT_LLM_*`` settings (model, backend, cap on generated tokens; the cache as a sandbox path; with a server, the
base URL of the job's relay to the harness's proxy and no API key: :mod:`openpert.run.component`,
:mod:`openpert.run.llm_proxy`), and
for components that embed text ``OPENPERT_EMBED_CACHE`` (a sandbox path). Nothing else passes, credentials included (a dataset loader's ``KAGGLE_USERNAME``/``KAGGLE_KEY``
among them).

Caches: the trade-off
---------------------
A cache shared between jobs is a channel between them: a hostile method that may write into the
cache a metric reads could plant the answers that metric gets (a judge model's verdicts, the
embeddings of the reference texts).

* The LLM generation cache (``$OPENPERT_LLM_CACHE``, default ``~/.cache/openpert/llm``) saves real
  money and time (a resumed benchmark must not pay for generations twice), so LLM components get
  it, read-write, at ``/cache/llm`` — but each component its own subfolder
  ``<cache>/<task>/<component>``, so a job can only write answers that the same component reads
  back. Lost: reuse of a generation between two different components (rare: they ask different
  prompts). A component given ``--llm_cache_dir`` explicitly gets that folder, as given.
* The text-embedding cache (``$OPENPERT_EMBED_CACHE``, default ``<project>/.cache/embeddings``)
  is shared by trust: the components that embed text (their script or a declared resource imports
  ``pertsci.embeddings`` or ``pertsci.text_metrics``: :func:`embeds_text`) get it read-write at
  ``/cache/embeddings``, metrics and dataset loaders the subfolder ``metrics``, methods and control
  methods the subfolder ``methods`` (:func:`embedding_cache_folder`). So the embeddings a metric
  reads (of the reference texts, of the answers) were written by metrics only: a method can poison
  no more than the embeddings other methods read, which it could mislead by its own output anyway.
  Components that do not embed text see neither folder.

The probe (:func:`available`) runs Python once in a sandbox like a job's; its result is cached for
the process. A failing probe (no ``bwrap``, no user namespaces, ...) means "unavailable", and
:func:`unavailable_reason` says why; where Ubuntu's AppArmor forbids unprivileged user namespaces
(23.10 and later: bubblewrap fails with "setting up uid map: Permission denied"), the reason names
that restriction and both fixes.

Required or not
---------------
``$OPENPERT_SANDBOX`` (``auto``, ``on`` or ``off``; :func:`sandbox_setting`) is the default of
``--sandbox`` for ``openpert benchmark``, ``openpert run-component`` and ``openpert test``. ``on``
makes a machine without a working sandbox an error instead of a warning, and makes the sandbox
tests of the project's own suite fail there instead of skipping (CI sets it).
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from openpert.config.formats import file_identity
from openpert.config.layout_rules import python_files, source_imports
from openpert.config.viash import ComponentConfig, ConfigError

#: Where the job's work folder appears inside the sandbox.
JOB_DIR = PurePosixPath("/job")
#: The job's private home and temporary folder inside the sandbox.
HOME_DIR = PurePosixPath("/home/job")
TMP_DIR = PurePosixPath("/tmp")
#: Where science packages installed from the repository (editable) appear; on ``PYTHONPATH``.
LIB_DIR = PurePosixPath("/opt/openpert/lib")
#: Where an LLM component finds its generation cache.
LLM_CACHE_DIR = PurePosixPath("/cache/llm")
#: Where a component that embeds text finds the embedding cache of its trust group.
EMBED_CACHE_DIR = PurePosixPath("/cache/embeddings")
#: The variable :mod:`pertsci.embeddings` reads its cache folder from.
ENV_EMBED_CACHE = "OPENPERT_EMBED_CACHE"
#: Modules whose import marks a component as one that embeds text.
EMBEDDING_MODULES = ("pertsci.embeddings", "pertsci.text_metrics")
#: Component types whose embeddings others may trust (they share one cache); every other type
#: (methods, control methods) shares the other.
TRUSTED_EMBEDDING_TYPES = ("metric", "dataset")
#: Packages of the project that components import; bound on their own when they lie outside the
#: Python environment (an editable install from the repository).
SCIENCE_PACKAGES = ("pertsci",)
#: Thread-count variables of numerical libraries, all set to the job's CPU count.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
#: Host settings that choose OpenBLAS's kernel for this processor: where a machine sets them (older
#: OpenBLAS builds compute wrong results or crash on some CPUs otherwise), its jobs need them too.
BLAS_KERNEL_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
#: Settings of :mod:`pertsci.llm` passed to LLM components (the cache is handled on its own). The API
#: key is not one: it stays with the harness's proxy (:mod:`openpert.run.llm_proxy`).
LLM_VARIABLES = ("OPENPERT_LLM_BASE_URL", "OPENPERT_LLM_MODEL", "OPENPERT_LLM_MODEL_SHA256", "OPENPERT_LLM_BACKEND",
                 "OPENPERT_LLM_MAX_TOKENS",
                 # a dry run's token counting (pertsci.llm_plan); the tokenizer file is bound read-only
                 "OPENPERT_LLM_TOKENIZER", "OPENPERT_LLM_DRY_RUN_ANSWER_CHARS")
#: Values of ``--llm_cache_dir`` that disable the cache (as in :func:`pertsci.llm.client_from_arguments`).
LLM_CACHE_DISABLED = {"none", "off", "false", "no", "0", "disabled"}
#: Files and folders of ``/etc`` a program may need; nothing else of ``/etc`` is shown.
ETC_ENTRIES = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d",  # the dynamic linker
    "passwd", "group", "nsswitch.conf",  # user names (getpass, pwd) of the job's uid; no shadow
    "hosts", "host.conf", "resolv.conf", "gai.conf", "services", "protocols",  # name resolution (LLM servers)
    "ssl", "ca-certificates", "ca-certificates.conf", "pki",  # TLS to a remote LLM server
    "localtime", "timezone", "alternatives", "mime.types", "fonts", "os-release",
)
#: Top-level system folders bound (or linked, on a merged-/usr system) read-only.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Seconds the probe may take.
PROBE_TIMEOUT_S = 30.0
#: The variable whose value (auto, on, off) is the default of ``--sandbox``.
ENV_SANDBOX = "OPENPERT_SANDBOX"
#: Values of ``--sandbox`` and ``$OPENPERT_SANDBOX`` -> the ``sandbox`` argument of the runners.
SANDBOX_SETTINGS: dict[str, bool | None] = {"auto": None, "on": True, "off": False}
#: Ubuntu's switch (23.10 and later) that confines unprivileged user namespaces to AppArmor profiles.
APPARMOR_USERNS_SYSCTL = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
#: What to do about that switch, in every reason that names it.
APPARMOR_FIXES = (
    "This is the AppArmor restriction of unprivileged user namespaces of Ubuntu 23.10 and later (24.04 included; "
    "kernel.apparmor_restrict_unprivileged_userns = 1). Fix it with "
    "`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (until the next boot; a file in /etc/sysctl.d "
    "keeps it), or with an AppArmor profile for /usr/bin/bwrap that allows `userns` "
    "(docs/components.md, \"The sandbox on Ubuntu 24.04\", gives its text)."
)


class SandboxError(RuntimeError):
    """A sandbox cannot be built as asked (e.g. a path outside the work folder)."""


# --- the Python environment --------------------------------------------------------------------------
def _is_under(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


@dataclasses.dataclass(frozen=True)
class PythonEnvironment:
    """Where the running interpreter and its packages are, on the host and in the sandbox.

    Attributes
    ----------
    binds
        ``(host path, sandbox path)`` pairs to bind read-only.
    executable
        The interpreter's path in the sandbox.
    bin_dir
        The environment's ``bin`` folder in the sandbox (first on ``PATH``).
    python_path
        Sandbox folders for ``PYTHONPATH`` (science packages bound on their own).
    """

    binds: tuple[tuple[Path, PurePosixPath], ...]
    executable: PurePosixPath
    bin_dir: PurePosixPath
    python_path: tuple[PurePosixPath, ...]


@functools.cache
def python_environment() -> PythonEnvironment:
    """The running interpreter's environment, as a job's sandbox shows it (computed once)."""
    system = [Path(d) for d in SYSTEM_DIRS]
    binds: list[tuple[Path, PurePosixPath]] = []
    bound: list[Path] = []

    def bind(host: Path, inside: PurePosixPath | None = None) -> None:
        if _is_under(host, system) or _is_under(host, bound):
            return  # already visible (the system's Python, or a folder inside one bound already)
        binds.append((host, inside if inside is not None else PurePosixPath(host)))
        bound.append(host)

    prefix, base = Path(sys.prefix), Path(sys.base_prefix)
    executable = Path(sys.executable)
    # The base interpreter first: the venv's python is a link to it, and pyvenv.cfg names it.
    bind(base)
    real = Path(os.path.realpath(executable))
    bind(real.parent.parent if real.parent.name == "bin" else real.parent)
    bind(prefix)
    inside_exe = PurePosixPath(executable)
    python_path: list[PurePosixPath] = []
    for name in SCIENCE_PACKAGES:
        spec = importlib.util.find_spec(name)
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        if not folders:
            continue  # not installed: a component that imports it fails as it would unsandboxed
        folder = Path(folders[0])
        if _is_under(folder, [prefix, base, *system]):
            continue  # installed into the environment: already visible
        binds.append((folder, LIB_DIR / name))
        if LIB_DIR not in python_path:
            python_path.append(LIB_DIR)
    return PythonEnvironment(tuple(binds), inside_exe, inside_exe.parent, tuple(python_path))


# --- one job's sandbox -------------------------------------------------------------------------------
@dataclasses.dataclass
class Sandbox:
    """The sandbox of one job: its work folder at ``/job``, what is bound into it, its environment.

    Parameters
    ----------
    work_dir
        The job's work folder on the host (created by the runner): bound at :data:`JOB_DIR`.
    read_only
        Host paths inside ``work_dir`` (staged inputs, the resources folder) bound read-only on
        top of themselves.
    writable
        Sandbox path -> host folder, bound read-write (the LLM generation cache).
    shared
        Host paths outside the work folder bound read-only at their own path (a local model's
        folder for in-process vLLM, which names it by its path; a component test's project and
        image environment). Paths under the system folders are visible already and not bound again.
    env
        The job's environment, complete (see :func:`job_environment`).
    chdir
        The sandbox folder the command starts in (default :data:`JOB_DIR`).
    bind_python
        Bind the running interpreter's environment (:func:`python_environment`); ``False`` when the
        command runs another environment, bound through ``shared``.
    """

    work_dir: Path
    read_only: list[Path] = dataclasses.field(default_factory=list)
    writable: dict[PurePosixPath, Path] = dataclasses.field(default_factory=dict)
    shared: list[Path] = dataclasses.field(default_factory=list)
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    chdir: PurePosixPath = JOB_DIR
    bind_python: bool = True

    def __post_init__(self) -> None:
        self.work_dir = Path(self.work_dir).resolve()

    @property
    def home(self) -> Path:
        """The host folder of the job's private home."""
        return self.work_dir / ".home"

    @property
    def tmp(self) -> Path:
        """The host folder of the job's private ``/tmp``."""
        return self.work_dir / ".tmp"

    def inside(self, host: str | Path) -> str:
        """The sandbox path of a host path inside the work folder.

        Raises
        ------
        SandboxError
            When ``host`` is not inside the work folder (the job could not see it).
        """
        path = Path(host)
        path = path if path.is_absolute() else self.work_dir / path
        try:
            rel = path.relative_to(self.work_dir)
        except ValueError:
            raise SandboxError(f"{path}: not inside the job's work folder {self.work_dir}, so not visible to the job") from None
        if rel.parts[:1] == (".tmp",):
            return str(TMP_DIR.joinpath(*rel.parts[1:]))
        if rel.parts[:1] == (".home",):
            return str(HOME_DIR.joinpath(*rel.parts[1:]))
        return str(JOB_DIR / rel.as_posix()) if rel.parts else str(JOB_DIR)

    def command(self, argv: list[str], *, info_fd: int | None = None) -> list[str]:
        """The ``bwrap`` command line that runs ``argv`` (sandbox paths) in this sandbox.

        Run it with :attr:`env` as its whole environment (``subprocess.Popen(..., env=box.env)``):
        bubblewrap passes its own environment on, and its PID 1's environment can be read from
        inside the sandbox, so it must hold nothing else. (Not ``--setenv``: a command line can be
        read by every user of the host, and the environment may hold an API key.)

        With ``info_fd``, ``argv`` is PID 1 of the sandbox (``--as-pid-1``: the anchor a fork
        server's job joins, :mod:`openpert.run.forkserver`), and bubblewrap writes its host pid
        on that descriptor (``--info-fd``).
        """
        self.home.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(parents=True, exist_ok=True)
        cmd = [bwrap_path() or "bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"]
        if info_fd is not None:
            cmd += ["--as-pid-1", "--info-fd", str(info_fd)]
        cmd += _system_args()
        for host, inside in (python_environment().binds if self.bind_python else ()):
            cmd += ["--ro-bind", str(host), str(inside)]
        cmd += ["--bind", str(self.work_dir), str(JOB_DIR)]
        for path in self.read_only:
            cmd += ["--ro-bind", str(path), self.inside(path)]
        cmd += ["--bind", str(self.tmp), str(TMP_DIR), "--bind", str(self.home), str(HOME_DIR)]
        for inside, host in self.writable.items():
            cmd += ["--bind", str(host), str(inside)]
        # After the private /tmp: a shared folder that lies in the host's /tmp is bound on top of it.
        system = [Path(d) for d in SYSTEM_DIRS]
        for host in self.shared:
            if not _is_under(Path(host), system):
                cmd += ["--ro-bind", str(host), str(host)]
        # The sandbox's root is a tmpfs of bubblewrap's: read-only once the mounts are made, so that
        # a job cannot park data in memory that no process's resident size shows.
        cmd += ["--remount-ro", "/", "--chdir", str(self.chdir)]
        return [*cmd, "--", *argv]


@functools.cache
def _system_args() -> tuple[str, ...]:
    """The read-only system part of every sandbox (computed once: the host does not change)."""
    args: list[str] = []
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]  # merged /usr: /bin -> usr/bin
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    for entry in ETC_ENTRIES:
        if os.path.lexists(f"/etc/{entry}"):
            args += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
    args += ["--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    # GPUs: the device files, when the host has them (CUDA's libraries are under /usr).
    for device in sorted(glob.glob("/dev/nvidia*")):
        args += ["--dev-bind-try", device, device]
    return tuple(args)


def job_environment(*, cpus: int | None, llm: bool, llm_cache: bool, host_env: Mapping[str, str] = os.environ,
                    embed_cache: bool = False) -> dict[str, str]:
    """The complete environment of a sandboxed job (nothing else of the host's passes).

    Parameters
    ----------
    cpus
        The job's CPU count, for the thread-count variables (:func:`thread_environment`).
    llm
        The component talks to a language model: pass the ``OPENPERT_LLM_*`` settings.
    llm_cache
        The LLM generation cache is bound at :data:`LLM_CACHE_DIR`.
    embed_cache
        The text-embedding cache of the job's trust group is bound at :data:`EMBED_CACHE_DIR`.
    host_env
        The runner's environment (default ``os.environ``).
    """
    python = python_environment()
    lang = "C.UTF-8"
    env = {
        "PATH": f"{python.bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(HOME_DIR),
        "LANG": lang,
        "LC_ALL": lang,
        "TMPDIR": str(TMP_DIR),
        "VIASH_TEMP": str(TMP_DIR),
        "PYTHONUNBUFFERED": "1",
        # Models ship inside packages; a job never downloads one (and has no network to).
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    if python.python_path:
        env["PYTHONPATH"] = ":".join(str(p) for p in python.python_path)
    env.update(thread_environment(cpus, host_env=host_env))
    if llm:
        for var in LLM_VARIABLES:
            if host_env.get(var):
                env[var] = host_env[var]
        if llm_cache:
            env["OPENPERT_LLM_CACHE"] = str(LLM_CACHE_DIR)
    if embed_cache:
        env[ENV_EMBED_CACHE] = str(EMBED_CACHE_DIR)
    return env


def thread_environment(cpus: int | None, *, host_env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The variables that set a job's numerical threads and BLAS kernel, sandboxed or not.

    Every thread-count variable is the job's CPU count (1 when it has none), whatever the host's
    environment says: a job's threads come from its resource label, so the same job runs with the
    same threads on a laptop that exports ``OMP_NUM_THREADS=16`` and on a CI runner that sets
    nothing. The host's OpenBLAS kernel settings (:data:`BLAS_KERNEL_VARIABLES`) pass as they are.

    Parameters
    ----------
    cpus
        The job's CPU count (:attr:`openpert.run.process.Limits.cpus`).
    host_env
        The runner's environment (default ``os.environ``).
    """
    env = dict.fromkeys(THREAD_VARIABLES, str(max(1, int(cpus or 1))))
    env.update({var: host_env[var] for var in BLAS_KERNEL_VARIABLES if host_env.get(var)})
    return env


def local_model_paths(*values: str | None) -> list[Path]:
    """The values (``--llm_model``, ``$OPENPERT_LLM_MODEL``, ``$OPENPERT_LLM_TOKENIZER``) that name an existing local path.

    In-process vLLM loads a model from a folder named by its path; the sandbox binds it read-only at
    that path. Hub ids (``org/model``) are no paths and are left alone.
    """
    found: list[Path] = []
    for value in values:
        if value and os.path.isabs(str(value)) and os.path.exists(str(value)):
            path = Path(str(value)).resolve()
            if path not in found:
                found.append(path)
    return found


def llm_cache_folder(given: str | None, component: str, *, host_env: Mapping[str, str] = os.environ) -> Path | None:
    """The host folder bound as an LLM component's generation cache, or ``None`` for no cache.

    Parameters
    ----------
    given
        The component's ``--llm_cache_dir``: a folder (used as given), a value that disables the
        cache (``"none"``, ...), or empty/``None`` for the default.
    component
        ``<task>/<component>``: the default cache's subfolder for this component, so that no
        component can write the answers another one reads.
    host_env
        The runner's environment (default ``os.environ``).
    """
    if given is not None and str(given).strip():
        if str(given).strip().lower() in LLM_CACHE_DISABLED:
            return None
        return Path(given).expanduser().resolve()
    root = host_env.get("OPENPERT_LLM_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "openpert" / "llm"
    return (base / component).resolve()


# --- the text-embedding cache -------------------------------------------------------------------------
def _python_files(config: ComponentConfig) -> list[Path]:
    """The component's script and every Python file among its declared resources (folders walked)."""
    files: list[Path] = []
    for res in config.resources:
        try:
            path = config.resource_path(res)
        except ConfigError:
            continue  # the job reports it when it stages its resources, and runs no code
        if path.is_dir():
            files += python_files(path)
        elif path.suffix == ".py" and path.is_file():
            files.append(path)
    return files


def _imports_embedding_module(source: str) -> bool:
    """Whether Python source imports one of :data:`EMBEDDING_MODULES` (``import``, ``from ... import``)."""
    try:
        imports = source_imports(source)
    except SyntaxError:
        return False  # the job will fail on it; it embeds nothing
    for _, module, names in imports:
        modules = [module, *(f"{module}.{name}" for name in names)]
        if any(m == wanted or m.startswith(wanted + ".") for m in modules for wanted in EMBEDDING_MODULES):
            return True
    return False


def embeds_text(config: ComponentConfig) -> bool:
    """Whether a component embeds text: its script or a declared resource imports :data:`EMBEDDING_MODULES`.

    Read from the code rather than declared, so that a contributor cannot forget it; a component
    that hides the import (``importlib``) merely gets no shared cache and embeds into its private
    home.
    """
    return any(_file_embeds_text(path) for path in _python_files(config))


def _file_embeds_text(path: Path) -> bool:
    """Whether one Python file imports :data:`EMBEDDING_MODULES` (``False`` when it cannot be read)."""
    try:
        identity = file_identity(path)
    except OSError:
        return False
    return _source_embeds_text(str(path), identity)


@functools.lru_cache(maxsize=4096)
def _source_embeds_text(path: str, identity: tuple[int, int, int, int]) -> bool:
    """:func:`_file_embeds_text` of one version of a file (its :func:`~openpert.config.formats.file_identity`).

    Every job of a component asks about the same files (a task library of a dozen modules): each is
    parsed once until it changes.
    """
    try:
        source = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return _imports_embedding_module(source)


def embedding_cache_group(config: ComponentConfig) -> str:
    """``metrics`` for metrics and dataset loaders (:data:`TRUSTED_EMBEDDING_TYPES`), else ``methods``."""
    return "metrics" if config.type in TRUSTED_EMBEDDING_TYPES else "methods"


def embedding_cache_folder(config: ComponentConfig, *, host_env: Mapping[str, str] = os.environ) -> Path | None:
    """The host folder bound as a component's text-embedding cache, or ``None`` when it embeds no text.

    Parameters
    ----------
    config
        The component.
    host_env
        The runner's environment (default ``os.environ``): ``$OPENPERT_EMBED_CACHE`` is the cache's
        root; without it, ``.cache/embeddings`` of the component's project.

    Returns
    -------
    pathlib.Path or None
        ``<root>/<group>`` (:func:`embedding_cache_group`), resolved.
    """
    if not embeds_text(config):
        return None
    root = host_env.get(ENV_EMBED_CACHE)
    base = Path(root).expanduser() if root else Path(config.root) / ".cache" / "embeddings"
    return (base / embedding_cache_group(config)).resolve()


# --- what a component needs ---------------------------------------------------------------------------
def needs_llm(config: ComponentConfig) -> bool:
    """Whether a component talks to a language model: it takes ``--llm_base_url`` (as the plan says)."""
    return any(a.name == "llm_base_url" for a in config.arguments)


# --- is bubblewrap usable here? ----------------------------------------------------------------------
def bwrap_path() -> str | None:
    """The ``bwrap`` executable on ``PATH`` (``None`` when not installed)."""
    return shutil.which("bwrap")


def sandbox_setting(host_env: Mapping[str, str] = os.environ) -> str:
    """``$OPENPERT_SANDBOX``: ``auto`` (the default), ``on`` or ``off``.

    Raises
    ------
    ConfigError
        Naming the variable, when it holds anything else.
    """
    value = host_env.get(ENV_SANDBOX, "").strip().lower() or "auto"
    if value not in SANDBOX_SETTINGS:
        raise ConfigError(f"${ENV_SANDBOX} is {host_env[ENV_SANDBOX]!r}; expected one of {', '.join(SANDBOX_SETTINGS)}")
    return value


def apparmor_restricts_userns() -> bool:
    """Whether AppArmor confines unprivileged user namespaces here (:data:`APPARMOR_USERNS_SYSCTL` reads 1)."""
    try:
        return APPARMOR_USERNS_SYSCTL.read_text().strip() == "1"
    except OSError:
        return False  # no such switch: not Ubuntu's AppArmor


def _explain_failure(message: str) -> str:
    """A failed probe's message, with the AppArmor case and its fixes named where it applies."""
    if "setting up uid map" in message or ("Permission denied" in message and apparmor_restricts_userns()):
        return f"{message}. {APPARMOR_FIXES}"
    if apparmor_restricts_userns():
        return f"{message}. (kernel.apparmor_restrict_unprivileged_userns is 1 here, which may be the cause.) {APPARMOR_FIXES}"
    return message


@functools.cache
def _probe() -> str | None:
    """Run Python once in a job-like sandbox; ``None`` when that works, else the reason it does not."""
    if sys.platform != "linux":
        return f"bubblewrap needs Linux (this is {sys.platform})"
    if bwrap_path() is None:
        return "bwrap is not installed (Debian: apt-get install bubblewrap)"
    with tempfile.TemporaryDirectory(prefix="openpert-sandbox-probe-") as tmp:
        box = Sandbox(Path(tmp), env=job_environment(cpus=1, llm=False, llm_cache=False))
        python = python_environment()
        try:
            done = subprocess.run(box.command([str(python.executable), "-c", "import sys; print(sys.prefix)"]), env=box.env,
                                  capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"bwrap could not run: {err}"
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            return _explain_failure(f"bwrap failed (exit {done.returncode}): {lines[-1] if lines else 'no message'}")
    return None


def available() -> bool:
    """Whether jobs can run in a bubblewrap sandbox on this machine (probed once per process)."""
    return _probe() is None


def unavailable_reason() -> str | None:
    """Why bubblewrap cannot be used here (``None`` when it can)."""
    return _probe()
