"""Every dataset component of every task runs with the network off.

The sandbox shares the host's network with components that talk to a language model only
(:func:`openpert.run.sandbox.needs_network`); a dataset loader reads files the data store fetched
before its job (or, in its test, the task's test resources and the shared data folder).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from openpert.config.viash import read_config
from openpert.run import sandbox as sandboxing

ROOT = Path(__file__).resolve().parents[1]
LOADERS = sorted(ROOT.glob("src/*/datasets/*/config.vsh.yaml"))


def test_every_task_has_a_dataset_component():
    tasks = {p.parents[2].name for p in LOADERS}
    assert tasks == {p.parent.name for p in ROOT.glob("src/*/api")}


@pytest.mark.parametrize("path", LOADERS, ids=lambda p: f"{p.parents[2].name}/{p.parent.name}")
def test_no_dataset_component_is_given_the_network(path):
    # Each loader's own component test (collected from src/, sandboxed where CI requires the
    # sandbox) then runs it in a sandbox without --share-net: that run is the proof it needs none.
    config = read_config(path)
    assert config.type == "dataset" and not sandboxing.needs_network(config)
