"""pertsci.multiple_testing: Benjamini-Hochberg equals scipy's, along any axis, with NaN kept out."""

from __future__ import annotations

import numpy as np
from scipy import stats

from pertsci.multiple_testing import benjamini_hochberg


def test_benjamini_hochberg_equals_scipy():
    rng = np.random.default_rng(3)
    p = rng.random((4, 50)) ** 3
    adj = benjamini_hochberg(p, axis=1)
    for row, expected in zip(adj, p):
        np.testing.assert_allclose(row, stats.false_discovery_control(expected, method="bh"), rtol=1e-12)
    with_nan = p[0].copy()
    with_nan[[3, 7]] = np.nan
    out = benjamini_hochberg(with_nan)
    assert np.isnan(out[[3, 7]]).all()
    keep = ~np.isnan(with_nan)
    np.testing.assert_allclose(out[keep], stats.false_discovery_control(with_nan[keep], method="bh"))
