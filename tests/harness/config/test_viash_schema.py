"""Configs checked against Viash's published JSON schema, with errors naming file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_paths import ROOT

from openpert.config.viash import read_config
from openpert.config.viash_schema import namespace_collisions, schema_dir, validate_component, validate_project_file

pytestmark = pytest.mark.skipif(not (schema_dir(ROOT) / "config.schema.json").is_file(),
                                reason=f"Viash schemas not found at {schema_dir(ROOT)}")


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("OPENPERT_VIASH_SCHEMAS", str(schema_dir(ROOT).parent))
    (tmp_path / "_viash.yaml").write_text("name: p\nviash_version: 0.9.4\norganization: o\n")
    (tmp_path / "src/t/api").mkdir(parents=True)
    (tmp_path / "src/t/api/comp_method.yaml").write_text("namespace: t/methods\ninfo: {type: method}\n")
    return tmp_path


def _config(project: Path, name: str, body: str) -> Path:
    path = project / "src/t/methods" / name / "config.vsh.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / "script.py").write_text("## VIASH START\n## VIASH END\n")
    path.write_text(f"__merge__: ../../api/comp_method.yaml\nname: {name}\nresources:\n  - {{type: python_script, path: script.py}}\n{body}")
    return path


def test_a_valid_config_has_no_problem(project):
    path = _config(project, "m", "arguments:\n  - {name: --k, type: integer, default: 3, description: \"A, quoted.\"}\n")
    assert validate_component(read_config(path)) == []


def test_an_unquoted_comma_in_a_flow_mapping_is_an_unknown_key_with_its_line(project):
    path = _config(project, "m", "arguments:\n  - {name: --k, type: integer, default: 3, description: Seed of this, that.}\n")
    (problem,) = validate_component(read_config(path))
    assert problem.startswith(f"{path}:6: arguments/0: unknown key(s) 'that.'")


def test_an_unknown_top_level_key_is_refused(project):
    path = _config(project, "m", "funtionality: typo\n")
    (problem,) = validate_component(read_config(path))
    assert f"{path}:5:" in problem and "'funtionality'" in problem


def test_the_project_file_is_checked(project):
    assert validate_project_file(project) == []
    (project / "_viash.yaml").write_text("name: p\nviash_version: 0.9.4\ntarget_dir: x\n")
    (problem,) = validate_project_file(project)
    assert problem.startswith(f"{project / '_viash.yaml'}:3:") and "'target_dir'" in problem


def test_namespace_name_pairs_must_be_unique(project):
    one, two = _config(project, "m", ""), _config(project, "n", "")
    assert namespace_collisions([read_config(one), read_config(two)]) == []
    clash = namespace_collisions([read_config(one), read_config(one)])
    assert len(clash) == 1 and "namespace/name t/methods/m" in clash[0]
