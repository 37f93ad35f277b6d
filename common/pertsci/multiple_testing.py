"""Multiple-testing correction: Benjamini-Hochberg adjusted p-values."""

from __future__ import annotations

import numpy as np


def benjamini_hochberg(pvalues: np.ndarray, axis: int = -1) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (false discovery rate), along ``axis``.

    Parameters
    ----------
    pvalues : numpy.ndarray
        P-values in [0, 1]; NaN entries stay NaN and do not count as tests.
    axis : int
        The axis holding one family of tests.

    Returns
    -------
    numpy.ndarray
        ``min(1, min_{j >= i} p_(j) m / j)`` for the i-th smallest p-value of each family of ``m``
        tests, in the original order; equal to ``statsmodels``' ``fdr_bh``.
    """
    p = np.moveaxis(np.asarray(pvalues, dtype=np.float64), axis, -1)
    flat = p.reshape(-1, p.shape[-1]) if p.ndim else p.reshape(1, 1)
    out = np.full_like(flat, np.nan)
    for r in range(flat.shape[0]):
        row = flat[r]
        ok = np.flatnonzero(~np.isnan(row))
        m = ok.size
        if m == 0:
            continue
        order = ok[np.argsort(row[ok], kind="stable")]
        scaled = row[order] * m / np.arange(1, m + 1)
        # A running minimum from the largest p-value down makes the adjusted values monotone.
        adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
        out[r, order] = np.minimum(adjusted, 1.0)
    return np.moveaxis(out.reshape(p.shape), -1, axis)
