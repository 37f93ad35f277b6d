"""Image names and tags: openpert.images.naming."""

from __future__ import annotations

import subprocess

import pytest
from project_paths import FIXTURES, ROOT

from openpert.config.viash import read_config
from openpert.images import ImageError
from openpert.images.naming import ImageName, base_image_name, commit_tag, component_image_name, project_naming


def test_image_name_joins_the_parts_that_are_set():
    assert str(ImageName("core", "1.0", "ghcr.io", "openpert")) == "ghcr.io/openpert/core:1.0"
    assert str(ImageName("core", "1.0")) == "core:1.0"
    assert ImageName("core", "1.0", "ghcr.io").repository == "ghcr.io/core"
    assert str(ImageName("core", "1.0", "ghcr.io", "openpert").with_tag("1.0-abc")) == "ghcr.io/openpert/core:1.0-abc"


def test_the_repository_prefix_and_tag_come_from_viash_yaml():
    naming = project_naming(ROOT)
    assert (naming.registry, naming.organization, naming.prefix) == ("ghcr.io", "openpert", "ghcr.io/openpert")
    assert str(base_image_name(ROOT, "core")) == f"ghcr.io/openpert/core:{naming.version}"
    assert str(base_image_name(ROOT, "ml", "0.1.0-abc1234")) == "ghcr.io/openpert/ml:0.1.0-abc1234"


def test_a_project_without_registry_or_organization_names_images_bare():
    naming = project_naming(FIXTURES / "project")
    assert naming.prefix == ""
    assert str(base_image_name(FIXTURES / "project", "core")) == "core:0.0.1"


def test_component_images_are_named_as_viash_names_them():
    config = read_config(ROOT / "src/perturbqa/methods/gat/config.vsh.yaml")
    version = project_naming(ROOT).version
    assert str(component_image_name(config)) == f"ghcr.io/openpert/openpert/perturbqa/methods/gat:{version}"
    assert str(component_image_name(config, "x")).endswith("/perturbqa/methods/gat:x")


def test_a_version_that_is_not_a_docker_tag_is_an_error_naming_the_file(tmp_path):
    (tmp_path / "_viash.yaml").write_text("name: demo\nversion: 1.0 beta\n")
    with pytest.raises(ImageError, match=r"_viash.yaml: version: '1.0 beta' is not a valid Docker tag"):
        project_naming(tmp_path)
    (tmp_path / "_viash.yaml").write_text("name: demo\n")
    with pytest.raises(ImageError, match=r"_viash.yaml: version: needed"):
        project_naming(tmp_path)


def _git(root, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=root, check=True,
                   capture_output=True)


def test_a_build_tag_names_the_commit_and_says_when_the_tree_is_dirty(tmp_path):
    (tmp_path / "_viash.yaml").write_text("name: demo\nversion: 2.0.0\n")
    (tmp_path / ".gitignore").write_text("ignored/\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "start")
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert commit_tag(tmp_path) == f"2.0.0-{sha}"
    (tmp_path / "ignored").mkdir()
    (tmp_path / "ignored" / "cache").write_text("x")
    assert commit_tag(tmp_path) == f"2.0.0-{sha}", "ignored files do not make a tree dirty"
    (tmp_path / "new_component.py").write_text("x")
    assert commit_tag(tmp_path) == f"2.0.0-{sha}-dirty", "an untracked file would be built into the image"
    (tmp_path / "new_component.py").unlink()
    (tmp_path / "_viash.yaml").write_text("name: demo\nversion: 2.0.0\n# changed\n")
    assert commit_tag(tmp_path) == f"2.0.0-{sha}-dirty"


def test_a_build_tag_outside_a_git_checkout_is_an_error(tmp_path):
    (tmp_path / "_viash.yaml").write_text("name: demo\nversion: 2.0.0\n")
    with pytest.raises(ImageError, match="a build tag needs a git checkout"):
        commit_tag(tmp_path)
