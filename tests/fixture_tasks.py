"""Copies of the fixture project's task ``tiny`` under another name, for tests of several tasks."""

from __future__ import annotations

import shutil
from pathlib import Path


def copy_tiny_task(project: Path, name: str) -> Path:
    """Copy ``src/tiny`` of a fixture project to ``src/<name>``, a task of its own; returns its folder.

    The copy is named ``name`` in its task_info.yaml, and its library is ``<name>_lib``, declared and
    imported under that name (a component may declare only its own task's library).
    """
    task = project / "src" / name
    shutil.copytree(project / "src" / "tiny", task)
    info = task / "api" / "task_info.yaml"
    info.write_text(info.read_text().replace("name: tiny\n", f"name: {name}\n", 1))
    (task / "tiny_lib").rename(task / f"{name}_lib")
    for path in [*task.rglob("config.vsh.yaml"), *task.rglob("script.py")]:
        path.write_text(path.read_text().replace("/src/tiny/tiny_lib", f"/src/{name}/{name}_lib").replace("tiny_lib", f"{name}_lib"))
    return task
