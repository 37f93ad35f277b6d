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


def test_best_scaled_mean_minimises_the_squared_error():
    observed = CONTROL + np.array([[4.0, -6.0, 0.3, 0.6], [2.0, -3.0, 0.1, 0.2]])
    pred, factor = cp.best_scaled_mean(Y, CONTROL, observed)
    mean_change = (Y - CONTROL).mean(axis=0)
    np.testing.assert_allclose(pred[0], CONTROL + factor * mean_change)

    def sse(a):
        return (((CONTROL + a * mean_change) - observed) ** 2).sum()

    assert sse(factor) < min(sse(factor * 0.9), sse(factor * 1.1), sse(1.0))


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
