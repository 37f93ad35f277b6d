"""Trivial and adversarial control answers (perturbation_effect_lib.control_predictions)."""

from __future__ import annotations

import numpy as np
import pytest
from perturbation_effect_lib import control_predictions as cp

CONTROL = np.array([1.0, 2.0, 3.0, 4.0])
Y = CONTROL + np.array([[1.0, -2.0, 0.0, 0.5], [3.0, -2.0, 0.2, -0.1], [2.0, -5.0, 0.1, 0.2]])


def test_random_training_profiles_are_training_rows_and_seeded():
    pred = cp.random_training_profiles(Y, 7, seed=3)
    assert pred.shape == (7, 4)
    assert all(any(np.array_equal(row, y) for y in Y) for row in pred)
    np.testing.assert_array_equal(pred, cp.random_training_profiles(Y, 7, seed=3))
    assert not np.array_equal(pred, cp.random_training_profiles(Y, 7, seed=4))
    with pytest.raises(ValueError, match="no training"):
        cp.random_training_profiles(np.zeros((0, 4)), 2, seed=0)


def test_loo_scaled_mean_minimises_the_leave_one_out_error_of_the_training_rows():
    rng = np.random.default_rng(1)
    shared = rng.normal(0, 1, size=8)
    Y_train = 2.0 + shared * rng.uniform(0.2, 1.8, size=(12, 1)) + rng.normal(0, 0.5, size=(12, 8))
    control = np.full(8, 2.0)
    pred, factor = cp.loo_scaled_mean(Y_train, control, 3)
    changes = Y_train - control
    assert pred.shape == (3, 8)
    np.testing.assert_allclose(pred, np.tile(control + factor * changes.mean(axis=0), (3, 1)))
    # The closed form equals the explicit leave-one-out least squares ...
    others = np.stack([np.delete(changes, i, axis=0).mean(axis=0) for i in range(len(changes))])
    explicit = (others * changes).sum() / (others**2).sum()
    assert factor == pytest.approx(explicit, rel=1e-12)

    def loo_sse(a):
        return ((a * others - changes) ** 2).sum()

    assert loo_sse(factor) < min(loo_sse(factor * 0.9), loo_sse(factor * 1.1), loo_sse(1.0))
    # ... and noisy effects around a shared change shrink the mean towards control.
    assert 0 < factor < 1


def test_loo_scaled_mean_needs_two_training_perturbations():
    with pytest.raises(ValueError, match="at least two"):
        cp.loo_scaled_mean(Y[:1], CONTROL, 2)
    _, factor = cp.loo_scaled_mean(np.tile(CONTROL, (3, 1)), CONTROL, 2)
    assert factor == 0.0  # no change at all: nothing to scale


def test_sign_only_keeps_only_the_direction():
    pred = cp.sign_only(Y, CONTROL, 2)
    mean_change = (Y - CONTROL).mean(axis=0)
    np.testing.assert_allclose(pred - CONTROL, np.tile(np.sign(mean_change) * np.abs(mean_change).mean(), (2, 1)))


def test_de_count_prior_ranks_genes_by_how_often_they_change_strongly():
    rng = np.random.default_rng(0)
    changes = rng.normal(0, 0.1, size=(40, 6))
    changes[:, 0] -= 2.0  # gene 0 goes down in every perturbation
    changes[:20, 1] += 2.0  # gene 1 goes up in half of them
    pred = cp.de_count_prior(changes + 1.0, np.ones(6), 3) - 1.0
    assert pred.shape == (3, 6)
    assert pred[0, 0] < 0 < pred[0, 1] and abs(pred[0, 0]) > abs(pred[0, 1])
    np.testing.assert_array_equal(pred[0, 2:], 0.0)  # never among the strongest changes
    with pytest.raises(ValueError, match="quantile"):
        cp.de_count_prior(changes, np.zeros(6), 1, quantile=1.0)
