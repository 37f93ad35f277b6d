"""Job cache keys: what a component declares and the shared science package, nothing else."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from project_paths import ROOT

from openpert.config.task import discover_tasks
from openpert.engines.benchmark import run_benchmark
from openpert.engines.cache_keys import component_digest


def _digests(root: Path) -> dict[str, str]:
    return {f"{task.name}/{c.type}/{c.name}": component_digest(c) for task in discover_tasks(root) for c in task.components}


def _copy_code(tmp_path: Path) -> Path:
    """The repository's code without its data: enough to read every component and hash it."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(ROOT / "_viash.yaml", root)
    shutil.copytree(ROOT / "common", root / "common", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _touch(path: Path) -> None:
    path.write_text(path.read_text() + "\n# edited\n")


@pytest.fixture(scope="module")
def before(tmp_path_factory) -> dict[str, str]:
    """The digests of an unedited copy of the code: the same in every copy (a key names no path), so read once."""
    return _digests(_copy_code(tmp_path_factory.mktemp("unedited")))


def test_editing_one_task_library_changes_only_its_components(tmp_path, before):
    root = _copy_code(tmp_path)
    libraries = sorted(p for p in (root / "src").glob("*/*_lib") if p.is_dir())
    assert libraries, "every task keeps its own code in src/<task>/<task>_lib"
    lib = libraries[0]
    task = lib.parent.name
    _touch(sorted(lib.glob("*.py"))[-1])
    after = _digests(root)
    changed = {k for k in before if before[k] != after[k]}
    assert changed, f"no component of {task} declares {lib.name}"
    assert all(k.startswith(f"{task}/") for k in changed), sorted(k for k in changed if not k.startswith(f"{task}/"))


def test_editing_the_harness_changes_no_component(tmp_path, before):
    root = _copy_code(tmp_path)
    for module in ("report/task_page.py", "results/scoring.py", "engines/local.py"):
        _touch(root / "common" / "openpert" / module)
    assert _digests(root) == before


def test_editing_the_science_package_changes_every_component(tmp_path, before):
    root = _copy_code(tmp_path)
    _touch(root / "common" / "pertsci" / "wilcoxon.py")
    after = _digests(root)
    assert all(before[k] != after[k] for k in before)


def test_resume_reruns_only_jobs_whose_library_changed(project_copy, tmp_path):
    """The fixture's shrunk_mean declares tiny_lib; editing it re-runs that method and nothing else."""
    task_dir = project_copy / "src" / "tiny"
    from openpert.config.task import Task

    inputs = project_copy / "resources_test" / "tiny"
    # group_mean and the control truth do not declare tiny_lib: their jobs must be reused
    selection = {"methods": ["group_mean", "shrunk_mean"], "controls": ["truth"], "metrics": ["errors"]}
    run_benchmark(Task(task_dir), tmp_path / "out", input_dir=inputs, jobs=2, progress=False, **selection)
    _touch(task_dir / "tiny_lib" / "shrinkage.py")
    again = run_benchmark(Task(task_dir), tmp_path / "out", input_dir=inputs, resume=True, progress=False, **selection)
    reran = sorted(j["job_id"] for j in again["resources"] if not j.get("cached"))
    assert reran == ["syn/shrunk_mean"], reran


def test_every_byte_a_job_is_given_is_in_its_key(project_copy):
    # A resource folder with bytecode beside its sources: staged with it, so hashed with it.
    from openpert.config.viash import read_config

    config_path = next((project_copy / "src").rglob("methods/*/config.vsh.yaml"))
    helpers = config_path.parent / "helpers"
    helpers.mkdir()
    (helpers / "answer.pyc").write_bytes(b"\x00" * 32)
    (helpers / "__pycache__").mkdir()
    (helpers / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\x00" * 32)
    text = config_path.read_text().replace("resources:\n", "resources:\n  - path: helpers\n", 1)
    assert text != config_path.read_text(), "the fixture's config has a resources list"
    config_path.write_text(text)
    before = component_digest(read_config(config_path))
    (helpers / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\x01" * 32)  # never staged: no change
    assert component_digest(read_config(config_path)) == before
    (helpers / "answer.pyc").write_bytes(b"\x01" * 32)
    assert component_digest(read_config(config_path)) != before
