"""Call a task's own Python function in a child process, so that the harness never imports task code.

A task may contribute code to a harness step that is not a component: the readers of its papers'
published files (``api/published_results.yaml``) and its run-level statistics (``analysis.py``).
That code runs here, in a fresh interpreter with the task's folder on its path, and hands back
its answer as JSON through a file of its own (so that nothing it prints is taken for it). A failure,
its import included, or a time-out is one :class:`TaskCodeError` with the child's last error line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: Longest a task's function may take (s).
TIMEOUT_S = 600
#: argv: module, function, JSON list of path arguments, JSON keyword arguments, answer file.
_PROGRAM = """
import importlib, json, sys
from pathlib import Path
module, function, paths, kwargs, answer = sys.argv[1:6]
result = getattr(importlib.import_module(module), function)(*map(Path, json.loads(paths)), **json.loads(kwargs))
def plain(value):
    return value.item() if hasattr(value, "item") else str(value)
with open(answer, "w") as fh:
    json.dump(result, fh, default=plain)
"""


class TaskCodeError(RuntimeError):
    """A task's function failed, could not be imported, or gave no answer in time."""


def call_task_function(task_dir: str | Path, module: str, function: str, paths: Sequence[str | Path] = (),
                       kwargs: Mapping[str, Any] | None = None, *, timeout_s: float = TIMEOUT_S) -> Any:
    """``module.function(*paths, **kwargs)`` of a task, run in a child process; its JSON answer.

    Parameters
    ----------
    task_dir
        The task's folder (``src/<task>``): the child's working folder and first path entry.
    module, function
        What to call, e.g. ``"analysis"``, ``"task_statistics"``.
    paths
        Positional arguments, passed as :class:`pathlib.Path`.
    kwargs
        Keyword arguments (JSON values).
    timeout_s
        Longest the call may take.

    Raises
    ------
    TaskCodeError
        With the child's last error line, when the call fails (its import included) or exceeds
        ``timeout_s``.
    """
    task_dir = Path(task_dir).resolve()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(task_dir), *filter(None, [os.environ.get("PYTHONPATH")])]))
    with tempfile.TemporaryDirectory(prefix="openpert-task-code-") as tmp:
        answer = Path(tmp) / "answer.json"
        # -B: a benchmark reads the project and writes only its results folder (no __pycache__ beside the task's code).
        argv = [sys.executable, "-B", "-c", _PROGRAM, module, function, json.dumps([str(p) for p in paths]),
                json.dumps(dict(kwargs or {})), str(answer)]
        try:
            done = subprocess.run(argv, cwd=task_dir, env=env, capture_output=True, text=True, timeout=timeout_s,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise TaskCodeError(f"{module}.{function}: no answer within {timeout_s:g} s") from None
        if done.returncode != 0 or not answer.is_file():
            lines = done.stderr.strip().splitlines()
            raise TaskCodeError(lines[-1] if lines else f"{module}.{function}: exit {done.returncode} without a message")
        return json.loads(answer.read_text())
