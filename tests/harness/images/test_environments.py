"""Image environments: openpert.images.environments, on a stand-in base image of one pinned package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.util import cache_from_source
from pathlib import Path

import pytest
from project_paths import ROOT

from openpert.config.viash import read_config
from openpert.images import ImageError
from openpert.images.environments import STAMP, base_env, bytecode_command, component_env, harness_source, prune_envs

TINY = "engines:\n  - {type: docker, registry: registry.example, organization: demo-org, image: tiny, tag: 1.2.3}\n  - {type: native}\n"


@pytest.fixture()
def tiny_base(demo_project, base_writer) -> object:
    """The demo project with a base image 'tiny' of one pure-Python package, and the repository's test tools."""
    base_writer(demo_project, "tiny", "python:3.11-slim", ["packaging==26.3"])
    shutil.copy(ROOT / "docker" / "test_requirements.txt", demo_project / "docker" / "test_requirements.txt")
    return demo_project


def _installed(env) -> set[str]:
    # The distributions the environment's own interpreter finds on its path, as `pip list --python` lists
    # them, without pip's start (half a second of CPU a call; the environment holds no pip of its own).
    listing = "import importlib.metadata as m, json; print(json.dumps([d.metadata['Name'] for d in m.distributions()]))"
    out = subprocess.run([str(env.python), "-c", listing], capture_output=True, text=True, check=True)
    return {name.lower() for name in json.loads(out.stdout)}


def _imports(env, module: str) -> bool:
    return subprocess.run([str(env.python), "-c", f"import {module}"], capture_output=True).returncode == 0


def _compiled(module) -> bool:
    return Path(cache_from_source(str(module))).is_file()


def test_bytecode_is_compiled_but_for_test_suites_and_a_module_that_does_not_compile_is_left_as_source(tmp_path):
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    modules = {name: site / name for name in ("pkg/mod.py", "pkg/tests/test_mod.py", "pkg/test/helper.py",
                                              "pkg/testing/fixtures.py", "pkg/broken.py")}
    for name, path in modules.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("def f(:\n" if name == "pkg/broken.py" else "X = 1\n")
    done = subprocess.run(bytecode_command(sys.executable, tmp_path / "env"), capture_output=True, text=True)
    assert done.returncode == 0 and not done.stdout and not done.stderr, done
    assert {name for name, path in modules.items() if _compiled(path)} == {"pkg/mod.py", "pkg/testing/fixtures.py"}


def test_an_interpreter_of_another_python_than_the_image_is_refused(demo_project, base_writer, tmp_path):
    base_writer(demo_project, "old", "python:3.10-slim", ["packaging==26.3"])
    with pytest.raises(ImageError, match=r"docker/old/Dockerfile: the image has Python 3.10 but .* is Python 3\.11"):
        base_env(demo_project, "old", cache_dir=tmp_path / "envs")


@pytest.mark.slow
def test_a_base_environment_holds_exactly_its_pins_pytest_and_the_harness_is_cached_and_an_overlay_adds_to_a_copy(
        tiny_base, component_writer, base_writer, tmp_path):
    """One base environment serves every part: what it holds and how it is cached, then an overlay and images built on it
    (one whose pins are not a closed set), and how a change makes them stale (each base environment built anew is a
    virtual environment, pip and an editable install: the slow part of these tests)."""
    cache = tmp_path / "envs"
    env = base_env(tiny_base, "tiny", cache_dir=cache, strict=False, log=lambda m: None)
    assert env.built_seconds is not None and env.path.parent == cache and env.path.name.startswith("tiny-")
    assert _installed(env) - {"pip", "setuptools"} == {"packaging", "pytest", "pluggy", "iniconfig", "pygments", "openpert"}
    # The harness and pertsci are those of this checkout (editable), not a copy.
    where = subprocess.run([str(env.python), "-c", "import openpert, pertsci; print(openpert.__file__, pertsci.__file__)"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert all(path.startswith(str(harness_source() / "common")) for path in where)
    assert not _imports(env, "six") and not _imports(env, "numpy"), "nothing the files do not pin"
    stamp = json.loads((env.path / STAMP).read_text())
    assert stamp["key"] == env.key and stamp["packages"] == 5
    # Cached: the same folder, no build.
    again = base_env(tiny_base, "tiny", cache_dir=cache, strict=False, log=lambda m: None)
    assert (again.path, again.built_seconds) == (env.path, None)

    # An overlay adds a component's packages to a complete environment of its own.
    plain = read_config(component_writer(tiny_base, "t", "method", "plain", TINY) / "config.vsh.yaml")
    engine = TINY.replace("tag: 1.2.3}", "tag: 1.2.3, setup: [{type: python, packages: [six==1.17.0]}]}")
    adds = read_config(component_writer(tiny_base, "t", "method", "adds", engine) / "config.vsh.yaml")
    base = component_env(plain, cache_dir=cache, strict=False, log=lambda m: None)
    assert (base.path, base.built_seconds) == (env.path, None), "a component without packages has its image's environment"
    overlay = component_env(adds, cache_dir=cache, strict=False, log=lambda m: None)
    assert not base.packages and overlay.packages == ("six==1.17.0",)
    assert overlay.path.parent == cache / "overlays"
    assert _imports(overlay, "six") and not _imports(base, "six")
    assert _installed(overlay) - _installed(base) == {"six"}
    # Nothing of it lives outside its own folder (the job sandbox shows a job its interpreter's environment only).
    assert not list(overlay.path.rglob("*.pth")) or all(str(base.path) not in p.read_text() for p in overlay.path.rglob("*.pth"))
    # What it holds of the base is stored once: its files are hard links to the base's, and still import.
    site = next(overlay.path.glob("lib/python3.*/site-packages"))
    module = site / "packaging" / "version.py"
    assert os.path.samestat(module.stat(), (base.path / module.relative_to(overlay.path)).stat())
    assert not os.path.samestat((site / "six.py").stat(), module.stat())
    stamp = json.loads((overlay.path / STAMP).read_text())
    assert stamp["shared_files"] > 100 and stamp["shared_bytes"] > 1_000_000
    assert _imports(overlay, "packaging.version")
    # Installed without compiling, then compiled: the base's packages and the overlay's own have bytecode.
    assert _compiled(module) and _compiled(site / "six.py")

    # An image FROM another is built as its Dockerfile builds it: a copy of the environment below, its own pins on top.
    base_writer(tiny_base, "child", "registry.example/demo-org/tiny:1.2.3", ["six==1.17.0"])
    child = base_env(tiny_base, "child", cache_dir=cache, strict=False, log=lambda m: None)
    assert child.path.parent == cache and _installed(child) - _installed(env) == {"six"} and _imports(child, "openpert")
    site = next(child.path.glob("lib/python3.*/site-packages"))
    assert os.path.samestat((site / "packaging" / "version.py").stat(), (env.path / module.relative_to(overlay.path)).stat())
    pins = set((env.path / "openpert-requirements.txt").read_text().split())
    assert set((child.path / "openpert-requirements.txt").read_text().split()) == pins | {"six==1.17.0"}
    # Pins on top of another image's environment that are not a closed set fail pip check, naming their file
    # (jsonschema-specifications needs referencing, which neither file pins); the build is left unfinished.
    base_writer(tiny_base, "open_on_tiny", "registry.example/demo-org/tiny:1.2.3", ["jsonschema-specifications==2025.9.1"])
    with pytest.raises(ImageError, match=r"pip check: the requirement files .*docker/open_on_tiny/requirements.txt and those "
                                         r"of the image they build on are not a closed set"):
        base_env(tiny_base, "open_on_tiny", cache_dir=cache, strict=False, log=lambda m: None)
    (unfinished,) = cache.glob("open_on_tiny-*/")
    assert not (unfinished / STAMP).exists()

    # A change of a requirement file is a new environment (here the child's: a copy of the environment below, built
    # in seconds, where the stand-in image's own is a new virtual environment and the harness again); prune removes
    # the old one and the unfinished build, and keeps the current ones.
    child_requirements = tiny_base / "docker" / "child" / "requirements.txt"
    child_requirements.write_text(child_requirements.read_text() + "mdurl==0.1.2\n")
    changed = base_env(tiny_base, "child", cache_dir=cache, strict=False, log=lambda m: None)
    assert changed.path != child.path and _imports(changed, "mdurl") and _installed(changed) - _installed(env) == {"six", "mdurl"}
    assert prune_envs(tiny_base, cache_dir=cache, log=lambda m: None) == [child.path, unfinished]
    assert changed.path.is_dir() and env.path.is_dir() and overlay.path.is_dir()
    assert not child.path.exists() and not unfinished.exists()
    # A change of the image below makes stale its environment and every one built on it: the overlay and the image.
    requirements = tiny_base / "docker" / "tiny" / "requirements.txt"
    requirements.write_text(requirements.read_text() + "six==1.17.0\n")
    assert prune_envs(tiny_base, cache_dir=cache, log=lambda m: None) == [changed.path, env.path, overlay.path]
    assert not changed.path.exists() and not env.path.exists() and not overlay.path.exists()


@pytest.mark.slow
def test_requirement_files_that_are_not_a_closed_set_fail_pip_check_naming_them(demo_project, base_writer, tmp_path):
    """The same pins on top of another image's environment fail too: see the stand-in image's test above, whose
    environment they build on (an environment to build on costs a build with the harness)."""
    # jsonschema-specifications needs referencing, which the file does not pin.
    base_writer(demo_project, "open", "python:3.11-slim", ["jsonschema-specifications==2025.9.1"])
    with pytest.raises(ImageError, match=r"pip check: the requirement files .*docker/open/requirements.txt are not a closed set"):
        base_env(demo_project, "open", cache_dir=tmp_path / "envs", strict=False, log=lambda m: None)


def test_a_full_disk_is_named_as_the_reason_a_build_failed(tiny_base, tmp_path, monkeypatch):
    real_run = subprocess.run

    def full_disk(command, *args, **kwargs):
        if "venv" in command:  # the folder is all the failing install needs: no interpreter is set up in it
            os.makedirs(command[-1])
            return subprocess.CompletedProcess(command, 0)
        if "install" in command:
            kwargs["stdout"].write("ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device\n")
            return subprocess.CompletedProcess(command, 1)
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", full_disk)
    with pytest.raises(ImageError, match=r"installing the pins of .* failed \(exit 1\): the disk of .*/envs is full "
                                         r"\(\d+\.\d GB free now\); free some, or set OPENPERT_IMAGE_ENVS"):
        base_env(tiny_base, "tiny", cache_dir=tmp_path / "envs", strict=False, log=lambda m: None)


@pytest.mark.slow
def test_a_base_image_must_hold_every_dependency_of_the_harness(demo_project, tmp_path):
    # core pins packaging alone, and the project has no test tools: the least an environment installs.
    with pytest.raises(ImageError, match=r"pip check: the harness's dependencies \(.*pyproject.toml\) are not all in"):
        base_env(demo_project, "core", cache_dir=tmp_path / "envs", log=lambda m: None)


def test_setup_a_virtual_environment_cannot_reproduce_is_refused(tiny_base, component_writer, tmp_path):
    engine = TINY.replace("tag: 1.2.3}", "tag: 1.2.3, setup: [{type: apt, packages: [curl]}]}")
    config = read_config(component_writer(tiny_base, "t", "method", "apt", engine) / "config.vsh.yaml")
    with pytest.raises(ImageError, match="apt packages or docker lines cannot be reproduced in a virtual environment"):
        component_env(config, cache_dir=tmp_path / "envs")
    public = read_config(component_writer(tiny_base, "t", "method", "public", "engines:\n  - {type: docker, image: 'python:3.11'}\n")
                         / "config.vsh.yaml")
    with pytest.raises(ImageError, match="not a base image of docker/; no environment reproduces it"):
        component_env(public, cache_dir=tmp_path / "envs")
