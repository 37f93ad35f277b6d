"""``openpert data list|fetch|verify`` on the fixture project, with a mirror on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml
from tooling.data_mirror import DataMirrorServer

from openpert.cli import main

COMMIT = "2" * 40
FILES = {"labels/open.csv": b"a,b\n1,2\n", "labels/restricted.csv": b"x\n" * 1000}


@pytest.fixture
def data_cli(project_copy, tmp_path, monkeypatch):
    """The fixture project with a manifest of two files (one non-commercial), a mirror, an empty store."""
    entries = [{"path": p, "url": f"https://raw.githubusercontent.com/o/r/{COMMIT}/{p}", "citation": "x",
                "sha256": hashlib.sha256(d).hexdigest(), "size": len(d),
                "license": "CC BY-NC 4.0" if "restricted" in p else "MIT", "non_commercial": "restricted" in p}
               for p, d in FILES.items()]
    (project_copy / "src/tiny/api/data_manifest.yaml").write_text(yaml.safe_dump({"files": entries}))
    for path, data in FILES.items():
        (tmp_path / "mirror" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "mirror" / path).write_bytes(data)
    monkeypatch.chdir(project_copy)
    monkeypatch.setenv("OPENPERT_DATA", str(tmp_path / "store"))
    monkeypatch.delenv("OPENPERT_DATA_MIRROR", raising=False)
    monkeypatch.delenv("OPENPERT_SHARED_DATA", raising=False)
    with DataMirrorServer(tmp_path / "mirror") as server:
        yield tmp_path / "store", server


def test_list_says_sizes_licences_and_what_the_store_lacks(data_cli, capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert "labels/restricted.csv" in out and "[non-commercial]" in out and "missing" in out
    assert "NON-COMMERCIAL" in out and "2 file(s)" in out
    assert main(["data", "list", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["files"]
    assert {r["path"]: (r["in_store"], r["size"]) for r in rows} == {p: ("missing", len(d)) for p, d in FILES.items()}


def test_fetch_then_verify_then_a_corrupt_file_fails_verify(data_cli, capsys):
    store, server = data_cli
    assert main(["data", "fetch", "--mirror", server.base_url]) == 0
    captured = capsys.readouterr()
    assert "2 to fetch" in captured.err and "NON-COMMERCIAL" in captured.err, "sizes and licences come first"
    assert "2 downloaded" in captured.out
    assert main(["data", "verify"]) == 0
    target = store / "labels/open.csv"
    target.chmod(0o644)
    target.write_bytes(b"a,b\n9,9\n")
    assert main(["data", "verify"]) == 1
    assert "corrupt  labels/open.csv" in capsys.readouterr().out


def test_offline_fetch_names_what_is_missing_with_exit_2(data_cli, capsys):
    assert main(["data", "fetch", "--offline"]) == 2
    err = capsys.readouterr().err
    assert "openpert: error: 2 of 2 file(s) could not be had" in err and "labels/open.csv" in err
