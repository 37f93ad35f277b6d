"""pertsci.edger: filterByExpr and TMM factors from first principles (tests/pertsci/test_limma_voom.py compares them with R)."""

from __future__ import annotations

import numpy as np

from pertsci import edger


def test_filter_by_expr_threshold():
    """A gene needs min_count reads per median library in as many samples as the smallest group."""
    counts = np.array([[20, 20, 20, 0, 0, 0], [20, 20, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=float)
    counts = np.vstack([counts, np.full((1, 6), 1e6)])  # library sizes ~1e6: 10 reads = 10 CPM
    keep = edger.filter_by_expr(counts, group=["a", "a", "a", "b", "b", "b"])
    assert keep.tolist() == [True, False, False, True]


def test_filter_by_expr_smallest_group_from_the_design():
    """With a design, the smallest group is 1 / max leverage: the same as giving the groups."""
    rng = np.random.default_rng(0)
    counts = rng.poisson(rng.gamma(0.5, 40, (200, 1)) * np.ones((1, 7)))
    group = ["a", "a", "a", "b", "b", "c", "c"]
    design = np.column_stack([[g == lv for g in group] for lv in "abc"]).astype(float)
    np.testing.assert_allclose(edger.hat_values(design), [1 / 3] * 3 + [1 / 2] * 4)
    np.testing.assert_array_equal(edger.filter_by_expr(counts, design), edger.filter_by_expr(counts, group=group))


def test_tmm_factors_undo_a_composition_shift():
    """Samples differing by depth only get factor 1; a sample whose few genes soak up reads is scaled down."""
    rng = np.random.default_rng(1)
    base = rng.gamma(2, 50, 500)
    counts = np.column_stack([rng.poisson(base * d) for d in (1.0, 2.0, 0.5)]).astype(float)
    nf = edger.calc_norm_factors(counts)
    assert abs(np.prod(nf) - 1) < 1e-12  # factors multiply to one, as edgeR scales them
    np.testing.assert_allclose(nf, 1.0, atol=0.02)
    shifted = counts.copy()
    shifted[:25, 2] *= 40  # 5% of genes take most of the third library
    nf_shifted = edger.calc_norm_factors(shifted)
    assert nf_shifted[2] < 0.5 * nf_shifted[0]
    np.testing.assert_array_equal(edger.calc_norm_factors(counts, method="none"), np.ones(3))
