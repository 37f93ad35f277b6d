"""perturbation_prediction_lib.adversarial: answers that game a metric without modelling the biology."""

from __future__ import annotations

import numpy as np
import pytest
from perturbation_prediction_lib.adversarial import de_count_prior, scaled_training_mean, sign_of_compound_mean
from perturbation_prediction_lib.rowwise_metrics import rowwise_correlations, rowwise_errors


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n_genes = 60
    shared = rng.normal(0, 1, n_genes)  # genes that respond to most compounds
    compounds = np.repeat([f"c{i}" for i in range(8)], 3)
    strength = np.repeat(rng.uniform(0.2, 2.0, 8), 3)
    values = strength[:, None] * shared[None, :] + rng.normal(0, 0.5, (compounds.size, n_genes))
    truth = np.vstack([strength[::3][:4, None] * shared[None, :] + rng.normal(0, 0.5, (4, n_genes))])
    return compounds, values, truth, np.array(["c0", "c1", "c2", "c3"])


def test_scaled_mean_keeps_correlations_and_changes_errors(data):
    compounds, values, truth, query = data
    base = scaled_training_mean(values, 4, 1.0)
    up, down = scaled_training_mean(values, 4, 4.0), scaled_training_mean(values, 4, 0.5)
    np.testing.assert_allclose(up, 4 * base)
    np.testing.assert_allclose(down, 0.5 * base)
    np.testing.assert_allclose(base[0], values.mean(axis=0))
    # Scale-free metrics cannot tell them apart; the errors can.
    correlations = [rowwise_correlations(truth, p).to_numpy() for p in (base, up, down)]
    np.testing.assert_allclose(correlations[0], correlations[1])
    np.testing.assert_allclose(correlations[0], correlations[2])
    assert rowwise_errors(truth, up)["mean_rowwise_rmse"].mean() > rowwise_errors(truth, base)["mean_rowwise_rmse"].mean()


def test_sign_of_compound_mean(data):
    compounds, values, truth, query = data
    pred = sign_of_compound_mean(compounds, values, np.append(query, "unseen"))
    magnitude = np.abs(values).mean()
    assert set(np.unique(np.abs(pred))) <= {0.0, magnitude}
    np.testing.assert_array_equal(np.sign(pred[0]), np.sign(values[compounds == "c0"].mean(axis=0)))
    np.testing.assert_array_equal(np.sign(pred[-1]), np.sign(values.mean(axis=0)))  # unseen: the overall mean
    # Direction alone already correlates with the truth here.
    assert rowwise_correlations(truth, pred[:4])["mean_rowwise_pearson"].mean() > 0.5


def test_de_count_prior(data):
    compounds, values, truth, query = data
    is_de = np.abs(values) > 1.0
    pred = de_count_prior(compounds, values, is_de, np.append(query, "unseen"))
    assert pred.shape == (5, values.shape[1])
    np.testing.assert_allclose(np.abs(pred).mean(), np.abs(values).mean())
    share = is_de.mean(axis=0)
    direction = np.sign((values * is_de).sum(axis=0))
    # Every row is the signed DE share, scaled by how many genes its compound changes.
    for row in pred:
        np.testing.assert_allclose(row, row[np.argmax(np.abs(share * direction))] / (share * direction)[
            np.argmax(np.abs(share * direction))] * share * direction)
    n_de = is_de.sum(axis=1)
    ratio = n_de[compounds == "c0"].mean() / n_de[compounds == "c1"].mean()
    np.testing.assert_allclose(np.abs(pred[0]).sum() / np.abs(pred[1]).sum(), ratio)
    np.testing.assert_allclose(np.abs(pred[4]).sum() / np.abs(pred[0]).sum(), n_de.mean() / n_de[compounds == "c0"].mean())
    with pytest.raises(ValueError, match="is_de has shape"):
        de_count_prior(compounds, values, is_de[:, :-1], query)
    # No gene ever DE: no prediction beyond zero.
    np.testing.assert_array_equal(de_count_prior(compounds, values, np.zeros_like(is_de), query), 0.0)
