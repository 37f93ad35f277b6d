"""The ``openpert data`` command line: list, fetch and verify the public files of the tasks.

Subcommands
-----------
``list [--task T...] [--format text|tsv|json]``
    Every file: size, licence (non-commercial said plainly), pinned or not, whether the store holds it.
``fetch [--task T...] [--mirror URL] [--offline] [-j N] [--timeout S] [--include-large] [--project]``
    Fill the store; says sizes and licences first; resumes partial downloads.

Each command covers the tasks' files and the project's own (``common/api/data_manifest.yaml``:
the Viash schemas); ``--project`` keeps to the project's own.
``verify [--task T...]``
    Hash every file of the store again against its manifest (or first fetch); exit 1 on a mismatch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from openpert.config.task import Task, discover_tasks
from openpert.config.viash import ConfigError, find_project_root
from openpert.data.fetching import fetch, sources_from_environment, verify
from openpert.data.manifest import DataFile, merge_manifests, project_manifest, task_manifest
from openpert.data.store import DataStore, default_store_dir
from openpert.engines.plan import dataset_entries
from openpert.files import format_bytes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``data`` subcommands to ``parser``."""
    sub = parser.add_subparsers(dest="data_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--task", nargs="+", default=["all"], help="task name(s) under src/, or 'all' (default)")
    common.add_argument("--store", help="the data store (default: $OPENPERT_DATA, else ~/.cache/openpert/data)")
    common.add_argument("--include-large", action="store_true",
                        help="also the files of datasets marked large (multi-GB screens)")
    common.add_argument("--project", action="store_true",
                        help="only the project's own files (common/api/data_manifest.yaml: the Viash schemas)")

    p = sub.add_parser("list", parents=[common], help="the public files the tasks read: size, licence, state")
    p.add_argument("--format", choices=["text", "tsv", "json"], default="text")

    p = sub.add_parser("fetch", parents=[common], help="fetch what the store lacks (verified, resumable)")
    p.add_argument("--mirror", help="a folder or URL holding every file at its store path; replaces every other "
                                    "source (default: $OPENPERT_DATA_MIRROR)")
    p.add_argument("--offline", action="store_true", help="use no network; say what is missing")
    p.add_argument("-j", "--jobs", type=int, default=4, help="files fetched at once")
    p.add_argument("--timeout", type=float, help="seconds without a byte before a download is given up (default 60)")

    sub.add_parser("verify", parents=[common], help="hash every file of the store again")


def _tasks(root: Path, names: list[str]) -> list[Task]:
    if names == ["all"]:
        return discover_tasks(root)
    known = {t.name: t for t in discover_tasks(root)}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"{root / 'src'}: no task {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return [known[n] for n in names]


def selected_files(tasks: list[Task], *, include_large: bool, root: Path | None = None
                   ) -> tuple[list[DataFile], dict[str, list[str]]]:
    """The files the tasks' planned datasets read (and the project's own, with ``root``), and who reads each."""
    chosen: list[list[DataFile]] = []
    readers: dict[str, list[str]] = {}
    if root is not None:
        chosen.append(project_manifest(root))
        readers.update({f.path: ["project"] for f in chosen[0]})
    for task in tasks:
        manifest = task_manifest(task.dir)
        dataset_ids = [e["id"] for _, e in dataset_entries(task, include_large=include_large)[0]]
        own = [f for f in manifest if f.datasets is None or any(f.read_by(d) for d in dataset_ids)]
        chosen.append(own)
        for f in own:
            readers.setdefault(f.path, []).append(task.name)
    return merge_manifests(chosen), readers


def _licence_summary(files: list[DataFile]) -> list[str]:
    lines = []
    by_licence: dict[str, list[DataFile]] = {}
    for f in files:
        by_licence.setdefault(f.license, []).append(f)
    for licence, group in sorted(by_licence.items()):
        flag = "  NON-COMMERCIAL: research and benchmarking use only" if any(f.non_commercial for f in group) else ""
        lines.append(f"  {len(group):3d} file(s) under {licence}{flag}")
    return lines


def run(ns: argparse.Namespace) -> int:
    """Run an ``openpert data`` subcommand."""
    root = find_project_root(Path.cwd())
    tasks = [] if ns.project else _tasks(root, ns.task)
    files, readers = selected_files(tasks, include_large=ns.include_large, root=root)
    store = DataStore(ns.store or default_store_dir())
    if ns.data_command == "list":
        return _list(files, readers, store, ns.format)
    if ns.data_command == "verify":
        states = verify(files, store)
        bad = [(f, s) for f, s in states if s.state != "ok"]
        for f, s in bad:
            print(f"{s.state:8s} {f.path}" + (f": {s.detail}" if s.detail else ""))
        print(f"{len(states) - len(bad)} of {len(states)} file(s) verified in {store.root}")
        return 1 if bad else 0
    sources = sources_from_environment(root, mirror=ns.mirror, offline=ns.offline or None, timeout=ns.timeout)
    missing = [f for f, s in verify(files, store, rehash=False) if s.state != "ok"]
    print(f"{len(files)} file(s) for {', '.join(t for t in sorted({t for r in readers.values() for t in r}))}; "
          f"{len(missing)} to fetch ({format_bytes(sum(f.size or 0 for f in missing))}"
          f"{', some of unknown size' if any(f.size is None for f in missing) else ''}) into {store.root} from "
          f"{sources.describe()}", file=sys.stderr)
    for line in _licence_summary(files):
        print(line, file=sys.stderr)
    outcomes = fetch(files, store, sources, jobs=ns.jobs, stream=sys.stderr)
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.action] = counts.get(outcome.action, 0) + 1
    print(", ".join(f"{n} {action}" for action, n in sorted(counts.items())) + f": {store.root}")
    return 0


def _list(files: list[DataFile], readers: dict[str, list[str]], store: DataStore, fmt: str) -> int:
    states = dict((f.path, s) for f, s in verify(files, store, rehash=False))
    rows = [{
        "path": f.path, "tasks": readers[f.path], "size": f.size, "sha256": f.sha256, "pinned": f.pinned,
        "license": f.license, "non_commercial": f.non_commercial, "citation": f.citation,
        "origin": f.url or f"derived by {f.derive.function} from " + ", ".join(d.url for _, d in f.derive.sources),
        "in_store": states[f.path].state,
    } for f in files]
    if fmt == "json":
        print(json.dumps({"store": str(store.root), "files": rows}, indent=1))
        return 0
    if fmt == "tsv":
        print("path\ttasks\tsize\tpinned\tlicense\tnon_commercial\tin_store\torigin")
        for r in rows:
            print("\t".join(str(x) for x in (r["path"], ",".join(r["tasks"]), r["size"] if r["size"] is not None else "",
                                             r["pinned"], r["license"], r["non_commercial"], r["in_store"], r["origin"])))
        return 0
    width = max((len(r["path"]) for r in rows), default=4)
    for r in rows:
        marks = [] if r["pinned"] else ["unpinned"]
        if r["non_commercial"]:
            marks.append("non-commercial")
        print(f"{r['path']:<{width}}  {format_bytes(r['size']) if r['size'] is not None else 'unknown':>10}  {r['in_store']:<8}  {r['license']}"
              + (f"  [{', '.join(marks)}]" if marks else ""))
    known = sum(r["size"] or 0 for r in rows)
    print(f"{len(rows)} file(s), {format_bytes(known)} known"
          + (f", {sum(r['size'] is None for r in rows)} of unknown size (unpinned)" if any(r["size"] is None for r in rows) else "")
          + f"; store: {store.root}")
    for line in _licence_summary(files):
        print(line)
    return 0
