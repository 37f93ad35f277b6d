"""The ``openpert archive`` and ``openpert compare`` command lines: keep runs, list them, compare two.

Subcommands
-----------
``archive add RESULTS [--archive DIR]``
    Keep a finished run (a results folder, a task's folder or a ``results.json``) as a record.
``archive list [--archive DIR] [--format text|json]``
    The records, oldest first.
``archive show ID [--archive DIR] [--format text|json]``
    One record (``latest`` for the newest): its tasks, their files and checksums verified.
``compare OLD NEW [--archive DIR] [--format text|markdown|json] [--methods all|changed] [-o FILE]``
    What changed between two runs, each a results folder, a ``results.json``, a record folder or a record id.

The archive folder is ``--archive``, else ``$OPENPERT_ARCHIVE``, else ``archive`` in the current folder.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from openpert.results.archive import ARCHIVE_ENV, add_record, list_records, read_record, resolve_run
from openpert.results.compare import FOCUS, N_PERMUTATIONS, compare_runs, format_markdown, format_text


def default_archive(given: str | None) -> Path:
    """The archive folder: the one given, else ``$OPENPERT_ARCHIVE``, else ``./archive``."""
    return Path(given or os.environ.get(ARCHIVE_ENV) or "archive")


def add_archive_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``archive`` subcommands to ``parser``."""
    sub = parser.add_subparsers(dest="archive_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--archive", help=f"the archive folder (default: ${ARCHIVE_ENV}, else ./archive)")
    p = sub.add_parser("add", parents=[common], help="keep a finished run as a record")
    p.add_argument("results", help="a results folder (one <task>/results.json each), a task's folder or a results.json")
    p = sub.add_parser("list", parents=[common], help="the records, oldest first")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p = sub.add_parser("show", parents=[common], help="one record (its files' checksums verified)")
    p.add_argument("id", help="the record id, or 'latest'")
    p.add_argument("--format", choices=["text", "json"], default="text")


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``compare`` arguments to ``parser``."""
    parser.add_argument("old", help="the earlier run: results folder, results.json, record folder or record id")
    parser.add_argument("new", help="the later run, given the same ways")
    parser.add_argument("--archive", help=f"where record ids are looked up (default: ${ARCHIVE_ENV}, else ./archive)")
    parser.add_argument("--format", choices=["text", "markdown", "json"], default="text")
    parser.add_argument("--methods", choices=list(FOCUS), default="all",
                        help="all methods, or only those added, removed or whose code changed (a pull request's)")
    parser.add_argument("--permutations", type=int, default=N_PERMUTATIONS, help="random sign vectors per paired test")
    parser.add_argument("-o", "--output", help="write here (appending, as a job summary wants) instead of stdout")


def run_archive(ns: argparse.Namespace) -> int:
    """Run an ``archive`` subcommand."""
    archive = default_archive(ns.archive)
    if ns.archive_command == "add":
        record, added = add_record(Path(ns.results), archive)
        print(f"{'added' if added else 'already archived'}: {record.id} ({', '.join(record.tasks)}) in {record.path}")
        return 0
    records = list_records(archive) if ns.archive_command == "list" else [read_record(archive, ns.id)]
    if ns.format == "json":
        entries = [{**r.summary(), "path": str(r.path),
                    "files": {name: {"results": str(t.path), "items": str(t.items_path) if t.items_path else None}
                              for name, t in r.tasks.items()}} for r in records]
        print(json.dumps(entries if ns.archive_command == "list" else entries[0], indent=2))
        return 0
    for r in records:
        commit = (r.commit or "no commit")[:10] + (" (dirty)" if r.dirty else "")
        print(f"{r.id}  {r.created}  {commit}  {', '.join(r.tasks)}")
        if ns.archive_command == "show":
            for name, t in r.tasks.items():
                n_methods, n_scores = len(t.results.get("methods") or []), len(t.results.get("scores") or [])
                items = "with per-item values" if t.items_path else "without per-item values"
                print(f"  {name}: {n_methods} methods, {n_scores} scores ({items}) in {t.path.parent}")
    return 0


def run_compare(ns: argparse.Namespace) -> int:
    """Run ``compare``."""
    archive = default_archive(ns.archive)
    old_label, old = resolve_run(ns.old, archive)
    new_label, new = resolve_run(ns.new, archive)
    if not set(old) & set(new):
        print(f"openpert: warning: {old_label} and {new_label} share no task", file=sys.stderr)
    comparison = compare_runs(old, new, old_label=old_label, new_label=new_label, focus=ns.methods,
                              n_permutations=ns.permutations)
    if ns.format == "json":
        text = json.dumps(comparison, indent=2) + "\n"
    elif ns.format == "markdown":
        text = format_markdown(comparison)
    else:
        text = format_text(comparison)
    if ns.output:
        with open(ns.output, "a", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0
