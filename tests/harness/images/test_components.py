"""What a component's docker engine declares: openpert.images.components, and the repository's components."""

from __future__ import annotations

import re

import pytest
from project_paths import FIXTURES, ROOT

from openpert.config.viash import read_config
from openpert.images import ImageError
from openpert.images.components import (
    component_configs,
    declaration_problems,
    docker_engine,
    engine_image,
    image_declaration,
)
from openpert.images.naming import project_naming

CORE = "engines:\n  - {type: docker, registry: registry.example, organization: demo-org, image: core, tag: 1.2.3}\n  - {type: native}\n"


def test_the_start_image_is_read_as_viash_reads_it():
    assert str(engine_image({"image": "core", "tag": "1.0", "registry": "ghcr.io", "organization": "openpert"})) == \
        "ghcr.io/openpert/core:1.0"
    assert str(engine_image({"image": "python:3.11"})) == "python:3.11"
    assert str(engine_image({"image": "openpert/core:1.0", "registry": "ghcr.io"})) == "ghcr.io/openpert/core:1.0"
    assert str(engine_image({"image": "localhost:5000/core"})) == "localhost:5000/core:latest"


def test_a_component_naming_a_base_image_runs_in_it(demo_project, component_writer):
    folder = component_writer(demo_project, "t", "method", "m", CORE.replace("image: core", "image: ml"))
    config = read_config(folder / "config.vsh.yaml")
    declaration = image_declaration(config)
    assert declaration.base.name == "ml" and not declaration.setup
    assert declaration_problems(config) == []


def test_the_setup_a_component_adds_is_read_in_order(demo_project, component_writer):
    engine = CORE.replace("tag: 1.2.3}", "tag: 1.2.3, setup: [{type: python, packages: [six==1.17.0]}, "
                                         "{type: apt, packages: curl}, {type: python, pip: [attrs==26.1.0]}, "
                                         "{type: docker, run: echo hi}]}")
    config = read_config(component_writer(demo_project, "t", "method", "m", engine) / "config.vsh.yaml")
    declaration = image_declaration(config)
    assert declaration.python_packages == ["six==1.17.0", "attrs==26.1.0"]
    assert declaration.apt_packages == ["curl"]
    assert declaration.docker_lines == [{"type": "docker", "run": "echo hi"}]
    assert declaration.setup


@pytest.mark.parametrize(("engine", "message"), [
    ("engines:\n  - {type: docker, image: 'python:3.11'}\n", r"image python:3.11 is not a base image of docker/; name one of: core, ml"),
    (CORE.replace("1.2.3", "1.0.0"), r"tag '1.0.0': base images are tagged with the project version '1.2.3'"),
    (CORE.replace("}", ", setup: [{type: python, packages: [six]}]}", 1), r"python package 'six': pin it with =="),
    (CORE.replace("}", ", setup: [{type: python, packages: ['six>=1']}]}", 1), r"python package 'six>=1': pin it with =="),
    (CORE.replace("}", ", setup: [{type: python, packages: ['openpert @ git+https://github.com/openpert/openpert']}]}", 1),
     r"'openpert @ git\+https://github.com/openpert/openpert': install a pinned release from PyPI"),
    (CORE.replace("}", ", setup: [{type: python, github: [owner/repo]}]}", 1), r"python github: 'owner/repo': install a pinned"),
    (CORE.replace("}", ", setup: [{type: python, packages: [Packaging==26.3]}]}", 1),
     r"'Packaging==26.3' is already in image core \(packaging==26.3 at docker/core/requirements.txt:2\); drop it"),
    (CORE.replace("}", ", setup: [{type: r, cran: [dplyr]}]}", 1), r"setup type 'r' is not supported"),
    ("engines:\n  - {type: native}\n", r"engines: no docker engine"),
])
def test_what_keeps_a_declaration_from_being_reproducible_is_reported(demo_project, component_writer, engine, message):
    config = read_config(component_writer(demo_project, "t", "method", "m", engine) / "config.vsh.yaml")
    problems = declaration_problems(config)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{config.path}: engines")
    assert re.search(message, problems[0]), problems[0]


def test_a_component_in_a_public_image_has_no_base(demo_project, component_writer):
    config = read_config(component_writer(demo_project, "t", "method", "m", "engines:\n  - {type: docker, image: 'python:3.11'}\n")
                         / "config.vsh.yaml")
    assert image_declaration(config).base is None
    with pytest.raises(ImageError, match="no docker engine"):
        docker_engine(read_config(component_writer(demo_project, "t", "method", "n", "engines: []\n") / "config.vsh.yaml"))


def test_components_are_found_below_the_paths_given(demo_project, component_writer):
    component_writer(demo_project, "t", "method", "a", CORE)
    component_writer(demo_project, "t", "metric", "b", CORE)
    assert [c.name for c in component_configs(demo_project)] == ["a", "b"]
    assert [c.name for c in component_configs(demo_project, ["src/t/metrics"])] == ["b"]
    assert [c.name for c in component_configs(demo_project, ["src/t/methods/a/config.vsh.yaml", "src/t/methods/a"])] == ["a"]
    with pytest.raises(ImageError, match="no such component folder"):
        component_configs(demo_project, ["src/nope"])
    with pytest.raises(ImageError, match="no component"):
        component_configs(demo_project, ["docker"])


# --- the repository's components ---------------------------------------------------------------------
_COMPONENTS = sorted(p for p in (ROOT / "src").rglob("config.vsh.yaml") if "api" not in p.relative_to(ROOT / "src").parts)


@pytest.mark.parametrize("path", _COMPONENTS, ids=lambda p: str(p.parent.relative_to(ROOT / "src")))
def test_every_component_names_a_base_image_and_adds_only_pinned_packages(path):
    config = read_config(path)
    assert declaration_problems(config) == []
    assert image_declaration(config).engine.get("tag") == project_naming(ROOT).version
    assert any(e.get("type") == "native" for e in config.engines), "the native engine is kept"


def test_the_fixture_project_components_name_its_core_image():
    for config in component_configs(FIXTURES / "project"):
        declaration = image_declaration(config)
        assert str(declaration.image) == "core:0.0.1", config.path
        assert not declaration.setup


def test_a_new_component_gets_the_core_image_of_the_project(demo_project):
    from openpert.images.components import engine_block

    assert engine_block(demo_project) == {"type": "docker", "registry": "registry.example", "organization": "demo-org",
                                          "image": "core", "tag": "1.2.3"}
    with pytest.raises(ImageError, match="no base image 'gpu'"):
        engine_block(demo_project, "gpu")


def test_the_files_an_image_is_built_from_follow_the_from_chain():
    from openpert.images.components import image_files

    config = read_config(ROOT / "src/perturbqa/methods/gat/config.vsh.yaml")
    names = [str(p.relative_to(ROOT)) for p in image_files(config)]
    assert names == ["docker/core/Dockerfile", "docker/core/requirements.txt", "docker/core/Dockerfile.dockerignore",
                     "docker/ml/Dockerfile", "docker/ml/requirements.txt", "docker/ml/Dockerfile.dockerignore",
                     "docker/test_requirements.txt"]


def test_an_import_neither_the_image_nor_the_setup_provides_names_the_module_and_the_line_to_add(
        demo_project, component_writer, base_writer):
    import importlib.metadata

    version = importlib.metadata.version("numpy")
    script = "import os\nimport numpy as np\nfrom packaging import version\n"
    config = read_config(component_writer(demo_project, "t", "method", "m", CORE, script=script) / "config.vsh.yaml")
    (problem,) = declaration_problems(config)
    assert problem == (f"{config.path.parent / 'script.py'}:2: imports numpy (distribution numpy), which image core does not "
                       f"hold and its setup does not add: add `setup: [{{type: python, packages: [numpy=={version}]}}]` "
                       f"to the docker engine of {config.path}")
    # declared in the setup, the import is provided
    added = CORE.replace("tag: 1.2.3}", f"tag: 1.2.3, setup: [{{type: python, packages: [numpy=={version}]}}]}}")
    config = read_config(component_writer(demo_project, "t", "method", "n", added, script=script) / "config.vsh.yaml")
    assert declaration_problems(config) == []
    # a base image that holds it is named first
    base_writer(demo_project, "ml", "registry.example/demo-org/core:1.2.3", ["six==1.17.0", f"numpy=={version}"])
    config = read_config(component_writer(demo_project, "t", "method", "o", CORE, script=script) / "config.vsh.yaml")
    (problem,) = declaration_problems(config)
    assert "imports numpy (distribution numpy)" in problem and "use `image: ml`, which holds it" in problem
    ml = CORE.replace("image: core", "image: ml")
    config = read_config(component_writer(demo_project, "t", "method", "p", ml, script=script) / "config.vsh.yaml")
    assert declaration_problems(config) == []
