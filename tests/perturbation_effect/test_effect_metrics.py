"""Per-perturbation correlations (perturbation_effect_lib.effect_metrics)."""

from __future__ import annotations

import numpy as np
import pytest
from perturbation_effect_lib import effect_metrics as em


def test_rowwise_pearson_matches_numpy_and_leaves_constant_rows_undefined():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(5, 30)), rng.normal(size=(5, 30))
    a[2] = 4.0  # a constant row
    r = em.rowwise_pearson(a, b)
    for i in (0, 1, 3, 4):
        assert r[i] == pytest.approx(np.corrcoef(a[i], b[i])[0, 1], abs=1e-12)
    assert np.isnan(r[2])
    with pytest.raises(ValueError, match="same shape"):
        em.rowwise_pearson(a, b[:, :3])


def test_the_training_mean_has_no_perturbation_specific_correlation():
    rng = np.random.default_rng(1)
    shared = rng.normal(0, 1, size=40)
    control = np.full(40, 3.0)
    train = control + shared + rng.normal(0, 0.3, size=(20, 40))
    reference = train.mean(axis=0)
    observed = control + shared + rng.normal(0, 0.3, size=(6, 40))
    # The mean computed another way differs from the reference by rounding only: still undefined.
    mean_prediction = np.tile(train[::-1].sum(axis=0) / 20, (6, 1))
    assert np.isnan(em.perturbation_specific_pearson(mean_prediction, observed, reference)).all()
    # Against control the same prediction scores high: the shared change is all it knows.
    pearson_delta = em.rowwise_pearson(mean_prediction - control, observed - control)
    assert (pearson_delta > 0.9).all()
    # The truth scores 1; a prediction that knows each perturbation's own deviation half-way scores well.
    np.testing.assert_allclose(em.perturbation_specific_pearson(observed, observed, reference), 1.0)
    partial = reference + 0.5 * (observed - reference) + rng.normal(0, 0.05, size=observed.shape)
    assert (em.perturbation_specific_pearson(partial, observed, reference) > 0.8).all()
    with pytest.raises(ValueError, match="does not match"):
        em.perturbation_specific_pearson(observed, observed, reference[:5])


def test_a_rescaled_mean_is_scored_along_the_mean_change():
    """From the reference, a scaled mean is (a - 1) times the mean change: its sign flips at a = 1."""
    rng = np.random.default_rng(2)
    control = np.zeros(30)
    reference = rng.normal(0, 1, size=30)
    observed = reference * rng.uniform(0.5, 1.5, size=(4, 1)) + rng.normal(0, 0.1, size=(4, 30))
    shrunk = em.perturbation_specific_pearson(np.tile(control + 0.5 * reference, (4, 1)), observed, reference)
    inflated = em.perturbation_specific_pearson(np.tile(control + 2.0 * reference, (4, 1)), observed, reference)
    np.testing.assert_allclose(shrunk, -inflated)
    np.testing.assert_allclose(inflated, em.rowwise_pearson(np.tile(reference, (4, 1)), observed - reference))


def test_top_expressed_genes_are_the_highest_control_means_in_stable_order():
    control = np.array([1.0, 5.0, 3.0, 5.0, 0.0])
    np.testing.assert_array_equal(em.top_expressed_genes(control, 3), [1, 3, 2])
    np.testing.assert_array_equal(em.top_expressed_genes(control, 10), [1, 3, 2, 0, 4])
    with pytest.raises(ValueError, match="non-empty"):
        em.top_expressed_genes(np.array([]))
