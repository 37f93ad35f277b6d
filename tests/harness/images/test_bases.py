"""Base images: openpert.images.bases."""

from __future__ import annotations

import pytest
from project_paths import ROOT

from openpert.images import ImageError
from openpert.images.bases import base_chain, base_image, base_images, python_version


def test_base_images_are_found_with_their_parents_before_them(demo_project, base_writer):
    base_writer(demo_project, "aaa", "registry.example/demo-org/ml:1.2.3", ["numpy==2.4.6"])
    bases = base_images(demo_project)
    assert list(bases) == ["core", "ml", "aaa"], "a parent comes before its children, whatever the names"
    assert bases["core"].parent is None and bases["core"].from_image == "python:3.11.9-slim-bookworm"
    assert bases["ml"].parent == "core" and bases["aaa"].parent == "ml"
    assert [b.name for b in base_chain(demo_project, "aaa")] == ["core", "ml", "aaa"]


def test_the_repository_chain_is_core_ml_text_on_python_3_11():
    assert [b.name for b in base_chain(ROOT, "text")] == ["core", "ml", "text"]
    assert python_version(ROOT, "text") == (3, 11)
    assert base_images(ROOT)["core"].from_image.startswith("python:3.11."), "pinned by version tag"


def test_a_project_without_docker_folder_has_no_base_images(tmp_path):
    assert base_images(tmp_path) == {}


def test_an_unknown_base_image_is_an_error_listing_the_known_ones(demo_project):
    with pytest.raises(ImageError, match=r"no base image 'gpu' \(known: core, ml\)"):
        base_image(demo_project, "gpu")


def test_a_base_without_requirement_file_is_an_error(demo_project):
    (demo_project / "docker" / "ml" / "requirements.txt").unlink()
    with pytest.raises(ImageError, match=r"docker/ml: a base image needs a pinned requirements.txt"):
        base_images(demo_project)


@pytest.mark.parametrize(("dockerfile", "message"), [
    ("FROM python:3.11 AS a\nFROM python:3.11\n", "exactly one FROM line"),
    ("ARG BASE=python:3.11\nFROM ${BASE}\n", "name the image literally"),
    ("FROM registry.example/demo-org/gpu:1.2.3\n", "names a project image, but docker/ has no base image 'gpu'"),
])
def test_a_from_line_the_chain_cannot_follow_is_an_error_naming_the_dockerfile(demo_project, dockerfile, message):
    (demo_project / "docker" / "ml" / "Dockerfile").write_text(dockerfile)
    with pytest.raises(ImageError, match=rf"docker/ml/Dockerfile: .*{message}"):
        base_images(demo_project)


def test_a_from_chain_that_loops_is_an_error(demo_project):
    (demo_project / "docker" / "core" / "Dockerfile").write_text("FROM registry.example/demo-org/ml:1.2.3\n")
    with pytest.raises(ImageError, match="FROM chain loops"):
        base_images(demo_project)


def test_the_python_version_comes_from_the_first_image_of_the_chain(demo_project):
    assert python_version(demo_project, "ml") == (3, 11)
    (demo_project / "docker" / "core" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    with pytest.raises(ImageError, match=r"docker/core/Dockerfile: FROM debian:bookworm-slim: .*official python"):
        python_version(demo_project, "ml")
    # Another public image may start a chain when its Dockerfile states the image's Python.
    (demo_project / "docker" / "core" / "Dockerfile").write_text('FROM debian:bookworm-slim\nLABEL org.openpert.python="3.12"\n')
    assert python_version(demo_project, "ml") == (3, 12)


def test_the_llm_image_starts_from_vllms_image_at_the_version_the_llm_extra_pins():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (vllm,) = [r for r in extras["llm"] if r.startswith("vllm")]
    version = vllm.removeprefix("vllm==")
    llm = base_images(ROOT)["llm"]
    assert llm.parent is None and llm.from_image == f"vllm/vllm-openai:v{version}"
    assert python_version(ROOT, "llm") == (3, 12)
    # vLLM is built on one torch: the llm extra must pin the one the other extras pin.
    torch = {r for extra in ("ml", "text", "llm") for r in extras[extra] if r.startswith("torch")}
    assert len(torch) == 1, torch
