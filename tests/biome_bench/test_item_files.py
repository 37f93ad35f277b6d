"""Tests of biome_bench_lib.item_files: items, predictions and scores written and read back."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from biome_bench_lib.item_files import read_items, write_items, write_prediction, write_score


def test_items_round_trip_as_strings(tmp_path):
    items = pd.DataFrame({"task": ["relation", "mechanism"], "relation": ["binds", ""], "mechanism": ["", "A activates B."]},
                         index=["p_1_r0", "p_1_m"])
    write_items(items, tmp_path / "items.h5ad", {"dataset_id": "toy"})
    obs, uns = read_items(tmp_path / "items.h5ad")
    assert uns == {"dataset_id": "toy"}
    assert obs.index.tolist() == ["p_1_r0", "p_1_m"]
    assert obs["relation"].tolist() == ["binds", ""]  # empty, never NaN
    assert all(obs[c].map(type).eq(str).all() for c in obs.columns)


def test_read_items_names_the_file_with_an_unknown_task(tmp_path):
    write_items(pd.DataFrame({"task": ["relation", "question"]}, index=["a", "b"]), tmp_path / "bad.h5ad", {})
    with pytest.raises(ValueError, match=r"bad.h5ad: obs\['task'\] holds \['question'\]"):
        read_items(tmp_path / "bad.h5ad")


def test_prediction_has_one_answer_per_item(tmp_path):
    write_prediction(tmp_path / "pred.h5ad", ["a", "b"], ["binds", None], dataset_id="toy", method_id="m")
    pred, uns = read_items(tmp_path / "pred.h5ad")
    assert pred["answer"].tolist() == ["binds", ""]
    assert uns == {"dataset_id": "toy", "method_id": "m"}
    with pytest.raises(ValueError, match="1 answers for 2 items"):
        write_prediction(tmp_path / "short.h5ad", ["a", "b"], ["binds"], dataset_id="toy", method_id="m")


def test_score_keeps_values_per_item_values_and_extras(tmp_path):
    write_score(tmp_path / "score.h5ad", dataset_id="toy", method_id="m", values={"accuracy": 0.5, "macro_f1": float("nan")},
                per_item=pd.DataFrame({"accuracy": [1, 0]}, index=["a", "b"]), extra_uns={"n_items": 2})
    adata = ad.read_h5ad(tmp_path / "score.h5ad")
    assert list(adata.uns["metric_ids"]) == ["accuracy", "macro_f1"]
    assert adata.uns["metric_values"][0] == 0.5 and np.isnan(adata.uns["metric_values"][1])
    assert adata.uns["n_items"] == 2 and adata.obs["accuracy"].tolist() == [1.0, 0.0]
    write_score(tmp_path / "empty.h5ad", dataset_id="toy", method_id="m", values={"similarity": 0.0})
    assert ad.read_h5ad(tmp_path / "empty.h5ad").n_obs == 0
