"""perturbqa_lib.published_labels: the published files' readers and their checks, the joined responses."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from perturbqa_lib.published_labels import (
    load_screen,
    read_clusters_json,
    read_label_csv,
    read_set_mapping,
    responses_from_labels,
)
from perturbqa_lib.screen_manifest import read_screen_manifest

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "resources_test" / "perturbqa" / "raw" / "perturbqa"
SCREENS = ROOT / "src" / "perturbqa" / "datasets" / "perturbqa" / "screens"


def write_csv(path, rows):
    pd.DataFrame(rows, columns=["pert", "gene", "label", "split"]).to_csv(path, index=False)
    return path


def test_read_label_csv_checks(tmp_path):
    good = write_csv(tmp_path / "ok.csv", [("A", "x", 1, "train"), ("A", "y", 0, "train"), ("B", "x", 0, "test")])
    assert len(read_label_csv(good)) == 3
    with pytest.raises(ValueError, match="label must be 0 or 1"):
        read_label_csv(write_csv(tmp_path / "a.csv", [("A", "x", 2, "train")]))
    with pytest.raises(ValueError, match="duplicated"):
        read_label_csv(write_csv(tmp_path / "b.csv", [("A", "x", 1, "train"), ("A", "x", 0, "train")]))
    with pytest.raises(ValueError, match="both splits"):
        read_label_csv(write_csv(tmp_path / "c.csv", [("A", "x", 1, "train"), ("A", "y", 0, "test")]))
    pd.DataFrame({"pert": ["A"], "gene": ["x"]}).to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ValueError, match=r"d\.csv: missing column"):
        read_label_csv(tmp_path / "d.csv")


def test_responses_from_labels(tmp_path):
    de = read_label_csv(write_csv(tmp_path / "de.csv", [("A", "x", 1, "train"), ("A", "y", 0, "train"), ("A", "z", 1, "train")]))
    direction = read_label_csv(write_csv(tmp_path / "dir.csv", [("A", "x", 1, "train"), ("A", "z", 0, "train")]))
    r = responses_from_labels(de, direction)
    assert list(r["response"]) == ["up", "unchanged", "down"]
    with pytest.raises(ValueError, match="not differentially expressed"):
        bad = read_label_csv(write_csv(tmp_path / "bad.csv", [("A", "y", 1, "train")]))
        responses_from_labels(de, bad)
    with pytest.raises(ValueError, match="have no direction label"):
        responses_from_labels(de, direction.iloc[:1])


def test_read_clusters_json(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('[{"genes": ["A", "B"], "label": "x"}, {"genes": ["C"], "label": null}]')
    c = read_clusters_json(path)
    assert c["annotation"].tolist() == ["x", ""] and c["members"][0] == ["A", "B"]
    path.write_text('[{"genes": [], "label": "x"}]')
    with pytest.raises(ValueError, match="cluster 1"):
        read_clusters_json(path)


def test_load_screen_on_the_published_subset(tmp_path):
    responses, sets = load_screen(RAW, read_screen_manifest(SCREENS / "k562.yaml"))
    assert sets == {} and set(responses["split"]) == {"train", "test"}
    assert set(responses["response"]) == {"unchanged", "down", "up"}
    responses, sets = load_screen(RAW, read_screen_manifest(SCREENS / "k562_set.yaml"))
    assert sets == read_set_mapping(RAW / "k562_set-mapping.json") and set(responses["gene"]) <= set(sets)
    with pytest.raises(FileNotFoundError, match="rpe1-de.csv: file files.de of .*rpe1.yaml not found"):
        load_screen(RAW, read_screen_manifest(SCREENS / "rpe1.yaml"))
    (tmp_path / "m.json").write_text('["A", "B"]')
    with pytest.raises(ValueError, match="m.json: expected a mapping"):
        read_set_mapping(tmp_path / "m.json")


def test_a_screen_without_pairs_is_an_error_naming_the_file(tmp_path):
    write_csv(tmp_path / "k562-de.csv", [])
    write_csv(tmp_path / "k562-dir.csv", [])
    with pytest.raises(ValueError, match=r"k562-de\.csv: no labelled pairs"):
        load_screen(tmp_path, read_screen_manifest(SCREENS / "k562.yaml"))
