"""Reading the training file and writing the prediction file (perturbation_effect_lib.prediction_files)."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp
from perturbation_effect_lib import prediction_files


def test_training_profiles_are_dense_float64():
    X = np.array([[1, 0], [0, 2]], dtype=np.float32)
    for matrix in (X, sp.csr_matrix(X)):
        Y = prediction_files.training_profiles(ad.AnnData(X=matrix))
        assert isinstance(Y, np.ndarray) and Y.dtype == np.float64
        np.testing.assert_array_equal(Y, X)


def test_lsft_fraction_comes_from_the_dataset_unless_asked_for():
    train = ad.AnnData(X=np.ones((1, 1)), uns={"lsft_fraction": 0.05})
    assert prediction_files.lsft_fraction(train, None) == 0.05
    assert prediction_files.lsft_fraction(train, 0.1) == 0.1
    assert prediction_files.lsft_fraction(train, 0.0) == 0.0
    assert prediction_files.lsft_fraction(ad.AnnData(X=np.ones((1, 1))), None) == 0.0


def test_write_prediction(tmp_path):
    obs = pd.DataFrame({"hardness_top1pct": [0.5, np.nan]}, index=["A", "B+C"])
    var = pd.DataFrame(index=["g1", "g2", "g3"])
    prediction = np.arange(6, dtype=float).reshape(2, 3)
    prediction_files.write_prediction(tmp_path / "p.h5ad", prediction, obs=obs, var=var, dataset_id="d", method_id="m")
    back = ad.read_h5ad(tmp_path / "p.h5ad")
    np.testing.assert_array_equal(back.layers["prediction"], prediction)
    assert back.X is None
    pd.testing.assert_frame_equal(back.obs, obs)
    assert list(back.var_names) == ["g1", "g2", "g3"]
    assert dict(back.uns) == {"dataset_id": "d", "method_id": "m"}
