"""pertsci.normalisation: log(1 + counts per 10,000), per cell, with given library sizes."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from pertsci.normalisation import normalize_log_tp10k


def test_each_cell_is_scaled_to_ten_thousand_then_logged():
    counts = np.array([[1, 3, 0], [0, 0, 0], [5, 0, 5]])
    out = normalize_log_tp10k(counts)
    assert sp.isspmatrix_csr(out) and out.dtype == np.float32
    expected = np.log1p(np.array([[2500, 7500, 0], [0, 0, 0], [5000, 0, 5000]], dtype=float))
    np.testing.assert_allclose(out.toarray(), expected, rtol=1e-6)


def test_given_library_sizes_are_used_for_a_gene_subset():
    counts = sp.csr_matrix(np.array([[2.0, 0.0], [0.0, 4.0]]))
    out = normalize_log_tp10k(counts, totals=np.array([10.0, 40.0]))
    np.testing.assert_allclose(out.toarray(), np.log1p([[2000, 0], [0, 1000]]), rtol=1e-6)
    with pytest.raises(ValueError, match="totals has shape"):
        normalize_log_tp10k(counts, totals=np.ones(3))
