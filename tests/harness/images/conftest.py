"""Fixtures of the image tests: small projects with base images of their own, and the fixture project with the real ones."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from project_paths import ROOT

VIASH_YAML = """\
name: demo
version: 1.2.3
organization: demo-org
links:
  docker_registry: registry.example
viash_version: 0.9.0
source: src
config_mods: |
  .runners[.type == "nextflow"].config.labels := { lowmem : "memory = 4.GB", lowcpu : "cpus = 1", lowtime : "time = 10.m" }
"""


def write_base(root: Path, name: str, from_image: str, pins: list[str], requires: list[str] | None = None,
               extra: str = "") -> Path:
    """Write ``docker/<name>/Dockerfile`` and its ``requirements.txt`` in ``root``."""
    folder = root / "docker" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Dockerfile").write_text(textwrap.dedent(f"""\
        FROM {from_image}
        COPY docker/{name}/requirements.txt /opt/requirements.txt
        RUN pip install --no-cache-dir --no-deps --requirement /opt/requirements.txt
        {extra}"""))
    header = f"# requires: {' '.join(requires or [p.split('==')[0] for p in pins])}\n"
    (folder / "requirements.txt").write_text(header + "".join(f"{p}\n" for p in pins))
    return folder


@pytest.fixture()
def demo_project(tmp_path) -> Path:
    """A project with base images core (on python:3.11) and ml (on core), and no components yet."""
    root = tmp_path / "demo"
    root.mkdir()
    (root / "_viash.yaml").write_text(VIASH_YAML)
    write_base(root, "core", "python:3.11.9-slim-bookworm", ["packaging==26.3"])
    write_base(root, "ml", "registry.example/demo-org/core:1.2.3", ["six==1.17.0"])
    return root


def add_component(root: Path, task: str, kind: str, name: str, engine: str, script: str = "print('hi')\n",
                  resources: str = "") -> Path:
    """A minimal component ``src/<task>/<kind>s/<name>`` with the given ``engines:`` block (YAML text)."""
    task_dir = root / "src" / task
    (task_dir / "api").mkdir(parents=True, exist_ok=True)
    (task_dir / "api" / f"comp_{kind}.yaml").write_text(f"namespace: {task}/{kind}s\ninfo:\n  type: {kind}\n")
    folder = task_dir / f"{kind}s" / name
    folder.mkdir(parents=True)
    (folder / "script.py").write_text(script)
    (folder / "config.vsh.yaml").write_text(
        f"__merge__: ../../api/comp_{kind}.yaml\nname: {name}\nlabel: {name}\nsummary: A component of the image tests.\n"
        f"resources:\n  - type: python_script\n    path: script.py\n{resources}{engine}")
    return folder


@pytest.fixture()
def base_writer():
    """:func:`write_base`, for tests (a conftest is not importable by name: tests/conftest.py is)."""
    return write_base


@pytest.fixture()
def component_writer():
    """:func:`add_component`, for tests."""
    return add_component


@pytest.fixture()
def fixture_with_images(project_copy) -> Path:
    """A private copy of the fixture project (tests/fixtures/project) holding the repository's real
    base images (docker/), so that its environments are the repository's own (and share their cache)."""
    shutil.copytree(ROOT / "docker", project_copy / "docker")
    return project_copy
