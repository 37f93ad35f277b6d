"""perturbation_prediction_lib.svd_compression: the SVD basis of the targets."""

from __future__ import annotations

import numpy as np
from perturbation_prediction_lib.svd_compression import svd_basis


def test_svd_basis_reconstructs_low_rank_targets():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(30, 3)) @ rng.normal(size=(3, 50)) + rng.normal(size=50)
    mean, comps = svd_basis(values, 3)
    np.testing.assert_allclose(mean, values.mean(axis=0))
    assert comps.shape == (3, 50)
    np.testing.assert_allclose(comps @ comps.T, np.eye(3), atol=1e-10)
    np.testing.assert_allclose(mean + ((values - mean) @ comps.T) @ comps, values, atol=1e-8)


def test_svd_basis_keeps_between_one_and_rank_components():
    values = np.random.default_rng(1).normal(size=(5, 20))
    assert svd_basis(values, 100)[1].shape == (4, 20)  # centring leaves at most n - 1 components
    assert svd_basis(values, 0)[1].shape == (1, 20)
