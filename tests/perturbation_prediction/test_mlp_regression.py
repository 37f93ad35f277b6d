"""perturbation_prediction_lib.mlp_regression: the neural methods' encoded problem and MLP trainer."""

from __future__ import annotations

from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
from perturbation_prediction_lib.de_files import row_keys
from perturbation_prediction_lib.mlp_regression import encoded_problem, train_mlp
from perturbation_prediction_lib.svd_compression import svd_basis
from perturbation_prediction_lib.target_encoding import loo_encoding_features

DATA = Path(__file__).resolve().parents[2] / "resources_test" / "perturbation_prediction" / "op3_synthetic"


def test_encoded_problem():
    de_train = ad.read_h5ad(DATA / "de_train.h5ad")
    id_map = pd.read_csv(DATA / "id_map.csv")
    y = np.asarray(de_train.layers["clipped_sign_log10_pval"], dtype=float)
    train, query = row_keys(de_train.obs), row_keys(id_map)
    problem = encoded_problem(y, train, query, n_components=4, n_targets=6)
    mean, comps = svd_basis(y, 4)
    x_tr, x_q = loo_encoding_features(train, query, (y - mean) @ comps.T)
    np.testing.assert_array_equal(problem.x_train, x_tr)
    np.testing.assert_array_equal(problem.x_query, x_q)
    assert problem.basis.shape == (6, y.shape[1]) and problem.targets.shape == (len(train), 6)
    # The targets are the rows' scores: mapped back to genes, they are the rows' projection.
    np.testing.assert_allclose(problem.to_genes(problem.targets),
                               mean + (y - mean) @ problem.basis.T @ problem.basis)


def test_train_mlp_fits_and_is_deterministic():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 4))
    y = np.column_stack([x[:, 0] - 2 * x[:, 1], x[:, 2] ** 2])
    kw = dict(hidden=32, layers=2, dropout=0.0, epochs=150, lr=1e-2, seed=3, threads=1)
    predict = train_mlp(x, y, **kw)
    fitted = predict(x)
    assert fitted.shape == y.shape
    assert np.mean((fitted - y) ** 2) < 0.2 * np.mean((y - y.mean(axis=0)) ** 2)
    np.testing.assert_array_equal(train_mlp(x, y, **kw)(x), fitted)


def test_train_mlp_sample_weights_decide_the_fit():
    """A row with no weight does not count: the network follows the weighted rows."""
    x = np.r_[np.zeros((40, 1)), np.zeros((40, 1))]
    y = np.r_[np.ones((40, 1)), -np.ones((40, 1))]
    w = np.r_[np.ones(40), np.zeros(40)]
    predict = train_mlp(x, y, hidden=8, layers=1, dropout=0.0, epochs=100, lr=1e-2, sample_weight=w, seed=0, threads=1)
    assert abs(predict(np.zeros((1, 1)))[0, 0] - 1.0) < 0.1
