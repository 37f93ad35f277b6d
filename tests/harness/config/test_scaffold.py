"""``openpert create-component``: every task's scaffolded method passes ruff and its component test as generated."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from project_paths import ROOT

from openpert.config.layout_rules import check_component
from openpert.config.lint import PLACEHOLDER, lint_config
from openpert.config.scaffold import create_component
from openpert.config.task import discover_tasks
from openpert.config.viash import read_config
from openpert.testing.plugin import run_component_test

TASKS = sorted(t.dir.name for t in discover_tasks(ROOT))


def _ruff() -> str | None:
    return shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")


def _fill_in(config: Path) -> None:
    """What a contributor writes into the scaffold's placeholders of the config."""
    text = config.read_text().replace("FILL IN: ", "Written by the contributor: ").replace("10.0000/fill.in", "10.1000/real.doi")
    config.write_text(text.replace("https://example.org/fill-in", "https://example.org/docs"))


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the repository's project files that a scaffold may write into.

    One for the module (a copy of the test resources costs most of a second): each test scaffolds its
    method in a task of its own, and reads nothing of another task.
    """
    root = tmp_path_factory.mktemp("scaffold") / "project"
    root.mkdir()
    shutil.copy(ROOT / "_viash.yaml", root)
    shutil.copy(ROOT / "pyproject.toml", root)  # ruff's settings
    for folder in ("src", "resources_test", "docker"):
        shutil.copytree(ROOT / folder, root / folder)
    return root


def test_every_task_is_scaffolded():
    assert TASKS == ["biome_bench", "pertreasonqa", "perturbation_effect", "perturbation_prediction", "perturbqa"]


@pytest.mark.skipif(_ruff() is None, reason="ruff is not installed (pip install -e .[test])")
@pytest.mark.parametrize("task", TASKS)
def test_a_scaffolded_method_passes_ruff_and_its_component_test(project, task, tmp_path):
    folder = create_component(project, task=task, comp_type="method", name="my_method")
    lint = subprocess.run([_ruff(), "check", "--no-cache", str(folder)], cwd=project, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    config = folder / "config.vsh.yaml"
    # It declares the task's library and reads and writes with the task's own helpers.
    assert {"type": "file", "path": f"/src/{task}/{task}_lib"} in read_config(config).resources
    script = (folder / "script.py").read_text()
    assert f"from {task}_lib" in script and "write_prediction(" in script
    # As generated, it passes its component test, which runs the script on the task's test resources and
    # validates every output against the task's file formats, as a benchmark's job is validated.
    result = run_component_test(read_config(config), tmp_path / "work")
    assert result.succeeded, result.reason
    # lint alone asks for the real text in place of the placeholders, and nothing else
    problems = lint_config(read_config(config))
    assert problems and all(p.endswith(PLACEHOLDER) for p in problems), problems
    _fill_in(config)
    assert lint_config(read_config(config)) == []
    assert [v for v in check_component(read_config(config))] == []
