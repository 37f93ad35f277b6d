"""Reading and checking data manifests (openpert.data.manifest), and the project's own manifests."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from openpert.config.project import shared_data_dir
from openpert.config.task import discover_tasks
from openpert.config.viash import ConfigError
from openpert.data.manifest import merge_manifests, read_manifest, task_manifest, url_problem

ROOT = Path(__file__).resolve().parents[3]
COMMIT = "04ff16d20060b7e3629e5874a971000b3c1e4b60"
GOOD = {
    "path": "perturbqa/k562-de.csv",
    "url": f"https://raw.githubusercontent.com/jonasargelo/PerturbQA/{COMMIT}/perturbqa/datasets/k562-de.csv",
    "sha256": "a" * 64, "size": 10, "license": "Genentech Non-Commercial", "non_commercial": True,
    "citation": "Wu et al. 2025", "datasets": ["k562_de"],
}


def _write(tmp_path: Path, files: list) -> Path:
    path = tmp_path / "api" / "data_manifest.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"files": files}))
    return path


def test_an_entry_is_read_with_every_field(tmp_path):
    (entry,) = read_manifest(_write(tmp_path, [GOOD]))
    assert (entry.path, entry.sha256, entry.size, entry.non_commercial) == (GOOD["path"], "a" * 64, 10, True)
    assert entry.pinned and entry.download.url == GOOD["url"]
    assert entry.read_by("k562_de") and not entry.read_by("rpe1_de")


@pytest.mark.parametrize(("change", "message"), [
    ({"path": "../etc/passwd"}, "must be relative"),
    ({"path": ".openpert/observed.json"}, "no hidden first folder"),
    ({"url": GOOD["url"].replace(COMMIT, "main")}, "not pinned"),
    ({"url": "http://example.org/x.csv"}, "https://"),
    ({"sha256": "XYZ"}, "64 lowercase hex"),
    ({"sha256": None}, "known together"),
    ({"license": ""}, "license"),
    ({"datasets": []}, "non-empty list"),
    ({"colour": "red"}, "unknown key(s) colour"),
])
def test_a_bad_entry_is_one_error_naming_the_file_and_the_entry(tmp_path, change, message):
    path = _write(tmp_path, [{**GOOD, **change}])
    with pytest.raises(ConfigError, match="files\\[0\\]") as err:
        read_manifest(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_a_url_is_pinned_where_its_host_can_pin_it():
    # A bucket cannot be pinned by its URL: its sha256 does, or the first fetch's record when null.
    assert url_problem("https://example.org/data.zip") is None
    assert url_problem("http://example.org/data.zip") is not None
    assert url_problem("https://dataverse.harvard.edu/api/access/datafile/6154020") is None
    assert url_problem("https://dataverse.harvard.edu/api/access/datafile/latest") is not None
    assert url_problem("https://raw.githubusercontent.com/o/r/main/x.csv") is not None
    assert url_problem(f"https://raw.githubusercontent.com/o/r/{'a' * 40}/x.csv") is None


def test_a_derived_entry_names_its_originals(tmp_path):
    derived = {**{k: v for k, v in GOOD.items() if k != "url"}, "path": "kg/regulons.tsv",
               "derive": {"function": "pertsci.rda_tables:dorothea_regulons", "args": {"confidence": ["A"]},
                          "from": [{"name": "rda", "path": "originals/d/dorothea_hs.rda", "url": GOOD["url"],
                                    "sha256": "b" * 64, "size": 3}]}}
    (entry,) = read_manifest(_write(tmp_path, [derived]))
    assert entry.download is None and entry.derive.args == {"confidence": ["A"]}
    assert entry.derive.sources[0][0] == "rda" and entry.derive.sources[0][1].path == "originals/d/dorothea_hs.rda"
    with pytest.raises(ConfigError, match="no url of its own"):
        read_manifest(_write(tmp_path, [{**derived, "url": GOOD["url"]}]))
    with pytest.raises(ConfigError, match="module:function"):
        read_manifest(_write(tmp_path, [{**derived, "derive": {**derived["derive"], "function": "not a function"}}]))


def test_two_tasks_must_declare_one_file_alike(tmp_path):
    a = read_manifest(_write(tmp_path / "a", [GOOD]))
    b = read_manifest(_write(tmp_path / "b", [{**GOOD, "sha256": "c" * 64}]))
    assert len(merge_manifests([a, read_manifest(_write(tmp_path / "c", [GOOD]))])) == 1
    with pytest.raises(ConfigError, match="declared differently"):
        merge_manifests([a, b])


def test_a_file_is_read_by_the_datasets_it_names_or_by_every_dataset(tmp_path):
    everyone = {**GOOD, "path": "kg/go.gmt"}
    del everyone["datasets"]
    files = read_manifest(_write(tmp_path, [GOOD, everyone]))
    assert [f.path for f in files if f.read_by("rpe1_de")] == ["kg/go.gmt"]
    assert len([f for f in files if f.read_by("k562_de")]) == 2


# -- the project's own manifests ------------------------------------------------------------------------------
TASKS = [t for t in discover_tasks(ROOT) if task_manifest(t.dir)]


def test_every_task_with_real_datasets_has_a_manifest_and_they_agree():
    assert {t.name for t in TASKS} >= {"biome_bench", "perturbqa", "pertreasonqa", "perturbation_effect"}
    merged = merge_manifests(task_manifest(t.dir) for t in TASKS)
    assert merged, "no manifest declares any file"


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_manifest_datasets_are_the_tasks_datasets_or_builds(task):
    ids = {e["id"] for c in task.of_type("dataset") for e in [*c.dataset_entries, *c.build_entries]}
    for f in task_manifest(task.dir):
        assert f.datasets is None or set(f.datasets) <= ids, f"{f.path}: unknown dataset ids {set(f.datasets) - ids}"


@pytest.mark.skipif(not shared_data_dir(ROOT).is_dir(), reason=f"needs the shared data folder {shared_data_dir(ROOT)}")
@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_pinned_checksums_are_those_of_the_shared_data(task):
    shared = shared_data_dir(ROOT)
    for f in task_manifest(task.dir):
        if not f.pinned:
            continue
        assert (shared / f.path).is_file(), f"{f.path}: pinned, yet not in {shared}"
        data = (shared / f.path).read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (f.sha256, f.size), f.path
