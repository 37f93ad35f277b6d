"""The fixture task's h5ad reader and writer (tiny_lib.h5ad_files) agree with anndata both ways."""

from __future__ import annotations

import sys

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from project_paths import FIXTURES

sys.path.insert(0, str(FIXTURES / "project" / "src" / "tiny"))
from tiny_lib import h5ad_files  # noqa: E402


def test_what_it_writes_anndata_reads_with_the_same_values(tmp_path):
    path = tmp_path / "written.h5ad"
    X = np.arange(12, dtype=float).reshape(3, 4)
    uns = {"dataset_id": "syn", "metric_ids": ["rmse", "mae"], "metric_values": [0.5, 0.25], "n": 3,
           "nested": {"note": "x"}}
    h5ad_files.write(path, ["r0", "r1", "r2"], ["g0", "g1", "g2", "g3"], obs={"group": np.array(["a", "b", "a"]),
                     "rmse": [1.0, 2.0, 3.0]}, X=X, layers={"prediction": X * 2}, uns=uns)
    adata = ad.read_h5ad(path)
    assert list(adata.obs_names) == ["r0", "r1", "r2"] and list(adata.var_names) == ["g0", "g1", "g2", "g3"]
    assert list(adata.obs.columns) == ["group", "rmse"]
    assert list(adata.obs["group"]) == ["a", "b", "a"] and list(adata.obs["rmse"]) == [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(adata.X, X)
    np.testing.assert_array_equal(adata.layers["prediction"], X * 2)
    assert adata.uns["dataset_id"] == "syn" and list(adata.uns["metric_ids"]) == ["rmse", "mae"]
    assert list(adata.uns["metric_values"]) == [0.5, 0.25] and adata.uns["n"] == 3
    assert adata.uns["nested"] == {"note": "x"}


def test_what_anndata_writes_it_reads_with_the_same_values(tmp_path):
    path = tmp_path / "anndata.h5ad"
    obs = pd.DataFrame({"group": pd.Categorical(["b", "a", "b"]), "value": [0.1, 0.2, 0.3]}, index=["r0", "r1", "r2"])
    X = np.ones((3, 2))
    ad.AnnData(X=X, obs=obs, var=pd.DataFrame(index=["g0", "g1"]), layers={"truth": X * 3},
               uns={"dataset_id": "syn", "seen": np.array(["p", "q"])}).write_h5ad(path)
    table = h5ad_files.read(path)
    assert table.shape == (3, 2) and list(table.obs_names) == ["r0", "r1", "r2"]
    assert list(table.obs["group"]) == ["b", "a", "b"] and list(table.obs["value"]) == [0.1, 0.2, 0.3]
    np.testing.assert_array_equal(table.X, X)
    np.testing.assert_array_equal(table.layers["truth"], X * 3)
    assert table.uns["dataset_id"] == "syn" and list(table.uns["seen"]) == ["p", "q"]
    np.testing.assert_array_equal(table.positions(np.array(["r2", "r0"])), [2, 0])
    with pytest.raises(ValueError, match="row 'r9' is not in the table"):
        table.positions(np.array(["r9"]))


def test_an_encoding_the_fixture_never_writes_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "sparse.h5ad"
    ad.AnnData(X=sp.csr_matrix(np.eye(2)), obs=pd.DataFrame(index=["r0", "r1"])).write_h5ad(path)
    with pytest.raises(ValueError, match=f"{path}: /X is encoded as 'csr_matrix'"):
        h5ad_files.read(path)
    path = tmp_path / "missing.h5ad"
    obs = pd.DataFrame({"group": pd.Categorical(["a", None])}, index=["r0", "r1"])
    ad.AnnData(obs=obs).write_h5ad(path)
    with pytest.raises(ValueError, match="/obs/group has missing values"):
        h5ad_files.read(path)
