"""Filling the data store over HTTP from a mirror on 127.0.0.1 (openpert.data.fetching, .transfer, .store)."""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

import pytest
import yaml
from tooling.data_mirror import DataMirrorServer

from openpert.config.project import shared_data_dir
from openpert.config.task import discover_tasks
from openpert.data.fetching import FetchError, Sources, dataset_views, fetch, verify
from openpert.data.manifest import merge_manifests, read_manifest, task_manifest
from openpert.data.store import DataStore

ROOT = Path(__file__).resolve().parents[3]
COMMIT = "0" * 40


def _entry(path: str, data: bytes, **extra) -> dict:
    return {"path": path, "url": f"https://raw.githubusercontent.com/o/r/{COMMIT}/{path}",
            "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "license": "MIT", "citation": "x", **extra}


@pytest.fixture
def mirror_files(tmp_path) -> dict[str, bytes]:
    """Three files in a mirror folder: two small, one of 3 MB (several chunks)."""
    files = {"kg/a.tsv": b"a\tb\n" * 100, "labels/b.csv": b"x,y\n1,2\n",
             "cells/big.bin": os.urandom(3_000_000)}
    for path, data in files.items():
        (tmp_path / "mirror" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "mirror" / path).write_bytes(data)
    return files


@pytest.fixture
def manifest(tmp_path, mirror_files):
    path = tmp_path / "task" / "api" / "data_manifest.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump({"files": [_entry(p, d) for p, d in mirror_files.items()]}))
    return read_manifest(path)


@pytest.fixture
def server(tmp_path, mirror_files):
    with DataMirrorServer(tmp_path / "mirror") as srv:
        yield srv


def _store_files(store: DataStore) -> set[str]:
    return {str(p.relative_to(store.root)) for p in store.root.rglob("*") if p.is_file() and ".openpert" not in p.parts}


def _left_in_store(store: DataStore) -> set[str]:
    """Every file of the store but its records: the files and any partial download."""
    return {str(p.relative_to(store.root)) for p in store.root.rglob("*")
            if p.is_file() and p.name not in ("observed.json", "verified.json") and p.suffix != ".lock"}


def test_a_cold_fetch_then_a_second_that_downloads_nothing(tmp_path, manifest, mirror_files, server):
    store = DataStore(tmp_path / "store")
    sources = Sources(mirror=server.base_url)
    outcomes = fetch(manifest, store, sources, jobs=3)
    assert {o.action for o in outcomes} == {"downloaded"}
    assert _store_files(store) == set(mirror_files)
    assert all((store.root / p).read_bytes() == d for p, d in mirror_files.items())
    assert sum(server.requests.values()) == 3
    again = fetch(manifest, store, sources)
    assert {o.action for o in again} == {"present"}
    assert sum(server.requests.values()) == 3, "a second fetch must not download"
    assert all(s.state == "ok" for _, s in verify(manifest, store))


def test_two_fetches_at_once_download_each_file_once(tmp_path, manifest, mirror_files, server):
    # Two tasks of one benchmark run fetch into one store at once, often the same knowledge graphs.
    import concurrent.futures as cf

    store = DataStore(tmp_path / "store")
    with cf.ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(fetch, manifest, DataStore(store.root), Sources(mirror=server.base_url)) for _ in range(2)]
        actions = sorted(o.action for run in runs for o in run.result())
    assert actions == ["downloaded"] * 3 + ["present"] * 3
    assert all(n == 1 for n in server.requests.values())
    assert all((store.root / p).read_bytes() == d for p, d in mirror_files.items())


def test_a_corrupted_file_is_refused_and_fetched_again(tmp_path, manifest, mirror_files, server):
    store = DataStore(tmp_path / "store")
    fetch(manifest, store, Sources(mirror=server.base_url))
    target = store.root / "kg/a.tsv"
    target.chmod(0o644)
    target.write_bytes(b"tampered" + mirror_files["kg/a.tsv"][8:])  # same size: only the checksum tells
    (bad,) = [s for f, s in verify(manifest, store) if f.path == "kg/a.tsv"]
    assert bad.state == "corrupt" and "expected" in bad.detail
    (outcome,) = [o for o in fetch(manifest, store, Sources(mirror=server.base_url)) if o.path == "kg/a.tsv"]
    assert outcome.action == "downloaded" and "corrupt" in outcome.note
    assert target.read_bytes() == mirror_files["kg/a.tsv"]


def test_a_wrong_checksum_from_the_source_names_file_both_sums_and_url(tmp_path, manifest, mirror_files, server):
    (tmp_path / "mirror/labels/b.csv").write_bytes(b"x,y\n9,9\n")
    store = DataStore(tmp_path / "store")
    with pytest.raises(FetchError) as err:
        fetch(manifest, store, Sources(mirror=server.base_url))
    message = str(err.value)
    assert "labels/b.csv" in message and hashlib.sha256(b"x,y\n9,9\n").hexdigest() in message
    assert hashlib.sha256(mirror_files["labels/b.csv"]).hexdigest() in message and server.base_url in message
    assert "1 of 3" in message, "the other files are still fetched"
    assert _left_in_store(store) == {"kg/a.tsv", "cells/big.bin"}, "nothing half-written or wrong is kept"


def test_a_404_is_one_error_and_leaves_nothing(tmp_path, manifest, server):
    server.missing.add("cells/big.bin")
    store = DataStore(tmp_path / "store")
    with pytest.raises(FetchError, match=r"cells/big.bin: .*HTTP 404"):
        fetch(manifest, store, Sources(mirror=server.base_url))
    assert "cells/big.bin" not in _store_files(store)
    assert not any("big.bin" in p for p in _left_in_store(store))


def test_a_truncated_transfer_is_an_error_and_resumes_from_where_it_stopped(tmp_path, manifest, mirror_files, server):
    server.truncate["cells/big.bin"] = 1_000_000
    store = DataStore(tmp_path / "store")
    with pytest.raises(FetchError, match=r"cells/big.bin: .*(ended|early)"):
        fetch(manifest, store, Sources(mirror=server.base_url))
    assert "cells/big.bin" not in _store_files(store), "a partial file never takes the final name"
    partial = store.partial_path("cells/big.bin")
    assert partial.stat().st_size == 1_000_000
    del server.truncate["cells/big.bin"]
    fetch(manifest, store, Sources(mirror=server.base_url))
    assert (store.root / "cells/big.bin").read_bytes() == mirror_files["cells/big.bin"]
    assert not partial.exists()


def test_a_stalled_server_times_out_with_one_error(tmp_path, manifest, server):
    server.stall["labels/b.csv"] = 3.0
    store = DataStore(tmp_path / "store")
    with pytest.raises(FetchError, match=r"labels/b.csv: .*no data for 0.5 s"):
        fetch(manifest, store, Sources(mirror=server.base_url, timeout=0.5))
    assert "labels/b.csv" not in _store_files(store)
    assert not any("b.csv" in p for p in _left_in_store(store))


def test_no_network_at_all_is_one_error_per_file(tmp_path, manifest):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = DataStore(tmp_path / "store")
    with pytest.raises(FetchError) as err:
        fetch(manifest, store, Sources(mirror=f"http://127.0.0.1:{port}", timeout=2))
    assert "3 of 3" in str(err.value) and str(err.value).count("cannot connect") == 3
    assert not _left_in_store(store)


def test_offline_names_what_is_missing_and_uses_local_copies(tmp_path, manifest, mirror_files):
    store = DataStore(tmp_path / "store")
    with pytest.raises(FetchError) as err:
        fetch(manifest, store, Sources(offline=True))
    assert "no network (offline)" in str(err.value) and f"raw.githubusercontent.com/o/r/{COMMIT}/kg/a.tsv" in str(err.value)
    outcomes = fetch(manifest, store, Sources(local=(tmp_path / "mirror",), offline=True))
    assert {o.action for o in outcomes} == {"copied"}


def test_a_local_mirror_with_a_wrong_copy_is_passed_over_for_the_next_source(tmp_path, manifest, mirror_files):
    (tmp_path / "stale/labels").mkdir(parents=True)
    (tmp_path / "stale/labels/b.csv").write_bytes(b"old")
    store = DataStore(tmp_path / "store")
    entry = next(f for f in manifest if f.path == "labels/b.csv")
    (outcome,) = fetch([entry], store, Sources(local=(tmp_path / "stale", tmp_path / "mirror"), offline=True))
    assert outcome.origin == str(tmp_path / "mirror/labels/b.csv")
    assert (store.root / "labels/b.csv").read_bytes() == mirror_files["labels/b.csv"]
    # With no other source, the error says what the wrong copy was.
    with pytest.raises(FetchError, match="wrong checksum from .*stale/labels/b.csv"):
        fetch([entry], DataStore(tmp_path / "store2"), Sources(local=(tmp_path / "stale",), offline=True))


def test_an_unpinned_file_is_recorded_at_its_first_fetch_and_verified_after(tmp_path, server, mirror_files):
    path = tmp_path / "api" / "data_manifest.yaml"
    path.parent.mkdir()
    entry = {**_entry("cells/big.bin", b""), "sha256": None, "size": None,
             "url": "https://dataverse.harvard.edu/api/access/datafile/6154020"}
    path.write_text(yaml.safe_dump({"files": [entry]}))
    files = read_manifest(path)
    store = DataStore(tmp_path / "store")
    fetch(files, store, Sources(mirror=server.base_url))
    assert store.observed("cells/big.bin")[0] == hashlib.sha256(mirror_files["cells/big.bin"]).hexdigest()
    (tmp_path / "mirror/cells/big.bin").write_bytes(b"changed upstream")
    (store.root / "cells/big.bin").chmod(0o644)
    (store.root / "cells/big.bin").unlink()
    with pytest.raises(FetchError, match="expected .* from the first fetch"):
        fetch(files, store, Sources(mirror=server.base_url))


def test_a_derived_file_is_made_from_its_original(tmp_path, server, mirror_files):
    # The derivation: a function of the task's own library, given the original and the output path.
    task = tmp_path / "task"
    (task / "task_lib").mkdir(parents=True)
    (task / "task_lib" / "__init__.py").write_text("")
    (task / "task_lib" / "cut.py").write_text(
        "def first_line(sources, output, *, upper=False):\n"
        "    line = sources['table'].read_text().splitlines()[0]\n"
        "    output.write_text((line.upper() if upper else line) + '\\n')\n")
    derived = b"A\tB\n"
    entry = {**_entry("kg/first.tsv", derived), "derive": {
        "function": "task_lib.cut:first_line", "args": {"upper": True},
        "from": [{"name": "table", **{k: v for k, v in _entry("kg/a.tsv", mirror_files["kg/a.tsv"]).items()
                                       if k in ("path", "url", "sha256", "size")}}]}}
    del entry["url"]
    (task / "api").mkdir()
    (task / "api" / "data_manifest.yaml").write_text(yaml.safe_dump({"files": [entry]}))
    files = read_manifest(task / "api" / "data_manifest.yaml")
    store = DataStore(tmp_path / "store")
    (outcome,) = fetch(files, store, Sources(mirror=server.base_url))
    assert outcome.action == "derived" and (store.root / "kg/first.tsv").read_bytes() == derived
    assert server.requests["kg/first.tsv"] == 1 and server.requests["kg/a.tsv"] == 1, "the mirror is asked first"


def test_each_dataset_sees_only_its_files(tmp_path, mirror_files, server):
    path = tmp_path / "api" / "data_manifest.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump({"files": [_entry("kg/a.tsv", mirror_files["kg/a.tsv"]),
                                              _entry("labels/b.csv", mirror_files["labels/b.csv"], datasets=["b_only"])]}))
    files = read_manifest(path)
    store = DataStore(tmp_path / "store")
    views = dataset_views("t", files, ["plain", "b_only"], store, Sources(mirror=server.base_url))
    seen = {d: {str(p.relative_to(v)) for p in v.rglob("*") if p.is_file()} for d, v in views.items()}
    assert seen == {"plain": {"kg/a.tsv"}, "b_only": {"kg/a.tsv", "labels/b.csv"}}
    assert os.path.samefile(views["plain"] / "kg/a.tsv", store.root / "kg/a.tsv"), "views are links, not copies"
    assert (views["plain"] / "kg/a.tsv").stat().st_mode & 0o222 == 0, "a job's files are read-only"


@pytest.mark.skipif(not shared_data_dir(ROOT).is_dir(), reason=f"needs the shared data folder {shared_data_dir(ROOT)}")
def test_every_tasks_real_files_come_cold_from_an_http_mirror_of_the_shared_data(tmp_path):
    files = merge_manifests(task_manifest(t.dir) for t in discover_tasks(ROOT))
    in_mirror = [f for f in files if (shared_data_dir(ROOT) / f.path).is_file()]
    assert len(in_mirror) >= 20, "the manifests declare the shared data's files"
    store = DataStore(tmp_path / "store")
    with DataMirrorServer(shared_data_dir(ROOT)) as server:
        outcomes = fetch(in_mirror, store, Sources(mirror=server.base_url), jobs=4)
        assert {o.action for o in outcomes} <= {"downloaded"}
        assert {o.action for o in fetch(in_mirror, store, Sources(mirror=server.base_url))} == {"present"}
        assert sum(server.requests.values()) == len(in_mirror)
    assert all(s.state == "ok" for _, s in verify(in_mirror, store))
