"""perturbqa_lib.dataset_assembly: training pairs, test items and solution of a dataset, never de with dir."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from perturbqa_lib.dataset_assembly import (
    KNOWLEDGE_LICENSE,
    MAX_DATASET_LABEL,
    dataset_from_responses,
    dataset_label,
    perturbqa_dataset,
    screen_metadata,
)
from perturbqa_lib.screen_manifest import read_screen_manifest

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "resources_test" / "perturbqa" / "raw" / "perturbqa"
SCREENS = ROOT / "src" / "perturbqa" / "datasets" / "perturbqa" / "screens"


def screen(name):
    return read_screen_manifest(SCREENS / f"{name}.yaml")


def responses():
    return pd.DataFrame({"pert": ["A", "A", "B", "C", "C"], "gene": ["x", "y", "x", "x", "y"],
                         "split": ["train", "train", "train", "test", "test"],
                         "response": ["up", "unchanged", "down", "up", "unchanged"]})


def test_dataset_never_mixes_de_and_dir():
    with pytest.raises(ValueError, match="cannot share"):
        dataset_from_responses(responses(), ["de", "dir"], {"dataset_id": "t"})
    ds = dataset_from_responses(responses(), ["dir"], {"dataset_id": "t"})
    assert list(ds["test"].index) == ["dir:C:x"] and ds["solution"]["label"].tolist() == [1.0]
    assert list(ds["train"].index) == ["A:x", "A:y", "B:x"] and ds["uns"]["subtask"] == "dir"
    ds = dataset_from_responses(responses(), ["de"], {"dataset_id": "t"})
    assert ds["solution"]["label"].tolist() == [1.0, 0.0] and "2 test items (de)" in ds["uns"]["dataset_description"]


def test_clusters_need_annotations_and_the_k562_screen():
    clusters = pd.DataFrame({"cluster": [1, 2], "members": [["G1", "G2"], ["G3"]], "annotation": ["shared", ""]})
    ds = dataset_from_responses(responses(), ["de", "gse_gene"], {"dataset_id": "t"}, clusters={"gse_gene": clusters})
    gse = ds["solution"][ds["solution"]["subtask"] == "gse_gene"]
    # Only annotated clusters are test items (appendix A.1); they have an annotation and no label.
    assert list(gse.index) == ["gse_gene:1"] and gse["annotation"].tolist() == ["shared"] and np.isnan(gse["label"]).all()
    with pytest.raises(ValueError, match="needs its clusters"):
        dataset_from_responses(responses(), ["gse_pert"], {"dataset_id": "t"})
    with pytest.raises(ValueError, match=r"k562_set\.yaml: the screen declares no files\.gse_gene"):
        perturbqa_dataset(RAW, screen("k562_set"), ["gse_gene"], "t")


def test_perturbqa_dataset_from_the_published_subset():
    ds = perturbqa_dataset(RAW, screen("k562_set"), ["de"], "k562_set_de")
    assert ds["uns"]["cell_line"] == "K562" and ds["uns"]["downstream_type"] == "gene_set"
    assert ds["uns"]["dataset_name"] == "K562-set DE" and "expression programs" in ds["uns"]["dataset_description"]
    assert ds["uns"]["dataset_reference"] == "10.48550/arXiv.2502.21290; 10.1016/j.cell.2022.05.013"
    assert set(ds["test"]["gene"]) <= set(ds["sets"]["set_name"])
    assert not set(ds["train"]["pert"]) & set(ds["test"]["pert"])  # unseen perturbations
    with pytest.raises(ValueError, match="subtasks must be among"):
        perturbqa_dataset(RAW, screen("k562"), ["ranking"], "t")


def test_a_subtask_without_items_is_an_error_naming_the_file():
    no_test = responses().assign(split="train")
    with pytest.raises(ValueError, match=r"k562-dir\.csv: no test items for subtask dir"):
        dataset_from_responses(no_test, ["dir"], {"dataset_id": "t"}, sources={"dir": "k562-dir.csv"})
    unannotated = pd.DataFrame({"cluster": [1], "members": [["G1"]], "annotation": [""]})
    with pytest.raises(ValueError, match=r"gse\.json: no test items for subtask gse_gene \(no annotated cluster\)"):
        dataset_from_responses(responses(), ["gse_gene"], {"dataset_id": "t"}, clusters={"gse_gene": unannotated},
                               sources={"gse_gene": "gse.json"})
    with pytest.raises(ValueError, match="screen.h5ad: no training pairs"):
        dataset_from_responses(responses().assign(split="test"), ["de"], {"dataset_id": "t"}, sources={"de": "screen.h5ad"})


def test_dataset_labels_are_short():
    assert dataset_label("K562", ["de"]) == "K562 DE" and dataset_label("RPE1", ["dir"]) == "RPE1 direction"
    assert dataset_label("K562", ["gse_pert"]) == "K562 pert clusters"
    assert dataset_label("K562", ["de", "gse_gene", "gse_pert"]) == "K562: de+gse_gene+gse_pert"
    assert dataset_label("twelve chars", ["dir", "gse_gene", "gse_pert"]) == "twelve chars: 3 subtasks"
    for name in ("k562", "rpe1", "k562_set"):
        for subtasks in (["de"], ["dir"], ["gse_gene"], ["gse_pert"], ["dir", "gse_gene", "gse_pert"]):
            assert len(dataset_label(screen(name).label, subtasks)) <= MAX_DATASET_LABEL
    with pytest.raises(ValueError, match="too long"):
        dataset_label("a label far too long for any header", ["de", "gse_gene"])


def test_screen_metadata():
    sentence = "RPE1 cells are a non-cancerous cell line."
    uns = screen_metadata("screen_de", "/data/replogle_rpe1.h5ad", ["de"], "RPE1", sentence)
    assert uns["dataset_name"] == "RPE1 DE" and "replogle_rpe1.h5ad" in uns["dataset_summary"]
    assert uns["cell_line"] == "RPE1" and uns["cell_line_description"] == sentence
    assert uns["dataset_license"].endswith(KNOWLEDGE_LICENSE) and uns["downstream_type"] == "gene"
    with pytest.raises(ValueError, match="s.h5ad: a screen needs its cell line and the sentence"):
        screen_metadata("x", "s.h5ad", ["de"], "HeLa", " ")
