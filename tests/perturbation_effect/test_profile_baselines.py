"""The no-change, mean and additive baselines (perturbation_effect_lib.profile_baselines)."""

from __future__ import annotations

import numpy as np
import pytest
from perturbation_effect_lib import profile_baselines


def test_no_change_predicts_the_control_profile_for_every_test_perturbation():
    control = np.array([1.0, 0.5, 0.0])
    pred = profile_baselines.no_change_prediction(control, 3)
    assert pred.shape == (3, 3) and pred.dtype == np.float64
    np.testing.assert_array_equal(pred, np.tile(control, (3, 1)))


def test_mean_and_additive_baselines():
    control = np.array([1.0, 1.0, 1.0])
    Y = np.array([[2.0, 1.0, 1.0], [1.0, 3.0, 1.0], [2.0, 2.0, 2.0]])
    train = ["A", "B", "A+C"]
    np.testing.assert_array_equal(profile_baselines.mean_prediction(Y, 2), np.tile(Y.mean(axis=0), (2, 1)))
    pred = profile_baselines.additive_prediction(Y, train, ["A+B", "C", "B+D"], control)
    np.testing.assert_array_equal(pred[0], [2.0, 3.0, 1.0])  # control + (1, 0, 0) + (0, 2, 0)
    mean_single = np.array([0.5, 1.0, 0.0])
    np.testing.assert_array_equal(pred[1], control + mean_single)  # C has no single perturbation
    np.testing.assert_array_equal(pred[2], control + np.array([0.0, 2.0, 0.0]) + mean_single)


def test_additive_needs_single_perturbations():
    with pytest.raises(ValueError, match="single perturbations"):
        profile_baselines.additive_prediction(np.ones((1, 2)), ["A+B"], ["A"], np.zeros(2))
