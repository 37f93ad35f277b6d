"""A benchmark's dataset stage on public data: fetched before any job, each dataset given its own files.

The fixture project gets a loader that reads a seed from a public file (``{data: <store path>}``)
and lists what its ``--shared_data`` view holds; the files come from a mirror on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import anndata as ad
import pytest
import yaml
from tooling.data_mirror import DataMirrorServer

from openpert.config.task import Task
from openpert.data.fetching import FetchError
from openpert.engines.benchmark import run_benchmark
from openpert.engines.plan import dataset_entries

LOADER = '''import json
from pathlib import Path
import anndata as ad
import numpy as np
import pandas as pd

## VIASH START
par = {"output_train": "train.h5ad", "output_test": "test.h5ad", "output_solution": "solution.h5ad",
       "seed_file": "seed.txt", "shared_data": None, "dataset_id": "fd"}
## VIASH END

seen = sorted(str(p.relative_to(par["shared_data"])) for p in Path(par["shared_data"]).rglob("*") if p.is_file())
rng = np.random.default_rng(int(Path(par["seed_file"]).read_text()))
groups = np.repeat(["g0", "g1"], 6)
X = rng.normal(size=(12, 3)) + (groups == "g1")[:, None] * 3
obs = pd.DataFrame({"group": groups}, index=[f"row{i}" for i in range(12)])
var = pd.DataFrame(index=["a", "b", "c"])
test = np.tile(np.arange(6) < 2, 2)
uns = {"dataset_id": par["dataset_id"], "dataset_name": "From data", "dataset_summary": "x",
       "dataset_description": json.dumps(seen)}
ad.AnnData(X=X[~test], obs=obs[~test], var=var, uns=uns).write_h5ad(par["output_train"])
ad.AnnData(obs=obs[test], var=var, uns=uns).write_h5ad(par["output_test"])
ad.AnnData(obs=obs[test], var=var, layers={"truth": X[test]}, uns=uns).write_h5ad(par["output_solution"])
'''
COMMIT = "1" * 40


def _entry(path: str, data: bytes, **extra) -> dict:
    return {"path": path, "url": f"https://raw.githubusercontent.com/o/r/{COMMIT}/{path}", "license": "MIT",
            "citation": "x", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), **extra}


@pytest.fixture
def data_project(project_copy, tmp_path, monkeypatch):
    """The fixture project with a loader reading public files, its manifest, a mirror and an empty store."""
    task_dir = project_copy / "src" / "tiny"
    loader = task_dir / "datasets" / "from_data"
    shutil.copytree(task_dir / "datasets" / "synthetic", loader)
    config = yaml.safe_load((loader / "config.vsh.yaml").read_text())
    config["name"] = "from_data"
    config["info"] = {"datasets": [
        {"id": "fd_a", "seed_file": {"data": "seeds/seed.txt"}},
        {"id": "fd_big", "seed_file": {"data": "seeds/seed.txt"}, "large": True},
    ]}
    config["arguments"] = [{"name": "--seed_file", "type": "file", "direction": "input", "required": True},
                           {"name": "--shared_data", "type": "file", "direction": "input", "required": False},
                           {"name": "--dataset_id", "type": "string", "default": "fd"}]
    (loader / "config.vsh.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (loader / "script.py").write_text(LOADER)
    mirror = tmp_path / "mirror"
    files = {"seeds/seed.txt": b"7\n", "screens/big.txt": b"only the large dataset reads this\n"}
    for path, data in files.items():
        (mirror / path).parent.mkdir(parents=True, exist_ok=True)
        (mirror / path).write_bytes(data)
    (task_dir / "api" / "data_manifest.yaml").write_text(yaml.safe_dump({"files": [
        _entry("seeds/seed.txt", files["seeds/seed.txt"]),
        _entry("screens/big.txt", files["screens/big.txt"], datasets=["fd_big"])]}))
    monkeypatch.setenv("OPENPERT_DATA", str(tmp_path / "store"))
    monkeypatch.delenv("OPENPERT_SHARED_DATA", raising=False)
    with DataMirrorServer(mirror) as server:
        monkeypatch.setenv("OPENPERT_DATA_MIRROR", server.base_url)
        yield Task(task_dir), server


#: The jobs after the dataset stage that these tests need: one method scored by one metric.
AFTER_THE_DATASETS = {"methods": ["group_mean"], "controls": [], "metrics": ["errors"]}


def test_a_loader_gets_its_public_files_fetched_and_nothing_else(data_project, tmp_path):
    """The fetched files reach the loader, and a resumed run with an unchanged store reuses the dataset job."""
    task, server = data_project
    results = run_benchmark(task, tmp_path / "out", datasets=["fd_a"], **AFTER_THE_DATASETS)
    assert not results["failures"]
    assert server.requests == {"seeds/seed.txt": 1}, "only what the planned dataset reads is fetched"
    train = ad.read_h5ad(tmp_path / "out" / "datasets" / "fd_a" / "train.h5ad")
    assert yaml.safe_load(train.uns["dataset_description"]) == ["seeds/seed.txt"], "the job sees its own files only"
    (dataset,) = results["datasets"]
    assert [f["path"] for f in dataset["source_files"]] == ["seeds/seed.txt"]
    assert dataset["source_files"][0]["origin"].startswith("https://raw.githubusercontent.com/o/r/")
    # an unchanged store reuses the dataset job
    again = run_benchmark(Task(task.dir), tmp_path / "out", datasets=["fd_a"], resume=True, **AFTER_THE_DATASETS)
    assert all(r["cached"] for r in again["resources"]), "the view's files, not its folder, key the job"
    assert server.requests == {"seeds/seed.txt": 1}
    assert Path(tmp_path / "out" / "datasets" / "fd_a" / "train.h5ad").is_file()


def test_large_datasets_are_planned_only_when_asked(data_project):
    task, _ = data_project
    ids = lambda entries: [e["id"] for _, e in entries]  # noqa: E731
    chosen, left_out = dataset_entries(task)
    assert "fd_big" not in ids(chosen) and left_out == ["fd_big"]
    assert "fd_big" in ids(dataset_entries(task, include_large=True)[0])
    assert ids(dataset_entries(task, ["fd_big"])[0]) == ["fd_big"], "naming a large dataset asks for it"


def test_a_file_that_cannot_be_had_stops_the_run_before_any_job(data_project, tmp_path):
    task, server = data_project
    server.missing.add("seeds/seed.txt")
    with pytest.raises(FetchError, match=r"seeds/seed.txt: .*HTTP 404"):
        run_benchmark(task, tmp_path / "out", datasets=["fd_a"], **AFTER_THE_DATASETS)
    assert not (tmp_path / "out" / "work").exists(), "no job ran"


def test_a_data_input_the_manifest_does_not_give_is_a_config_error(data_project, tmp_path):
    from openpert.config.viash import ConfigError

    task, _ = data_project
    manifest = task.dir / "api" / "data_manifest.yaml"
    doc = yaml.safe_load(manifest.read_text())
    doc["files"][0]["datasets"] = ["fd_big"]  # fd_a no longer gets seeds/seed.txt
    manifest.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=r"fd_a: --seed_file reads seeds/seed.txt, which the task's api/data_manifest.yaml"):
        run_benchmark(Task(task.dir), tmp_path / "out", datasets=["fd_a"], **AFTER_THE_DATASETS)
    from openpert.config.lint import data_manifest_problems

    assert any("fd_a: --seed_file reads seeds/seed.txt" in p for p in data_manifest_problems(Task(task.dir)))


def test_lint_names_manifest_datasets_the_task_does_not_have(data_project):
    from openpert.config.lint import data_manifest_problems

    task, _ = data_project
    manifest = task.dir / "api" / "data_manifest.yaml"
    doc = yaml.safe_load(manifest.read_text())
    doc["files"][1]["datasets"] = ["fd_typo"]
    manifest.write_text(yaml.safe_dump(doc))
    (problem,) = data_manifest_problems(Task(task.dir))
    assert "screens/big.txt: datasets fd_typo are no info.datasets or info.builds id" in problem and str(manifest) in problem


BUILD = '''import json
from pathlib import Path

## VIASH START
par = {"shared_data": None, "output_build": "build.json", "fail": False}
## VIASH END

if par["fail"]:
    raise SystemExit("no seed today")
seen = sorted(str(p.relative_to(par["shared_data"])) for p in Path(par["shared_data"]).rglob("*") if p.is_file())
Path(par["output_build"]).write_text(json.dumps({"seed": int((Path(par["shared_data"]) / "seeds/seed.txt").read_text()), "seen": seen}))
'''


@pytest.fixture
def build_project(data_project):
    """The data project whose folds fd_a and fd_b are cut from one build, ``seeds``, of their seed."""
    task, server = data_project
    api = task.dir / "api"
    (api / "file_seed_build.yaml").write_text(yaml.safe_dump({
        "type": "file", "example": "builds/seed_build.json", "label": "Seed build", "summary": "The seed of the folds.",
        "info": {"format": {"type": "json", "keys": [{"name": "seed", "type": "integer"}]}}}))
    build = task.dir / "datasets" / "seeds"
    shutil.copytree(task.dir / "datasets" / "from_data", build)
    config = yaml.safe_load((build / "config.vsh.yaml").read_text())
    config.pop("__merge__")
    config.update(name="seeds", namespace="datasets", info={"type": "dataset", "builds": [{"id": "seeds"}]}, arguments=[
        {"name": "--shared_data", "type": "file", "direction": "input", "required": False},
        {"name": "--fail", "type": "boolean", "default": False},
        {"name": "--output_build", "__merge__": "../../api/file_seed_build.yaml", "required": True, "direction": "output"}])
    (build / "config.vsh.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (build / "script.py").write_text(BUILD)
    split = task.dir / "datasets" / "from_data"
    config = yaml.safe_load((split / "config.vsh.yaml").read_text())
    config["info"] = {"datasets": [{"id": "fd_a", "build": "seeds"}, {"id": "fd_b", "build": "seeds"}]}
    config["arguments"][0] = {"name": "--input_build", "__merge__": "../../api/file_seed_build.yaml", "required": True,
                              "direction": "input"}
    (split / "config.vsh.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    script = LOADER.replace('int(Path(par["seed_file"]).read_text())', 'json.loads(Path(par["input_build"]).read_text())["seed"]')
    # the folds read no public file: they get no --shared_data
    (split / "script.py").write_text(script.replace('for p in Path(par["shared_data"]).rglob("*") if p.is_file())',
                                                    'for p in Path(par["shared_data"] or "/nowhere").rglob("*") if p.is_file())'))
    manifest = yaml.safe_load((api / "data_manifest.yaml").read_text())
    manifest["files"][0]["datasets"] = ["seeds"]
    (api / "data_manifest.yaml").write_text(yaml.safe_dump(manifest))
    return Task(task.dir), server


def test_the_folds_of_a_build_are_cut_from_one_run_of_it(build_project, tmp_path):
    task, server = build_project
    results = run_benchmark(task, tmp_path / "out", datasets=["fd_a", "fd_b"], jobs=2, **AFTER_THE_DATASETS)
    assert not results["failures"], results["failures"]
    assert server.requests == {"seeds/seed.txt": 1}
    runs = [r for r in results["resources"] if r["stage"] in ("build", "dataset")]
    assert sorted((r["stage"], r["dataset_id"]) for r in runs) == [
        ("build", "seeds"), ("dataset", "fd_a"), ("dataset", "fd_b")], "the build runs once for its two folds"
    built = tmp_path / "out" / "builds" / "seeds" / "seed_build.json"
    assert yaml.safe_load(built.read_text())["seen"] == ["seeds/seed.txt"], "the build reads the files given its id"
    folds = {d["dataset_id"]: d for d in results["datasets"]}
    for fold in ("fd_a", "fd_b"):
        train = ad.read_h5ad(tmp_path / "out" / "datasets" / fold / "train.h5ad")
        assert yaml.safe_load(train.uns["dataset_description"]) == [], "a fold reads the build, not the build's files"
        # the site names the public files a fold was made from, read through its build
        assert [f["path"] for f in folds[fold]["source_files"]] == ["seeds/seed.txt"]
    # a resumed run reuses every job: a fold's cache key holds the content of the build it read
    again = run_benchmark(task, tmp_path / "out", datasets=["fd_a", "fd_b"], jobs=2, resume=True, **AFTER_THE_DATASETS)
    assert {r["job_id"]: r["cached"] for r in again["resources"]} == {r["job_id"]: True for r in results["resources"]}


def test_a_failed_build_is_the_reason_its_folds_failed(build_project, tmp_path):
    task, _ = build_project
    config = task.component("seeds").path
    config.write_text(config.read_text().replace("- id: seeds", "- id: seeds\n    fail: true"))
    with pytest.raises(Exception, match="no usable dataset") as err:
        run_benchmark(Task(task.dir), tmp_path / "out", datasets=["fd_a", "fd_b"], **AFTER_THE_DATASETS)
    assert "datasets/fd_a: its build builds/seeds failed: exited with code 1" in str(err.value)
    assert "datasets/fd_b: its build builds/seeds failed" in str(err.value)
