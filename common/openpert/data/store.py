"""The data store: public files at their manifest paths, verified, and read-only views of them for jobs.

The store (``$OPENPERT_DATA``, default ``$XDG_CACHE_HOME/openpert/data``) has the layout of
``../shared/data``. Its own records live in ``.openpert/``: the checksums seen at the first fetch of
unpinned files (``observed.json``), what was last verified (``verified.json``, so that an unchanged
file is not hashed again at every run), partial downloads (``partial/``) and the views given to jobs
(``views/``). A file reaches its final name only complete and verified.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from openpert.files import hash_file, hash_text, locked, write_text_atomic

#: The store's own records, beside the files (never part of a view).
META = ".openpert"


def default_store_dir() -> Path:
    """``$OPENPERT_DATA``, else ``$XDG_CACHE_HOME/openpert/data``, else ``~/.cache/openpert/data``."""
    env = os.environ.get("OPENPERT_DATA")
    if env:
        return Path(env).expanduser().resolve()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return (Path(cache).expanduser() / "openpert" / "data").resolve()


class ChecksumError(Exception):
    """A file's content is not what its manifest (or its first fetch) recorded."""


@dataclass(frozen=True)
class FileState:
    """What the store holds at a path: ``ok``, ``missing``, ``corrupt`` (wrong checksum or size)."""

    state: str
    detail: str = ""


class DataStore:
    """A folder of public files at their manifest paths.

    Parameters
    ----------
    root
        The store folder (created on first write).
    """

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DataStore({self.root})"

    @property
    def meta(self) -> Path:
        """The store's own records."""
        return self.root / META

    def path_of(self, store_path: str) -> Path:
        """Where the file of a manifest path lives."""
        return self.root / store_path

    def partial_path(self, store_path: str) -> Path:
        """Where a download of ``store_path`` accumulates until it is complete."""
        return self.meta / "partial" / (store_path.replace("/", "__") + ".part")

    # -- records ---------------------------------------------------------------------------------------
    def _read_record(self, name: str) -> dict:
        path = self.meta / name
        if not path.is_file():
            return {}
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise ChecksumError(f"{path}: unreadable store record ({err}); delete it to start the record anew") from None
        if not isinstance(data, dict):
            raise ChecksumError(f"{path}: a store record is a JSON object")
        return data

    def _update_record(self, name: str, key: str, value) -> None:
        with self._lock, self.locked(name):
            data = self._read_record(name)
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
            write_text_atomic(self.meta / name, json.dumps(data, indent=1, sort_keys=True))

    def observed(self, store_path: str) -> tuple[str, int] | None:
        """The checksum and size the first fetch of an unpinned file recorded, if any."""
        seen = self._read_record("observed.json").get(store_path)
        return (seen["sha256"], seen["size"]) if seen else None

    def expected(self, store_path: str, sha256: str | None, size: int | None) -> tuple[str, int] | None:
        """The checksum a file must have: the manifest's, else the one first observed (``None``: neither)."""
        return (sha256, size) if sha256 is not None else self.observed(store_path)

    # -- checks ----------------------------------------------------------------------------------------
    def state(self, store_path: str, sha256: str | None, size: int | None, *, rehash: bool = False) -> FileState:
        """Whether the store holds ``store_path`` with its expected content.

        A file whose size, modification time and inode are those it had when last verified is not
        hashed again, unless ``rehash``. An unpinned file with no record yet counts as ``missing``
        (its first fetch records it).
        """
        path = self.path_of(store_path)
        if not path.is_file():
            return FileState("missing")
        want = self.expected(store_path, sha256, size)
        if want is None:
            return FileState("missing", "unpinned and never fetched into this store")
        stat = path.stat()
        if stat.st_size != want[1]:
            return FileState("corrupt", f"{stat.st_size} bytes, expected {want[1]}")
        signature = [want[0], stat.st_size, stat.st_mtime_ns, stat.st_ino]
        if not rehash and self._read_record("verified.json").get(store_path) == signature:
            return FileState("ok")
        got = hash_file(path)
        if got != want[0]:
            return FileState("corrupt", f"sha256 {got}, expected {want[0]}")
        self._update_record("verified.json", store_path, signature)
        return FileState("ok")

    def install(self, source: Path, store_path: str, sha256: str | None, size: int | None, *, origin: str) -> Path:
        """Move a complete file into place, after checking it against its expected checksum.

        ``source`` must be on the store's file system (a partial download, a derivation's output).
        An unpinned file without a record is recorded as observed now.

        Raises
        ------
        ChecksumError
            Naming the file, both checksums and ``origin``; ``source`` is deleted, nothing is installed.
        """
        got = hash_file(source)
        got_size = source.stat().st_size
        want = self.expected(store_path, sha256, size)
        if want is not None and (got, got_size) != tuple(want):
            source.unlink(missing_ok=True)
            record = "manifest" if sha256 is not None else f"first fetch ({self.meta / 'observed.json'})"
            raise ChecksumError(f"{store_path}: wrong checksum from {origin}: sha256 {got} ({got_size} bytes), "
                                f"expected {want[0]} ({want[1]} bytes, from the {record}); nothing was installed")
        dest = self.path_of(store_path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(source, 0o444)  # store files are never edited in place (views hard-link them)
        os.replace(source, dest)
        if want is None:
            self._update_record("observed.json", store_path, {"sha256": got, "size": got_size, "origin": origin})
        stat = dest.stat()
        self._update_record("verified.json", store_path, [got, got_size, stat.st_mtime_ns, stat.st_ino])
        return dest

    @contextlib.contextmanager
    def locked(self, store_path: str) -> Iterator[None]:
        """Hold the store's lock of one path: fetches of it by other threads or processes wait.

        Two benchmark tasks (or two runs) that read one file would otherwise write the same partial
        download at once.
        """
        with locked(self.meta / "locks" / (store_path.replace("/", "__") + ".lock")):
            yield

    def scratch(self) -> Path:
        """A new temporary folder on the store's file system (for derivations), removed by the caller."""
        (self.meta / "tmp").mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(dir=self.meta / "tmp"))

    # -- views -----------------------------------------------------------------------------------------
    def view(self, name: str, store_paths: Sequence[str]) -> Path:
        """A folder holding exactly ``store_paths`` at their paths, for a job to read.

        Files are hard links to the store's (copies where the file system refuses links), so a view
        costs no disk. A view is rebuilt when a file it links was replaced since (a re-fetch).
        """
        if not store_paths:
            raise ValueError(f"view {name!r}: no files")
        paths = sorted(set(store_paths))
        folder = self.meta / "views" / f"{name}-{hash_text(*paths)[:16]}"
        with self.locked(f"views/{folder.name}"):
            if folder.is_dir() and all(_same_file(folder / p, self.path_of(p)) for p in paths):
                return folder
            self._build_view(folder, paths)
        return folder

    def _build_view(self, folder: Path, paths: list[str]) -> None:
        """Link ``paths`` into a new folder, then put it in place of ``folder`` (held under its lock)."""
        name = folder.name
        folder.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{name}-"))
        try:
            for p in paths:
                dest = building / p
                dest.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(self.path_of(p), dest)
                except OSError:
                    shutil.copy2(self.path_of(p), dest)
            old = None
            if folder.exists():
                old = folder.with_name(f".{folder.name}.old-{os.getpid()}-{threading.get_ident()}")
                os.replace(folder, old)
            os.replace(building, folder)
            if old is not None:
                shutil.rmtree(old)  # its files are links: the store's copies stay
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` is ``b`` (a hard link) or a copy of the same size and time."""
    try:
        if os.path.samefile(a, b):
            return True
        sa, sb = a.stat(), b.stat()
    except OSError:
        return False
    return sa.st_size == sb.st_size and sa.st_mtime_ns == sb.st_mtime_ns
