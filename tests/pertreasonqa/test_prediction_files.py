"""The prediction file: written by methods and controls, read back in the solution's order by metrics."""

from __future__ import annotations

import json

import anndata as ad
import pandas as pd
import pytest
from pertreasonqa_lib.prediction_files import ANSWERS, aligned_prediction, write_prediction


@pytest.fixture
def test_items():
    return ad.AnnData(obs=pd.DataFrame({"gene": ["G1", "G2"]}, index=["i1", "i2"]), uns={"dataset_id": "d"})


def test_write_prediction_columns_and_provenance(test_items, tmp_path):
    path = tmp_path / "p.h5ad"
    write_prediction(path, test_items, ["up", "invalid"], [[("P", 1, "G1")], []], "m", extra={"response": ["r1", "r2"]})
    pred = ad.read_h5ad(path)
    assert list(pred.obs_names) == ["i1", "i2"] and dict(pred.uns) == {"dataset_id": "d", "method_id": "m"}
    assert pred.obs["answer"].tolist() == ["up", "invalid"] and pred.obs["response"].tolist() == ["r1", "r2"]
    assert json.loads(pred.obs.loc["i1", "triplets"]) == [["P", 1, "G1"]]
    assert ANSWERS == ("up", "down", "unchanged", "invalid")
    with pytest.raises(ValueError, match="answers must be one of"):
        write_prediction(path, test_items, ["up", "sideways"], [[], []], "m")
    with pytest.raises(ValueError, match="1 answers and 2 triplet lists for 2 test items"):
        write_prediction(path, test_items, ["up"], [[], []], "m")


def test_aligned_prediction_follows_the_solution():
    solution = pd.DataFrame({"label": ["up", "down"]}, index=["i1", "i2"])
    prediction = pd.DataFrame({"answer": ["down", "up", "up"]}, index=["i2", "i1", "extra"])
    assert aligned_prediction(solution, prediction)["answer"].tolist() == ["up", "down"]
    with pytest.raises(ValueError, match="p.h5ad: no prediction for 1 items"):
        aligned_prediction(solution, prediction.drop("i2"), where="p.h5ad")
    with pytest.raises(ValueError, match="answers must be one of"):
        aligned_prediction(solution, prediction.assign(answer="maybe"))
