"""Tasks read from the tree: the folder of a component decides its type."""

from __future__ import annotations

import shutil

import pytest

from openpert.config.task import Task
from openpert.config.viash import ConfigError


def test_components_are_discovered_by_type(tiny_task):
    assert {c.name for c in tiny_task.of_type("metric")} == {"correlation", "errors"}
    assert "group_mean" in {c.name for c in tiny_task.of_type("method")}


def test_a_method_that_merges_the_control_interface_is_refused(project_copy):
    """A contribution in methods/ posing as a control would be given the solution."""
    task_dir = project_copy / "src" / "tiny"
    poser = task_dir / "methods" / "poser"
    shutil.copytree(task_dir / "control_methods" / "truth", poser)
    config = poser / "config.vsh.yaml"
    config.write_text(config.read_text().replace("name: truth", "name: poser"))
    with pytest.raises(ConfigError, match=r"poser/config.vsh.yaml: info.type is 'control_method' but the component is in methods/"):
        Task(task_dir).of_type("method")


def test_a_component_outside_the_type_folders_is_refused(project_copy):
    task_dir = project_copy / "src" / "tiny"
    shutil.copytree(task_dir / "methods" / "group_mean", task_dir / "extras" / "group_mean")
    with pytest.raises(ConfigError, match=r"components live in datasets, control_methods, methods, metrics/"):
        Task(task_dir).of_type("method")
