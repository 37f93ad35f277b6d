"""Every dataset component of every task runs with the network off: its component test, in the sandbox.

The sandbox shares the host's network with components that talk to a language model only
(:func:`openpert.run.sandbox.needs_network`); a dataset loader reads files the data store fetched
before its job (or, in its test, the task's test resources and the shared data folder). Each loader
runs here on its ``info.test_default`` arguments in a sandbox without ``--share-net``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_marks import needs_sandbox

from openpert.config.project import shared_data_dir
from openpert.config.viash import read_config
from openpert.run import sandbox as sandboxing
from openpert.testing.plugin import run_component_test

ROOT = Path(__file__).resolve().parents[1]
LOADERS = sorted(ROOT.glob("src/*/datasets/*/config.vsh.yaml"))


def test_every_task_has_a_dataset_component():
    tasks = {p.parents[2].name for p in LOADERS}
    assert tasks == {p.parent.name for p in ROOT.glob("src/*/api")}


@needs_sandbox()
@pytest.mark.parametrize("path", LOADERS, ids=lambda p: f"{p.parents[2].name}/{p.parent.name}")
def test_a_dataset_component_runs_without_network(path, tmp_path, monkeypatch):
    config = read_config(path)
    assert config.type == "dataset" and not sandboxing.needs_network(config)
    if config.info.get("test_requires_shared_data") and not shared_data_dir(ROOT).is_dir():
        pytest.skip(f"{config.name} reads the shared data folder {shared_data_dir(ROOT)}")
    monkeypatch.setenv(sandboxing.ENV_SANDBOX, "on")  # the sandbox, or a failure: never a run with the host's network
    result = run_component_test(config, tmp_path)
    assert result.succeeded and result.outputs
