"""perturbqa_lib.dataset_assembly: training pairs, test items and solution of a dataset, never de with dir."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from perturbqa_lib.dataset_assembly import LICENSE, dataset_from_responses, perturbqa_dataset, screen_metadata

RAW = Path(__file__).resolve().parents[2] / "resources_test" / "perturbqa" / "raw" / "perturbqa"


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
    with pytest.raises(ValueError, match="k562 screen only"):
        perturbqa_dataset(RAW, "k562_set", ["gse_gene"], "t")


def test_perturbqa_dataset_from_the_published_subset():
    ds = perturbqa_dataset(RAW, "k562_set", ["de"], "k562_set_de")
    assert ds["uns"]["cell_line"] == "K562" and ds["uns"]["downstream_type"] == "gene_set"
    assert set(ds["test"]["gene"]) <= set(ds["sets"]["set_name"])
    assert not set(ds["train"]["pert"]) & set(ds["test"]["pert"])  # unseen perturbations
    with pytest.raises(ValueError, match="subtasks must be among"):
        perturbqa_dataset(RAW, "k562", ["ranking"], "t")


def test_screen_metadata():
    uns = screen_metadata("screen_de", "/data/replogle_k562.h5ad", ["de"], "RPE1")
    assert uns["dataset_name"] == "replogle_k562: de" and "replogle_k562.h5ad" in uns["dataset_summary"]
    assert uns["cell_line"] == "RPE1" and uns["cell_line_description"].startswith("RPE1 cells")
    assert uns["dataset_license"] == LICENSE and uns["downstream_type"] == "gene"
    with pytest.raises(ValueError, match="unknown cell line 'HeLa'"):
        screen_metadata("x", "s.h5ad", ["de"], "HeLa")
