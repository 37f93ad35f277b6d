"""Normalisation of single-cell counts: log(1 + counts per 10,000) per cell."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def normalize_log_tp10k(counts, target_sum: float = 1e4, totals: np.ndarray | None = None) -> sp.csr_matrix:
    """log(1 + counts per 10,000) of each cell (appendix A.2), as float32 CSR.

    ``totals`` gives each cell's library size when ``counts`` holds a subset of the genes
    (default: the row sums). Cells with no count stay zero.
    """
    X = sp.csr_matrix(counts, dtype=np.float64, copy=True)
    totals = np.asarray(X.sum(axis=1)).ravel() if totals is None else np.asarray(totals, dtype=np.float64)
    if totals.shape != (X.shape[0],):
        raise ValueError(f"totals has shape {totals.shape}, expected ({X.shape[0]},)")
    scale = np.divide(target_sum, totals, out=np.zeros_like(totals), where=totals > 0)
    X.data *= np.repeat(scale, np.diff(X.indptr))
    np.log1p(X.data, out=X.data)
    X.eliminate_zeros()
    return X.astype(np.float32)
