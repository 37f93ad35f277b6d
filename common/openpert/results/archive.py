"""The run archive: finished runs kept as records with a stable id, listed and read back.

A record is a folder ``ARCHIVE/<id>/`` holding, per task of the run, a copy of its ``results.json``
(which already carries the run's provenance and component digests) and its ``item_scores.csv.gz``
when the run wrote one, and a ``record.json`` index naming them with their checksums. The id is the
run's UTC time to the minute and its commit, e.g. ``2026-11-28T0412Z-fb79450`` (``-dirty`` when the
working tree had uncommitted changes). Records are never rewritten: adding the same run twice is a
no-op, and another run with the same id gets a ``-2``, ``-3``... suffix.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openpert.files import hash_file
from openpert.results.item_scores import ITEM_SCORES
from openpert.results.model import complete, is_complete

RECORD_FILE = "record.json"
RESULTS_FILE = "results.json"
SCHEMA_VERSION = 1
#: What a record id looks like (its suffixes included).
ID_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{4}Z-[0-9a-z]+(?:-dirty)?(?:-\d+)?$")
#: The environment variable naming the archive folder when ``--archive`` is not given.
ARCHIVE_ENV = "OPENPERT_ARCHIVE"


class ArchiveError(ValueError):
    """An archive, a record or a run that cannot be used; the message names the path and the problem."""


@dataclass(frozen=True)
class RunTask:
    """One task's results of a run, from a results folder or an archive record."""

    name: str
    results: dict[str, Any]
    path: Path
    items_path: Path | None = None


@dataclass(frozen=True)
class ArchiveRecord:
    """An archived run: its id, folder, index and tasks."""

    id: str
    path: Path
    created: str
    commit: str | None
    dirty: bool | None
    tasks: dict[str, RunTask] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The record's id, time, commit and tasks as plain values."""
        return {"id": self.id, "created": self.created, "commit": self.commit, "dirty": self.dirty,
                "tasks": sorted(self.tasks)}


def read_results_file(path: Path) -> dict[str, Any]:
    """Parse a ``results.json``; raise :class:`ArchiveError` naming the file when it is not one.

    A file of an older schema is completed by :func:`openpert.results.model.complete`, so that two
    runs are compared under the same rank rule whichever harness wrote them.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArchiveError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ArchiveError(f"{path}: not a readable results file ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("scores"), list) or not isinstance(data.get("methods"), list):
        raise ArchiveError(f"{path}: not a results file (no `scores` and `methods` lists)")
    return data if is_complete(data) else complete(data)


def task_name(results: dict[str, Any], path: Path) -> str:
    """A task's name: ``task.name`` of its results, else the folder holding the file."""
    task = results.get("task")
    name = task.get("name") if isinstance(task, dict) else None
    return str(name) if name else Path(path).parent.name


def read_run(path: Path) -> dict[str, RunTask]:
    """The tasks of a run given as a ``results.json``, a task's results folder, a folder of them, or a record.

    Parameters
    ----------
    path
        Where the run is.

    Returns
    -------
    dict
        Task name -> :class:`RunTask`, sorted by name.

    Raises
    ------
    ArchiveError
        When nothing there is a results file, a file is not one, or two files name the same task.
    """
    path = Path(path)
    if (path / RECORD_FILE).is_file():
        return read_record_at(path).tasks
    if path.is_file():
        files = [path]
    elif (path / RESULTS_FILE).is_file():
        files = [path / RESULTS_FILE]
    elif path.is_dir():
        files = sorted(path.glob(f"*/{RESULTS_FILE}"))
    else:
        raise ArchiveError(f"{path}: no such file or folder")
    if not files:
        raise ArchiveError(f"{path}: no results.json here or in its sub-folders")
    tasks: dict[str, RunTask] = {}
    for f in files:
        results = read_results_file(f)
        name = task_name(results, f)
        if name in tasks:
            raise ArchiveError(f"{f}: task {name!r} also in {tasks[name].path}")
        items = f.parent / ITEM_SCORES
        tasks[name] = RunTask(name, results, f, items if items.is_file() else None)
    return dict(sorted(tasks.items()))


def run_time_and_commit(tasks: dict[str, RunTask]) -> tuple[dt.datetime, str | None, bool | None]:
    """When a run finished (its latest ``created``, in UTC), its commit and whether it was dirty.

    Raises
    ------
    ArchiveError
        When a task lacks a readable ``created`` time or the tasks ran at different commits.
    """
    times, commits, dirty = [], set(), False
    for task in tasks.values():
        created = task.results.get("created")
        try:
            when = dt.datetime.fromisoformat(str(created))
        except ValueError:
            raise ArchiveError(f"{task.path}: `created` is not an ISO 8601 time: {created!r}") from None
        if when.tzinfo is None:
            raise ArchiveError(f"{task.path}: `created` has no UTC offset: {created!r}")
        times.append(when.astimezone(dt.timezone.utc))
        provenance = task.results.get("provenance") or {}
        commits.add(provenance.get("commit"))
        dirty = dirty or bool(provenance.get("dirty"))
    if len(commits) > 1:
        raise ArchiveError("the tasks ran at different commits: " + ", ".join(sorted(str(c) for c in commits)))
    (commit,) = commits
    return max(times), (str(commit) if commit else None), (dirty if commit else None)


def record_id(when: dt.datetime, commit: str | None, dirty: bool | None) -> str:
    """The stable id of a run: ``YYYY-MM-DDTHHMMZ-<commit[:7]>`` (``nocommit`` without one), ``-dirty`` if so."""
    stamp = when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H%MZ")
    return f"{stamp}-{commit[:7].lower() if commit else 'nocommit'}" + ("-dirty" if dirty else "")


def _sha256(path: Path) -> str:
    return "sha256:" + hash_file(path)


def _same_run(record: ArchiveRecord, tasks: dict[str, RunTask]) -> bool:
    """Whether a record holds exactly these tasks' results files (by checksum)."""
    if set(record.tasks) != set(tasks):
        return False
    return all(_sha256(record.tasks[n].path) == _sha256(t.path) for n, t in tasks.items())


def add_record(results: Path, archive: Path) -> tuple[ArchiveRecord, bool]:
    """Keep a finished run in the archive.

    Parameters
    ----------
    results
        The run: a results folder of ``openpert benchmark`` (one ``<task>/results.json`` each), one
        task's folder, or a ``results.json``.
    archive
        The archive folder; created if needed.

    Returns
    -------
    tuple
        The record, and whether it was added (``False``: the same run was already there).

    Raises
    ------
    ArchiveError
        When the run cannot be read or has no time or a consistent commit.
    """
    tasks = read_run(Path(results))
    when, commit, dirty = run_time_and_commit(tasks)
    archive = Path(archive)
    archive.mkdir(parents=True, exist_ok=True)
    base = record_id(when, commit, dirty)
    rid, n = base, 1
    while (archive / rid).exists():
        existing = read_record_at(archive / rid)
        if _same_run(existing, tasks):
            return existing, False
        n += 1
        rid = f"{base}-{n}"
    index: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "id": rid,
                             "created": when.isoformat().replace("+00:00", "Z"),
                             "commit": commit, "dirty": dirty, "tasks": []}
    # Built in a temporary folder and renamed into place: a record is complete or absent.
    staging = Path(tempfile.mkdtemp(prefix=f".{rid}.", dir=archive))
    try:
        for name, task in tasks.items():
            folder = staging / name
            folder.mkdir()
            shutil.copyfile(task.path, folder / RESULTS_FILE)
            entry = {"task": name, "results": f"{name}/{RESULTS_FILE}", "sha256": _sha256(folder / RESULTS_FILE),
                     "items": None, "items_sha256": None,
                     "methods": len(task.results.get("methods") or []),
                     "datasets": len(task.results.get("datasets") or [])}
            if task.items_path is not None:
                shutil.copyfile(task.items_path, folder / ITEM_SCORES)
                entry["items"] = f"{name}/{ITEM_SCORES}"
                entry["items_sha256"] = _sha256(folder / ITEM_SCORES)
            index["tasks"].append(entry)
        (staging / RECORD_FILE).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
        os.chmod(staging, 0o755)
        staging.rename(archive / rid)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return read_record_at(archive / rid), True


def read_record_at(folder: Path) -> ArchiveRecord:
    """Read the record in ``folder``, checking every file against the checksum its index gives.

    Raises
    ------
    ArchiveError
        When the index is missing or malformed, or a file is missing or altered.
    """
    folder = Path(folder)
    index_path = folder / RECORD_FILE
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArchiveError(f"{folder}: not an archive record (no {RECORD_FILE})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ArchiveError(f"{index_path}: not a readable record index ({err})") from None
    if not isinstance(index, dict) or not isinstance(index.get("tasks"), list) or not index.get("id"):
        raise ArchiveError(f"{index_path}: not a record index (no `id` and `tasks` list)")
    tasks: dict[str, RunTask] = {}
    for entry in index["tasks"]:
        try:
            name, rel, sha = str(entry["task"]), str(entry["results"]), entry["sha256"]
        except (KeyError, TypeError):
            raise ArchiveError(f"{index_path}: a task entry lacks `task`, `results` or `sha256`: {entry!r}") from None
        path = _inside(folder, rel, index_path)
        if not path.is_file():
            raise ArchiveError(f"{index_path}: {rel} is missing")
        if _sha256(path) != sha:
            raise ArchiveError(f"{path}: altered since it was archived (checksum differs from {RECORD_FILE})")
        items = None
        if entry.get("items"):
            items = _inside(folder, str(entry["items"]), index_path)
            if not items.is_file() or _sha256(items) != entry.get("items_sha256"):
                raise ArchiveError(f"{items}: missing or altered since it was archived")
        tasks[name] = RunTask(name, read_results_file(path), path, items)
    return ArchiveRecord(str(index["id"]), folder, str(index.get("created") or ""), index.get("commit"),
                         index.get("dirty"), dict(sorted(tasks.items())))


def _inside(folder: Path, rel: str, index_path: Path) -> Path:
    path = (folder / rel).resolve()
    if not path.is_relative_to(folder.resolve()):
        raise ArchiveError(f"{index_path}: {rel!r} points outside the record")
    return path


def list_records(archive: Path) -> list[ArchiveRecord]:
    """Every record of an archive, oldest first (by time, then id).

    Raises
    ------
    ArchiveError
        When the archive folder does not exist or a record in it cannot be read.
    """
    archive = Path(archive)
    if not archive.is_dir():
        raise ArchiveError(f"{archive}: no such archive folder")
    records = [read_record_at(p) for p in sorted(archive.iterdir())
               if p.is_dir() and not p.name.startswith(".") and (p / RECORD_FILE).is_file()]
    return sorted(records, key=lambda r: (r.created, r.id))


def read_record(archive: Path, rid: str) -> ArchiveRecord:
    """The record ``rid`` of an archive (``latest`` names the newest).

    Raises
    ------
    ArchiveError
        When there is no such record.
    """
    if rid == "latest":
        records = list_records(archive)
        if not records:
            raise ArchiveError(f"{archive}: the archive holds no record")
        return records[-1]
    if not ID_PATTERN.match(rid):
        raise ArchiveError(f"{rid!r} is not a record id (like 2026-11-28T0412Z-fb79450)")
    folder = Path(archive) / rid
    if not (folder / RECORD_FILE).is_file():
        raise ArchiveError(f"{archive}: no record {rid!r}")
    return read_record_at(folder)


def resolve_run(spec: str, archive: Path | None) -> tuple[str, dict[str, RunTask]]:
    """A run named on the command line: a path (results folder, ``results.json``, record folder) or a record id.

    Returns
    -------
    tuple
        A label for the run (the record id or the path) and its tasks.

    Raises
    ------
    ArchiveError
        When ``spec`` is neither an existing path nor a record of ``archive``.
    """
    path = Path(spec)
    if path.exists():
        if (path / RECORD_FILE).is_file():
            return read_record_at(path).id, read_run(path)
        return spec, read_run(path)
    if archive is None:
        raise ArchiveError(f"{spec}: no such file or folder (give --archive to name an archive record)")
    record = read_record(archive, spec)
    return record.id, record.tasks
