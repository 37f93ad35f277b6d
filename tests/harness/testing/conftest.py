"""A test run's temporary folders of the test's own, for what is made once per test run."""

from __future__ import annotations

import types

import pytest


@pytest.fixture()
def own_run(tmp_path) -> types.SimpleNamespace:
    """A stand-in for pytest's ``tmp_path_factory`` whose run folder (``tmp_path/run``) is new: the suite's
    own run folder holds values made already."""
    worker = tmp_path / "run" / "worker"
    worker.mkdir(parents=True)
    return types.SimpleNamespace(getbasetemp=lambda: worker)
