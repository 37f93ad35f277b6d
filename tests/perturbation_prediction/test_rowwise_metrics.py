"""perturbation_prediction_lib.rowwise_metrics: the row-wise errors and correlations, and the score file."""

from __future__ import annotations

from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from perturbation_prediction_lib.rowwise_metrics import average_ranks, rowwise_correlations, rowwise_errors, score_adata
from scipy.stats import rankdata, spearmanr

DATA = Path(__file__).resolve().parents[2] / "resources_test" / "perturbation_prediction" / "op3_synthetic"


@pytest.fixture(scope="module")
def truth() -> np.ndarray:
    return np.asarray(ad.read_h5ad(DATA / "de_test.h5ad").layers["clipped_sign_log10_pval"])


def test_metrics_of_perfect_and_zero_predictions(truth):
    y = truth
    err = rowwise_errors(y, y)
    assert (err.to_numpy() == 0).all()
    cor = rowwise_correlations(y, y)
    np.testing.assert_allclose(cor.to_numpy(), 1.0)
    # Zeros: undefined correlations count as 0, errors are the rows' norms.
    cor0 = rowwise_correlations(y, np.zeros_like(y))
    assert (cor0.to_numpy() == 0).all()
    np.testing.assert_allclose(rowwise_errors(y, np.zeros_like(y))["mean_rowwise_rmse"], np.sqrt(np.mean(y**2, axis=1)))


def test_metrics_match_direct_computation(truth):
    y = truth
    rng = np.random.default_rng(0)
    yhat = 0.5 * y + rng.normal(0, 1, y.shape)
    yhat[0] = np.round(yhat[0])  # ties in the ranks
    err = rowwise_errors(y, yhat)
    cor = rowwise_correlations(y, yhat)
    for i in range(y.shape[0]):
        assert err["mean_rowwise_rmse"].iloc[i] == pytest.approx(np.sqrt(np.mean((y[i] - yhat[i]) ** 2)))
        assert err["mean_rowwise_mae"].iloc[i] == pytest.approx(np.mean(np.abs(y[i] - yhat[i])))
        assert cor["mean_rowwise_pearson"].iloc[i] == pytest.approx(np.corrcoef(y[i], yhat[i])[0, 1])
        assert cor["mean_rowwise_spearman"].iloc[i] == pytest.approx(spearmanr(y[i], yhat[i]).statistic)
        cos = y[i] @ yhat[i] / np.linalg.norm(y[i]) / np.linalg.norm(yhat[i])
        assert cor["mean_rowwise_cosine"].iloc[i] == pytest.approx(cos)


def test_score_file_holds_means_and_rows():
    per_row = pd.DataFrame({"mean_rowwise_rmse": [1.0, 3.0], "mean_rowwise_mae": [0.5, 0.0]})
    de_test = ad.AnnData(uns={"dataset_id": "d"})
    pred = ad.AnnData(uns={"method_id": "m"})
    score = score_adata(per_row, de_test, pred)
    assert list(score.obs_names) == ["0", "1"]
    assert score.uns["metric_ids"] == ["mean_rowwise_rmse", "mean_rowwise_mae"]
    assert score.uns["metric_values"] == [2.0, 0.25]
    assert (score.uns["dataset_id"], score.uns["method_id"]) == ("d", "m")


@pytest.mark.parametrize("kind", ["continuous", "few values", "some rows tied", "one column", "no rows", "integers"])
def test_average_ranks_equal_scipy_rankdata_exactly(kind):
    rng = np.random.default_rng(3)
    values = {
        "continuous": rng.normal(size=(20, 300)),
        "few values": rng.integers(0, 4, size=(20, 50)).astype(float),
        "some rows tied": np.vstack([rng.normal(size=(3, 40)), np.round(rng.normal(size=(3, 40)))]),
        "one column": rng.normal(size=(4, 1)),
        "no rows": np.empty((0, 5)),
        "integers": rng.integers(0, 3, size=(6, 9)),
    }[kind]
    ranks = average_ranks(values)
    assert ranks.dtype == np.float64
    np.testing.assert_array_equal(ranks, rankdata(values, axis=1))


def test_average_ranks_propagate_nan_by_row():
    values = np.array([[3.0, 1.0, 1.0], [np.nan, 2.0, 1.0]])
    ranks = average_ranks(values)
    np.testing.assert_array_equal(ranks[0], [3.0, 1.5, 1.5])
    assert np.isnan(ranks[1]).all()
