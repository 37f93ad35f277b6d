"""Where a run's results come from: the code's commit, and digests of its components and datasets."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openpert.config.task import Task
from openpert.config.viash import ConfigError
from openpert.engines.cache_keys import component_digest, file_digest
from openpert.files import hash_text


def git_state(root: Path) -> tuple[str | None, bool | None]:
    """The commit of the checkout at ``root`` and whether its tree has uncommitted changes.

    ``(None, None)`` outside a git checkout (a source archive, say): provenance then says "not
    recorded" rather than guessing.
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
    status = git("status", "--porcelain", "--untracked-files=no")
    return commit.strip(), (bool(status.strip()) if status is not None else None)


def run_provenance(task: Task, plan: Mapping[str, Any]) -> dict[str, Any]:
    """The ``provenance`` object of ``results.json`` (see ``docs/results_json.md``).

    Component digests are the cache keys' component digests (config, declared resources and the
    shared science package), dataset digests combine the content digests of a dataset's files.
    """
    commit, dirty = git_state(task.root)
    components: dict[str, str] = {}
    for entry in [*plan["methods"], *plan["metrics"]]:
        try:
            components[entry["id"]] = "sha256:" + component_digest(task.component(entry["id"]))
        except (ConfigError, OSError):
            continue  # a component that cannot be read again has no digest to show; it is already a failure
    datasets = {}
    for ds in plan["datasets"]:
        files = sorted(ds["files"].items())
        try:
            datasets[ds["id"]] = "sha256:" + hash_text(*(f"{fid}:{file_digest(Path(path))}" for fid, path in files))
        except OSError:
            continue  # an unreadable dataset is reported as a failed dataset job; it has no digest
    return {"commit": commit, "dirty": dirty, "component_digests": components, "dataset_digests": datasets}
