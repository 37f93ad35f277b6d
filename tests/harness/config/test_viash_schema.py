"""Configs checked against Viash's published JSON schema, with errors naming file and line; the
schemas downloaded on first use where missing, or one message saying how to fetch them."""

from __future__ import annotations

import functools
import http.server
import re
import socket
import threading
from pathlib import Path

import pytest
from project_paths import ROOT

from openpert.config import viash_schema
from openpert.config.lint import lint_paths
from openpert.config.viash import ConfigError, read_config
from openpert.config.viash_schema import (
    SCHEMA_SHA256,
    SCHEMA_SOURCE,
    VIASH_SCHEMA_VERSION,
    ensure_schemas,
    namespace_collisions,
    schema_dir,
    validate_component,
    validate_project_file,
)

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
    """A server on 127.0.0.1 holding ``<version>/*.schema.json`` as Viash's schema repository does."""
    served = tmp_path / "served"
    (served / VIASH_SCHEMA_VERSION).mkdir(parents=True)
    for name in SCHEMA_SHA256:
        (served / VIASH_SCHEMA_VERSION / name).write_bytes((schema_dir(ROOT) / name).read_bytes())
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield served, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def fresh_fork(project, tmp_path, monkeypatch) -> Path:
    """``project`` as a fresh fork sees it: no schemas set, none beside it, an empty user cache."""
    monkeypatch.delenv("OPENPERT_VIASH_SCHEMAS")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(viash_schema, "_failed_downloads", {})
    return project


def test_missing_schemas_are_downloaded_on_first_use_and_checked(fresh_fork, schema_server, tmp_path, monkeypatch):
    _, url = schema_server
    monkeypatch.setenv("VIASH_SCHEMAS_URL", url)
    cached = tmp_path / "cache" / "openpert" / "viash_schemas" / VIASH_SCHEMA_VERSION
    assert schema_dir(fresh_fork) == cached and not cached.exists()
    path = _config(fresh_fork, "m", "funtionality: typo\n")
    (problem,) = validate_component(read_config(path))
    assert "'funtionality'" in problem
    for name in SCHEMA_SHA256:
        assert (cached / name).read_bytes() == (schema_dir(ROOT) / name).read_bytes()


def test_a_download_with_another_checksum_is_refused(fresh_fork, schema_server, monkeypatch):
    served, url = schema_server
    monkeypatch.setenv("VIASH_SCHEMAS_URL", url)
    (served / VIASH_SCHEMA_VERSION / "package.schema.json").write_text("{}")
    with pytest.raises(ConfigError, match="package.schema.json: has sha256 [0-9a-f]{64}, expected"):
        viash_schema.fetch_schemas(schema_dir(fresh_fork))
    assert not (schema_dir(fresh_fork) / "package.schema.json").exists()


def test_unreachable_schemas_give_one_problem_with_the_command_that_fetches_them(fresh_fork, monkeypatch):
    with socket.socket() as sock:  # a port nothing listens on once the socket is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("VIASH_SCHEMAS_URL", f"http://127.0.0.1:{port}")
    attempts = []
    real_fetch = viash_schema.fetch_schemas
    monkeypatch.setattr(viash_schema, "fetch_schemas", lambda folder: attempts.append(folder) or real_fetch(folder))
    _config(fresh_fork, "m", "")
    _config(fresh_fork, "n", "")
    problems = [p for p in lint_paths([fresh_fork / "src"]) if "JSON schemas not found" in p]
    folder = schema_dir(fresh_fork)
    assert len(problems) == 1 and len(attempts) == 1, "one download attempt and one message, not one per config"
    assert problems[0].startswith(f"{folder}: Viash {VIASH_SCHEMA_VERSION} JSON schemas not found, and downloading them failed")
    assert f"`bash scripts/fetch_viash_schemas.sh {folder.parent}`" in problems[0] and "OPENPERT_VIASH_SCHEMAS" in problems[0]
    with pytest.raises(ConfigError, match="fetch_viash_schemas.sh"):
        ensure_schemas(fresh_fork)


def test_the_fetch_script_pins_the_same_schemas_as_the_harness():
    script = (ROOT / "scripts" / "fetch_viash_schemas.sh").read_text()
    assert re.search(r"^version=(\S+)$", script, re.M).group(1) == VIASH_SCHEMA_VERSION
    assert dict(re.findall(r"\[(\S+\.schema\.json)\]=([0-9a-f]{64})", script)) == SCHEMA_SHA256
    assert f"${{VIASH_SCHEMAS_URL:-{SCHEMA_SOURCE}}}" in script
