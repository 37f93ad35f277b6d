"""Small file helpers shared by the harness: atomic writes and content hashing."""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename.

    A reader (or a resumed run) never sees a half-written file: either the old content or the new.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created): other threads and processes locking it wait."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_yaml_atomic(path: str | os.PathLike, data) -> None:
    """Dump ``data`` as YAML to ``path`` atomically, keeping key order."""
    write_text_atomic(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def hash_file(path: str | os.PathLike, *, chunk_size: int = 1 << 20) -> str:
    """SHA-256 of a file's content (of every file below it, for a directory)."""
    path = Path(path)
    digest = hashlib.sha256()
    if path.is_dir():
        for sub in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(str(sub.relative_to(path)).encode())
            digest.update(hash_file(sub).encode())
        return digest.hexdigest()
    with open(path, "rb") as fh:
        while block := fh.read(chunk_size):
            digest.update(block)
    return digest.hexdigest()


def hash_text(*parts: str) -> str:
    """SHA-256 of the concatenation of ``parts`` (separated, so ``("ab", "c") != ("a", "bc")``)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def read_tail(path: str | os.PathLike, max_bytes: int) -> bytes:
    """The last ``max_bytes`` of a file (all of it when shorter), without reading the rest.

    Files a component wrote (its log) can be any size; what the harness shows of them is bounded.
    """
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - max_bytes))
        return fh.read(max_bytes)


def copy_head_and_tail(source: str | os.PathLike, dest, *, head: int, tail: int) -> int:
    """Copy a file into the open binary file ``dest``, keeping its first ``head`` and last ``tail`` bytes.

    What lies between is replaced by one line saying how many bytes were left out. Returns that
    number (0 when the whole file was copied). A job's log can be gigabytes (a sparse hole costs
    the job nothing); the log the harness keeps and publishes is at most ``head + tail`` bytes and a line.
    """
    with open(source, "rb") as src:
        size = src.seek(0, os.SEEK_END)
        src.seek(0)
        if size <= head + tail:
            while block := src.read(1 << 20):
                dest.write(block)
            return 0
        dest.write(src.read(head))
        left_out = size - head - tail
        dest.write(f"\n[openpert] {left_out:,} bytes of this log left out (it had {size:,}); its start and end are kept\n"
                   .encode())
        src.seek(size - tail)
        dest.write(src.read(tail))
        return left_out


def shown_path(path: str | os.PathLike, root: str | os.PathLike | None) -> str:
    """``path`` relative to ``root`` when it lies below it, else as given: how messages name a project's files."""
    path = Path(path)
    return str(path.relative_to(root)) if root is not None and path.is_relative_to(root) else str(path)


def format_bytes(n: float) -> str:
    """``5.3 GB``, ``12 kB``: sizes in messages, in powers of 1024 as the harness's "MB" of memory limits."""
    for unit in ("bytes", "kB", "MB", "GB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit in ("bytes", "kB") or n >= 10 else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB" if n < 10 else f"{n:,.0f} TB"
