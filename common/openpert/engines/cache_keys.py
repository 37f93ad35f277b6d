"""Cache keys of jobs: content digests of files, components and the shared science package.

A job's key hashes what can change its outputs, as Nextflow's ``-resume`` does: the component (its
merged config and every resource it declares), the shared science package it may import, its
parameters and the content of its inputs. Nothing else: editing the harness or another task's
library leaves a job's key, and so its cached result, as it was.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from openpert.config.viash import ComponentConfig
from openpert.files import hash_file, hash_text

_FILE_HASHES: dict[tuple, str] = {}
_HASH_LOCK = threading.Lock()


def file_digest(path: Path) -> str:
    """Content hash of a file, memoised by path, size and mtime (datasets are hashed once per run)."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _HASH_LOCK:
        if key in _FILE_HASHES:
            return _FILE_HASHES[key]
    digest = hash_file(path)
    with _HASH_LOCK:
        _FILE_HASHES[key] = digest
    return digest


def science_digest(root: Path) -> str:
    """Digest of the shared science package of the project at ``root`` (``common/pertsci``).

    Every component may import it, so it is part of every job's key; the harness (``openpert``) is
    not, since it never runs inside a job's script.
    """
    return resource_digest((Path(root) / "common" / "pertsci").resolve())


def _source_files(folder: Path) -> list[Path]:
    """Every file of a package or resource folder that a job is given: all but ``__pycache__`` folders.

    A job's resources are copied without their ``__pycache__`` folders (jobs compile their own), so
    those are not hashed; anything else is, bytecode included: a ``.pyc`` beside the sources is
    imported like a module, and a key that ignored it would reuse a stale result after it changed.
    A ``__pycache__`` the job can see (the bound science package's) is only used where it matches
    its source: jobs run with ``--check-hash-based-pycs always``.
    """
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.relative_to(folder).parts)


def resource_digest(path: Path) -> str:
    """Digest of one declared resource: a file's content, or every source file below a folder."""
    if path.is_dir():
        return hash_text(*(f"{p.relative_to(path)}:{hash_file(p)}" for p in _source_files(path)))
    return hash_file(path) if path.is_file() else f"missing:{path.name}"


def component_digest(config: ComponentConfig) -> str:
    """Digest of everything that defines a component's behaviour.

    Its merged config, each declared resource (a task library is a resource like any other) and
    the shared science package.
    """
    parts = [science_digest(config.root), json.dumps(config.public_dict(), sort_keys=True, default=str)]
    for res in config.resources:
        path = config.resource_path(res)
        parts.append(resource_digest(path) if path.exists() else f"missing:{res.get('path')}")
    return hash_text(*parts)
