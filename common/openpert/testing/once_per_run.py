"""Values made once per test run and shared by its pytest-xdist workers, in the run's temporary folder."""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from openpert.files import locked

T = TypeVar("T")


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary folder of this test run, shared by its pytest-xdist workers (each has its own below it)."""
    folder = tmp_path_factory.getbasetemp()
    return folder.parent if os.environ.get("PYTEST_XDIST_WORKER") else folder


def workers_lock(tmp_path_factory: pytest.TempPathFactory, name: str) -> contextlib.AbstractContextManager[None]:
    """Hold the lock ``name`` of this test run: one worker at a time, whatever the number of pytest-xdist workers."""
    return locked(run_folder(tmp_path_factory) / f"{name}.lock")


def once_per_test_run(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], T]) -> T:
    """``make(folder)`` once per test run, however many pytest-xdist workers ask for it.

    A session (or module) fixture runs once in each worker that needs it, and a whole benchmark
    is too costly to run twice. The first worker to ask makes the value in a folder shared by the
    workers of this run, under a lock, and pickles it beside the folder; the others wait for the
    lock and unpickle it. Each worker gets its own copy of the value, but the folder is shared:
    whoever changes what it holds must hold a :func:`workers_lock`. A worker whose ``make`` failed
    leaves nothing behind: the next to ask makes it afresh (and meets the failure itself).

    Parameters
    ----------
    tmp_path_factory
        pytest's factory of this worker's temporary folders.
    name
        The value's folder name, unique among the callers.
    make
        Makes the value, writing what it needs into the (empty) folder it is given.
    """
    shared = run_folder(tmp_path_factory)
    folder, stored = shared / name, shared / f"{name}.pickle"
    with workers_lock(tmp_path_factory, name):
        if stored.is_file():
            return pickle.loads(stored.read_bytes())
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        value = make(folder)
        stored.write_bytes(pickle.dumps(value))
        return value
