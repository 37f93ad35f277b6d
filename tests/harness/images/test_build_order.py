"""The build order of the project's images: openpert.images.build_order."""

from __future__ import annotations

import json

from project_paths import ROOT

from openpert.images.build_order import build_order, format_build_order
from openpert.images.dockerfiles import DOCKERIGNORE

CORE = "engines:\n  - {type: docker, registry: registry.example, organization: demo-org, image: core, tag: 1.2.3}\n  - {type: native}\n"


def _demo_components(root, component_writer):
    component_writer(root, "t", "method", "on_ml", CORE.replace("image: core", "image: ml"))
    component_writer(root, "t", "method", "on_core", CORE)
    component_writer(root, "t", "metric", "public", "engines:\n  - {type: docker, image: 'python:3.11'}\n")


def test_base_images_come_first_parents_before_children_then_components_by_base(demo_project, component_writer, tmp_path):
    _demo_components(demo_project, component_writer)
    steps = build_order(demo_project, tag="1.2.3-abc", out_dir=tmp_path / "out")
    assert [(s.kind, str(s.image)) for s in steps] == [
        ("base", "registry.example/demo-org/core:1.2.3-abc"),
        ("base", "registry.example/demo-org/ml:1.2.3-abc"),
        ("component", "registry.example/demo-org/demo/t/metrics/public:1.2.3-abc"),
        ("component", "registry.example/demo-org/demo/t/methods/on_core:1.2.3-abc"),
        ("component", "registry.example/demo-org/demo/t/methods/on_ml:1.2.3-abc"),
    ]
    assert [s.builds_on for s in steps] == [
        "python:3.11.9-slim-bookworm",
        "registry.example/demo-org/core:1.2.3-abc",
        "python:3.11",
        "registry.example/demo-org/core:1.2.3-abc",
        "registry.example/demo-org/ml:1.2.3-abc",
    ], "every image of a build starts from the base images of the same build"
    assert all(s.context == demo_project.resolve() for s in steps)


def test_the_dockerfiles_of_a_build_are_written_with_their_ignore_files(demo_project, component_writer, tmp_path):
    _demo_components(demo_project, component_writer)
    steps = build_order(demo_project, tag="1.2.3-abc", out_dir=tmp_path / "out")
    by_image = {str(s.image).rsplit("/", 1)[-1]: s for s in steps}
    assert by_image["ml:1.2.3-abc"].dockerfile == tmp_path / "out" / "base" / "ml" / "Dockerfile"
    assert by_image["ml:1.2.3-abc"].dockerfile.read_text().startswith("FROM registry.example/demo-org/core:1.2.3-abc\n")
    on_ml = by_image["on_ml:1.2.3-abc"]
    assert on_ml.dockerfile == tmp_path / "out" / "t" / "methods" / "on_ml" / "Dockerfile"
    assert "FROM registry.example/demo-org/ml:1.2.3-abc\n" in on_ml.dockerfile.read_text()
    for step in steps:
        assert step.dockerfile.with_name("Dockerfile.dockerignore").read_text() == DOCKERIGNORE


def test_only_the_components_asked_for_are_listed_after_all_base_images(demo_project, component_writer, tmp_path):
    _demo_components(demo_project, component_writer)
    steps = build_order(demo_project, tag="x", out_dir=tmp_path / "out", paths=["src/t/methods/on_ml"])
    assert [str(s.image).rsplit("/", 1)[-1] for s in steps] == ["core:x", "ml:x", "on_ml:x"]


def test_the_build_order_as_tsv_json_and_text(demo_project, component_writer, tmp_path):
    _demo_components(demo_project, component_writer)
    steps = build_order(demo_project, tag="x", out_dir=tmp_path / "out")
    tsv = format_build_order(steps, "tsv").splitlines()
    assert len(tsv) == len(steps)
    image, dockerfile, context = tsv[0].split("\t")
    assert (image, dockerfile, context) == ("registry.example/demo-org/core:x", str(tmp_path / "out/base/core/Dockerfile"),
                                            str(demo_project.resolve()))
    data = json.loads(format_build_order(steps, "json"))
    assert [d["kind"] for d in data] == ["base", "base", "component", "component", "component"]
    assert data[-1]["source"] == str(demo_project.resolve() / "src/t/methods/on_ml/config.vsh.yaml")
    text = format_build_order(steps, "text", demo_project)
    assert "  1. base      registry.example/demo-org/core:x\n" in text
    assert "from registry.example/demo-org/ml:x; " in text and "(from src/t/methods/on_ml/config.vsh.yaml)" in text
    assert text.endswith("5 images: 2 base, 3 components\n")


def test_the_repository_builds_its_four_base_images_then_every_component(tmp_path):
    steps = build_order(ROOT, tag="0.0.0-test", out_dir=tmp_path)
    assert [str(s.image) for s in steps[:4]] == [f"ghcr.io/openpert/{b}:0.0.0-test" for b in ("core", "llm", "ml", "text")]
    components = steps[4:]
    assert components and all(s.kind == "component" for s in components)
    assert len(components) == len({s.image for s in components}), "one image per component"
