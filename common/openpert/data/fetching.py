"""Fill the data store from mirrors and pinned origins, verify it, and give a task's jobs their files.

Where a file comes from, in order: the store itself (verified); a ``--mirror`` when one is given,
which then replaces every other source; else a local pre-filled mirror (``$OPENPERT_SHARED_DATA``
or ``../shared/data``) that holds the file with the right checksum; else the file's pinned URL. A
derived file is taken as it is from a mirror that holds it, else made from its originals (each
fetched the same way) by its ``derive`` function, run in a child process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from openpert.data.manifest import DataFile, Download
from openpert.data.store import ChecksumError, DataStore, FileState
from openpert.data.transfer import TransferError, join_location, local_source, transfer
from openpert.files import format_bytes


class FetchError(Exception):
    """Files that could not be had; one line per file, each naming it, its source and the cause."""


@dataclass(frozen=True)
class Sources:
    """Where files may come from besides the store.

    Attributes
    ----------
    mirror
        A folder or URL holding files at their store paths; when set it replaces every other source.
    local
        Pre-filled local mirrors (``../shared/data``), used when ``mirror`` is not set.
    offline
        Use no network: only the store, local folders and a local ``mirror``.
    timeout
        Seconds without a byte before a download is given up.
    """

    mirror: str | None = None
    local: tuple[Path, ...] = ()
    offline: bool = False
    timeout: float = 60.0

    def locations(self, store_path: str, url: str | None) -> list[str]:
        """The places to try for a file, in order."""
        if self.mirror is not None:
            local = local_source(self.mirror)
            if self.offline and local is None:
                return []
            return [join_location(self.mirror, store_path)]
        found = [str(folder / store_path) for folder in self.local if (folder / store_path).is_file()]
        return found + ([url] if url and not self.offline else [])

    def describe(self) -> str:
        """The sources, for messages."""
        if self.mirror is not None:
            return f"mirror {self.mirror}" + (" (offline)" if self.offline else "")
        parts = [f"local mirror {p}" for p in self.local] + (["no network (offline)"] if self.offline else ["the pinned URLs"])
        return ", ".join(parts)


@dataclass
class Outcome:
    """What fetching one file did: ``present``, ``copied`` (a local mirror), ``downloaded`` or ``derived``."""

    path: str
    action: str
    origin: str = ""
    bytes: int = 0
    note: str = ""


@dataclass
class ByteProgress:
    """A progress line in bytes on a terminal (a line per file elsewhere), shared by the fetching threads."""

    total: int | None
    stream: IO[str] | None = None
    files: int = 0
    _done_bytes: int = 0
    _done_files: int = 0
    _last: float = 0.0
    _start: float = field(default_factory=time.perf_counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, n: int) -> None:
        """Count ``n`` more bytes received."""
        with self._lock:
            self._done_bytes += n
            now = time.perf_counter()
            if self.stream is not None and self.stream.isatty() and now - self._last > 0.2:
                self._last = now
                self.stream.write("\r" + self.line() + " " * 4)
                self.stream.flush()

    def file_done(self, outcome: Outcome) -> None:
        """Count a finished file; off a terminal, say what it was."""
        with self._lock:
            self._done_files += 1
            if self.stream is not None and not self.stream.isatty() and outcome.action != "present":
                self.stream.write(f"  {outcome.action} {outcome.path} ({format_bytes(outcome.bytes)}) from {outcome.origin}\n")
                self.stream.flush()

    def line(self) -> str:
        """``fetching 12.1 MB of 60.3 MB (20%), 4.0 MB/s, 3 of 40 files``."""
        rate = self._done_bytes / max(time.perf_counter() - self._start, 1e-6)
        of = f" of {format_bytes(self.total)} ({100 * self._done_bytes / self.total:.0f}%)" if self.total else ""
        return f"fetching {format_bytes(self._done_bytes)}{of}, {format_bytes(rate)}/s, {self._done_files} of {self.files} files"

    def close(self) -> None:
        """End the progress line."""
        if self.stream is not None and self.stream.isatty():
            self.stream.write("\r" + self.line() + "\n")
            self.stream.flush()


class _Fetcher:
    """One fetch: the store, the sources and the progress line."""

    def __init__(self, store: DataStore, sources: Sources, progress: ByteProgress | None):
        self.store, self.sources, self.progress = store, sources, progress

    def download(self, d: Download, *, locations: list[str] | None = None) -> Outcome:
        """Have ``d`` in the store: present, or fetched from the first source that gives the right bytes."""
        with self.store.locked(d.path):
            state = self.store.state(d.path, d.sha256, d.size)
            if state.state == "ok":
                return Outcome(d.path, "present", str(self.store.path_of(d.path)))
            note = f"replaced a corrupt copy ({state.detail})" if state.state == "corrupt" else ""
            tried = self.sources.locations(d.path, d.url) if locations is None else locations
            errors = []
            for location in tried:
                partial = self.store.partial_path(d.path)
                try:
                    transfer(location, partial, timeout=self.sources.timeout,
                             on_bytes=self.progress.add if self.progress else None)
                    size = partial.stat().st_size
                    self.store.install(partial, d.path, d.sha256, d.size, origin=location)
                except (TransferError, ChecksumError) as err:
                    errors.append(str(err))
                    continue
                action = "copied" if local_source(location) is not None else "downloaded"
                return Outcome(d.path, action, location, size, note)
            if not tried:
                errors.append(f"not in the store and no source to try ({self.sources.describe()}); "
                              f"its origin is {d.url}" if d.url else f"not in the store ({self.sources.describe()})")
            raise FetchError(f"{d.path}: " + "; ".join(errors))

    def file(self, f: DataFile) -> Outcome:
        """Have a manifest entry in the store (a derived file: from a mirror that holds it, else made)."""
        if f.derive is None:
            return self.download(f.download)
        mirrored = self.sources.locations(f.path, None)
        try:
            return self.download(Download(f.path, "", f.sha256, f.size), locations=mirrored)
        except FetchError as err:
            if mirrored:
                # A mirror that holds a wrong copy is worth saying; the originals may still serve.
                reason = f"({err}); "
            else:
                reason = ""
        originals = {}
        for name, d in f.derive.sources:
            try:
                originals[name] = self.download(d)
            except FetchError as err:
                raise FetchError(f"{f.path}: {reason}its original {name} cannot be had: {err}") from None
        with self.store.locked(f.path):
            if self.store.state(f.path, f.sha256, f.size).state == "ok":
                return Outcome(f.path, "present", str(self.store.path_of(f.path)))
            scratch = self.store.scratch()
            try:
                output = scratch / Path(f.path).name
                run_derivation(f, {name: self.store.path_of(o.path) for name, o in originals.items()}, output)
                size = output.stat().st_size
                self.store.install(output, f.path, f.sha256, f.size, origin=f"{f.derive.function} of {', '.join(originals)}")
            except ChecksumError as err:
                raise FetchError(f"{f.path}: {reason}{err}") from None
            finally:
                shutil.rmtree(scratch)
        return Outcome(f.path, "derived", f.derive.function, size, reason.strip("(); "))


def run_derivation(f: DataFile, sources: dict[str, Path], output: Path) -> None:
    """Run a derived file's ``derive.function`` in a child process, writing ``output``.

    The function is imported with the project's ``common/`` and the declaring task's folder on the
    path, as its components import them.

    Raises
    ------
    FetchError
        When the function fails or writes nothing; the message carries the end of its error output.
    """
    task_dir = f.manifest.parent.parent
    root = task_dir.parent.parent
    module, function = f.derive.function.split(":")
    code = ("import importlib, json, sys; from pathlib import Path\n"
            "fn = getattr(importlib.import_module(sys.argv[1]), sys.argv[2])\n"
            "fn({k: Path(v) for k, v in json.loads(sys.argv[3]).items()}, Path(sys.argv[4]), **json.loads(sys.argv[5]))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "common"), str(task_dir),
                                                         *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-c", code, module, function, json.dumps({k: str(v) for k, v in sources.items()}),
                           str(output), json.dumps(f.derive.args)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise FetchError(f"{f.path}: deriving it with {f.derive.function} failed (exit {done.returncode}):\n{tail}")
    if not output.is_file():
        raise FetchError(f"{f.path}: {f.derive.function} wrote no file")


def fetch(files: Sequence[DataFile], store: DataStore, sources: Sources, *, jobs: int = 4,
          stream: IO[str] | None = None) -> list[Outcome]:
    """Have every file of ``files`` in the store, fetching what is missing or corrupt.

    Parameters
    ----------
    files
        Manifest entries.
    store
        The store to fill.
    sources
        Mirrors, offline mode and timeout.
    jobs
        Files fetched at once.
    stream
        Where progress goes (``None``: nowhere).

    Returns
    -------
    One outcome per file, in the order of ``files``.

    Raises
    ------
    FetchError
        After every file was tried, listing each that could not be had (those that could are kept).
    """
    total = sum(f.size for f in files if f.size is not None) if all(f.size is not None for f in files) else None
    progress = ByteProgress(total=total, stream=stream, files=len(files))
    fetcher = _Fetcher(store, sources, progress)

    def one(f: DataFile) -> Outcome | FetchError:
        try:
            outcome = fetcher.file(f)
        except FetchError as err:
            return err
        progress.file_done(outcome)
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(one, files))
    progress.close()
    failures = [str(r) for r in results if isinstance(r, FetchError)]
    if failures:
        raise FetchError(f"{len(failures)} of {len(files)} file(s) could not be had (from {sources.describe()}):\n  "
                         + "\n  ".join(failures))
    return [r for r in results if isinstance(r, Outcome)]


def verify(files: Sequence[DataFile], store: DataStore, *, rehash: bool = True) -> list[tuple[DataFile, FileState]]:
    """The state of each file in the store (``rehash``: hash every file again, trusting no record)."""
    return [(f, store.state(f.path, f.sha256, f.size, rehash=rehash)) for f in files]


def sources_from_environment(root: str | Path, *, mirror: str | None = None, offline: bool | None = None,
                             timeout: float | None = None) -> Sources:
    """The sources a command uses: its options, else ``$OPENPERT_DATA_MIRROR``, ``$OPENPERT_DATA_OFFLINE``
    and ``$OPENPERT_DATA_TIMEOUT``; the local mirrors are the project's shared data folder and the
    shared folder holding it (``../shared``, whose ``viash_schemas/`` the project manifest reads),
    where they exist."""
    from openpert.config.project import shared_data_dir

    mirror = mirror or os.environ.get("OPENPERT_DATA_MIRROR") or None
    if offline is None:
        offline = os.environ.get("OPENPERT_DATA_OFFLINE", "").lower() not in ("", "0", "false", "no")
    if timeout is None:
        timeout = float(os.environ.get("OPENPERT_DATA_TIMEOUT") or 60)
    shared = shared_data_dir(root)
    local = tuple(folder for folder in (shared, shared.parent) if folder.is_dir())
    return Sources(mirror=mirror, local=local, offline=offline, timeout=timeout)


def dataset_views(task_name: str, files: Sequence[DataFile], dataset_ids: Sequence[str], store: DataStore,
                  sources: Sources, *, jobs: int = 4, stream: IO[str] | None = None) -> dict[str, Path]:
    """Fetch what the datasets ``dataset_ids`` read, and give each its own read-only view.

    A dataset job sees its own files only (and its cache key depends on them only), never the
    store, another dataset's files or anything else of the machine.

    Returns
    -------
    Dataset id -> its view, for the datasets that read at least one file.

    Raises
    ------
    FetchError
        Before any job starts, when a file cannot be had.
    """
    needed = [f for f in files if any(f.read_by(d) for d in dataset_ids)]
    if not needed:
        return {}
    fetch(needed, store, sources, jobs=jobs, stream=stream)
    views = {}
    for dataset_id in dataset_ids:
        own = [f for f in needed if f.read_by(dataset_id)]
        if own:
            # Exactly its files, at their store paths.
            views[dataset_id] = store.view(f"{task_name}.{dataset_id}", [f.path for f in own])
    return views
