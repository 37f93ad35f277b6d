"""perturbqa_lib.screen_manifest: a screen's declaration, read, checked and found beside its files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from perturbqa_lib.screen_manifest import MANIFEST_SUFFIX, find_screen_manifest, read_screen_manifest

SCREENS = Path(__file__).resolve().parents[2] / "src" / "perturbqa" / "datasets" / "perturbqa" / "screens"


def manifest(**changes) -> dict:
    data = yaml.safe_load((SCREENS / "k562.yaml").read_text())
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_shipped_manifests_read():
    for path in sorted(SCREENS.glob("*.yaml")):
        m = read_screen_manifest(path)
        assert m.organism == "homo_sapiens" and m.cell_line_description.endswith(".")
    k562 = read_screen_manifest(SCREENS / "k562.yaml")
    assert k562.label == "K562" and k562.has("gse_gene") and not k562.has("downstream_sets")
    assert k562.reference == ("10.48550/arXiv.2502.21290", "10.1016/j.cell.2022.05.013")
    assert read_screen_manifest(SCREENS / "k562_set.yaml").downstream_type == "gene_set"


@pytest.mark.parametrize(("changes", "message"), [
    ({"cell_line_description": None}, r"missing field\(s\) \['cell_line_description'\]"),
    ({"label": "HepG2 essential screen"}, "longer than 12 characters"),
    ({"downstream_type": "protein"}, "downstream_type must be one of"),
    ({"downstream_type": "gene_set"}, "needs files.downstream_sets"),
    ({"files": {"de": "x-de.csv"}}, r"files\.dir \(the dir label file\) is required"),
    ({"files": {"de": "a", "dir": "b", "labels": "c"}}, r"unknown files \['labels'\]"),
])
def test_a_bad_manifest_is_an_error_naming_it(tmp_path, changes, message):
    path = write(tmp_path / "bad.screen.yaml", manifest(**changes))
    with pytest.raises(ValueError, match=rf"bad\.screen\.yaml: .*{message}"):
        read_screen_manifest(path)


def test_declared_files_are_found_in_the_data_folder(tmp_path):
    m = read_screen_manifest(write(tmp_path / "k.yaml", manifest()))
    (tmp_path / "k562-de.csv").write_text("pert,gene,label,split\n")
    assert m.file("de", tmp_path) == tmp_path / "k562-de.csv"
    with pytest.raises(FileNotFoundError, match=r"k562-dir\.csv: file files\.dir of .*k\.yaml not found"):
        m.file("dir", tmp_path)
    with pytest.raises(ValueError, match=r"k\.yaml: the screen declares no files\.downstream_sets"):
        m.file("downstream_sets", tmp_path)


def test_find_prefers_the_manifest_beside_the_data(tmp_path):
    assert find_screen_manifest("rpe1", tmp_path, [SCREENS]) == SCREENS / "rpe1.yaml"
    beside = write(tmp_path / f"rpe1{MANIFEST_SUFFIX}", manifest(label="RPE1"))
    assert find_screen_manifest("rpe1", tmp_path, [SCREENS]) == beside
    with pytest.raises(FileNotFoundError, match=r"no manifest of screen 'hepg2'.*screens with a manifest: \['k562', 'k562_set', 'rpe1'\]"):
        find_screen_manifest("hepg2", tmp_path, [SCREENS])
    with pytest.raises(ValueError, match="plain name"):
        find_screen_manifest("../k562", tmp_path, [SCREENS])
