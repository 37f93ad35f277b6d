"""perturbqa_lib.dataset_files: a dataset written and read back, prediction files and their checks."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from perturbqa_lib.dataset_assembly import dataset_from_responses
from perturbqa_lib.dataset_files import prediction_frame, read_dataset, set_members, write_dataset, write_prediction


@pytest.fixture
def dataset():
    responses = pd.DataFrame({"pert": ["A", "A", "B", "C", "C", "D", "D"], "gene": ["x", "S1", "x", "x", "S1", "x", "S1"],
                              "split": ["train", "train", "train", "test", "test", "test", "test"],
                              "response": ["up", "unchanged", "down", "up", "unchanged", "unchanged", "down"]})
    uns = {"dataset_id": "t", "cell_line": "K562", "cell_line_description": "K562 cells.", "downstream_type": "gene_set"}
    return dataset_from_responses(responses, ["de"], uns, sets={"S1": ["x", "y"]})


def test_prediction_frame():
    ds = dataset_from_responses(pd.DataFrame({"pert": ["A", "C", "D"], "gene": ["x", "x", "x"],
                                              "split": ["train", "test", "test"], "response": ["up", "up", "down"]}),
                                ["dir"], {"dataset_id": "t"})
    pred = prediction_frame(ds["test"], scores={"dir:C:x": 0.3})
    assert pred.loc["dir:C:x", "score"] == 0.3 and pred.loc["dir:C:x", "text"] == ""
    assert np.isnan(prediction_frame(ds["test"])["score"]).all()


def test_dataset_round_trip(tmp_path, dataset):
    edges = pd.DataFrame({"source": ["x"], "target": ["y"], "relation": ["physical"], "sign": [0], "directed": [False],
                          "database": ["HuRI"]})
    descriptions = pd.DataFrame({"gene": ["x"], "description": ["X protein; does things."]})
    paths = {k: tmp_path / f"{k}.{'parquet' if k in ('kg_edges', 'gene_descriptions') else 'h5ad'}"
             for k in ("train", "test", "solution", "kg_edges", "gene_descriptions")}
    write_dataset(dataset, edges, descriptions, **paths)
    train, test = read_dataset(paths["train"], paths["test"])
    pd.testing.assert_frame_equal(train.obs[["pert", "gene", "response"]], dataset["train"], check_names=False)
    assert train.uns["sets"] == {"S1": ["x", "y"]} and list(test.obs_names) == list(dataset["test"].index)
    assert test.uns["subtask"] == "de" and "dataset_description" not in test.uns  # the test file keeps the short uns
    # Items are sorted by pair (C:S1 before C:x); every pair of the cross is labelled, so no decoy.
    assert ad.read_h5ad(paths["solution"]).obs["label"].tolist() == [0.0, 1.0, 1.0, 0.0] and test.uns["n_decoy_items"] == 0
    assert test.uns["n_unscored_pairs"] == 0
    pd.testing.assert_frame_equal(pd.read_parquet(paths["kg_edges"]), edges)
    assert set_members(None) == {}


def test_write_prediction_checks(tmp_path, dataset):
    test = dataset["test"]
    write_prediction(tmp_path / "p.h5ad", test, "t", "m", scores=pd.Series([0.2, 0.9, 0.4, 0.1], index=test.index))
    pred = ad.read_h5ad(tmp_path / "p.h5ad")
    assert pred.uns["method_id"] == "m" and pred.obs["score"].tolist() == [0.2, 0.9, 0.4, 0.1]
    with pytest.raises(ValueError, match="scores given for some pair items but not for 3 others"):
        write_prediction(tmp_path / "q.h5ad", test, "t", "m", scores={test.index[0]: 0.5})
    with pytest.raises(ValueError, match="infinite scores"):
        write_prediction(tmp_path / "r.h5ad", test, "t", "m", scores=pd.Series([np.inf, 0.1, 0.2, 0.3], index=test.index))
