"""Configs checked against Viash's published JSON schema, with errors naming file and line; the
schemas fetched into the data store on first use where missing (from a mirror on 127.0.0.1 here),
or one message saying how to fetch them."""

from __future__ import annotations

import hashlib
import shutil
import socket
from pathlib import Path

import pytest
from project_paths import ROOT
from tooling.data_mirror import DataMirrorServer

from openpert.config import viash_schema
from openpert.config.lint import lint_paths
from openpert.config.project import shared_data_dir
from openpert.config.viash import ConfigError, read_config
from openpert.config.viash_schema import (
    SCHEMA_FILES,
    SCHEMA_STORE_FOLDER,
    VIASH_SCHEMA_VERSION,
    ensure_schemas,
    namespace_collisions,
    schema_dir,
    validate_component,
    validate_project_file,
)
from openpert.data import fetching
from openpert.data.manifest import project_manifest

#: The schemas the tests compare with (the repository's, as conftest.py set them), read before any test changes the environment.
REFERENCE = schema_dir(ROOT)
#: The shared folder beside the repository (``../shared``: ``data/`` and ``viash_schemas/``).
SHARED = shared_data_dir(ROOT).parent
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


@pytest.fixture
def schema_server(tmp_path):
    """A mirror on 127.0.0.1 holding the schemas at their store paths: (folder, server)."""
    served = tmp_path / "served"
    (served / SCHEMA_STORE_FOLDER).mkdir(parents=True)
    for name in SCHEMA_FILES:
        shutil.copyfile(REFERENCE / name, served / SCHEMA_STORE_FOLDER / name)
    with DataMirrorServer(served) as server:
        yield served, server


@pytest.fixture
def fresh_fork(project, tmp_path, monkeypatch) -> Path:
    """``project`` as a fresh fork sees it: its manifests, no schemas set, no ../shared, an empty store."""
    (project / "common" / "api").mkdir(parents=True)
    shutil.copyfile(ROOT / "common" / "api" / "data_manifest.yaml", project / "common" / "api" / "data_manifest.yaml")
    monkeypatch.delenv("OPENPERT_VIASH_SCHEMAS")
    monkeypatch.setenv("OPENPERT_DATA", str(tmp_path / "store"))
    monkeypatch.setenv("OPENPERT_SHARED_DATA", str(tmp_path / "no-shared" / "data"))
    monkeypatch.setattr(viash_schema, "_failed_fetches", {})
    return project


def test_missing_schemas_are_fetched_into_the_store_on_first_use_and_checked(fresh_fork, schema_server, tmp_path,
                                                                              monkeypatch):
    _, server = schema_server
    monkeypatch.setenv("OPENPERT_DATA_MIRROR", server.base_url)
    stored = tmp_path / "store" / SCHEMA_STORE_FOLDER
    assert schema_dir(fresh_fork) == stored and not stored.exists()
    path = _config(fresh_fork, "m", "funtionality: typo\n")
    (problem,) = validate_component(read_config(path))
    assert "'funtionality'" in problem
    for name in SCHEMA_FILES:
        assert (stored / name).read_bytes() == (REFERENCE / name).read_bytes()
    assert sum(server.requests.values()) == 2
    validate_component(read_config(_config(fresh_fork, "n", "")))
    assert sum(server.requests.values()) == 2, "schemas in the store are not fetched again"


def test_a_fetch_with_another_checksum_is_refused(fresh_fork, schema_server, tmp_path, monkeypatch):
    served, server = schema_server
    monkeypatch.setenv("OPENPERT_DATA_MIRROR", server.base_url)
    (served / SCHEMA_STORE_FOLDER / "package.schema.json").write_text("{}")
    with pytest.raises(ConfigError, match="package.schema.json: wrong checksum from .* expected 9d523bec"):
        ensure_schemas(fresh_fork)
    assert not (tmp_path / "store" / SCHEMA_STORE_FOLDER / "package.schema.json").exists()


def test_unreachable_schemas_give_one_problem_with_the_command_that_fetches_them(fresh_fork, monkeypatch):
    with socket.socket() as sock:  # a port nothing listens on once the socket is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("OPENPERT_DATA_MIRROR", f"http://127.0.0.1:{port}")
    attempts = []
    real_fetch = fetching.fetch
    monkeypatch.setattr(fetching, "fetch", lambda files, *a, **k: attempts.append(files) or real_fetch(files, *a, **k))
    _config(fresh_fork, "m", "")
    _config(fresh_fork, "n", "")
    problems = [p for p in lint_paths([fresh_fork / "src"]) if "JSON schemas not in the data store" in p]
    folder = schema_dir(fresh_fork)
    assert len(problems) == 1 and len(attempts) == 1, "one fetch and one message, not one per config"
    assert problems[0].startswith(f"{folder}: Viash {VIASH_SCHEMA_VERSION} JSON schemas not in the data store, and fetching them failed")
    assert "`openpert data fetch --project`" in problems[0] and "OPENPERT_VIASH_SCHEMAS" in problems[0]
    with pytest.raises(ConfigError, match="openpert data fetch --project"):
        ensure_schemas(fresh_fork)


def test_the_project_manifest_pins_the_schemas_the_harness_reads():
    files = {Path(f.path).name: f for f in project_manifest(ROOT)}
    assert sorted(files) == sorted(SCHEMA_FILES)
    for name, f in files.items():
        data = (REFERENCE / name).read_bytes()
        assert f.path == f"{SCHEMA_STORE_FOLDER}/{name}" and (hashlib.sha256(data).hexdigest(), len(data)) == (f.sha256, f.size)


@pytest.mark.skipif(not (SHARED / SCHEMA_STORE_FOLDER).is_dir(),
                    reason=f"no {SCHEMA_STORE_FOLDER} in {SHARED}")
def test_the_shared_folder_serves_the_schemas_at_their_store_paths(fresh_fork, monkeypatch):
    with DataMirrorServer(SHARED) as server:
        monkeypatch.setenv("OPENPERT_DATA_MIRROR", server.base_url)
        folder = ensure_schemas(fresh_fork)
        assert sorted(server.requests) == sorted(f"{SCHEMA_STORE_FOLDER}/{n}" for n in SCHEMA_FILES)
    assert validate_project_file(fresh_fork) == []
    assert all((folder / n).is_file() for n in SCHEMA_FILES)
