"""pertsci.wilcoxon: the rank-sum test equals scipy's Mann-Whitney U pair by pair."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from pertsci.wilcoxon import _BlockReader, _consecutive_blocks, order_codes, rank_sum_test


def scipy_reference(X, groups, tested):
    X = (X.toarray() if sp.issparse(X) else np.asarray(X)).astype(np.float64)
    ctrl = X[groups == "ctrl"]
    U = np.zeros((len(tested), X.shape[1]))
    P = np.zeros_like(U)
    for i, g in enumerate(tested):
        res = stats.mannwhitneyu(X[groups == g], ctrl, method="asymptotic", use_continuity=True,
                                 alternative="two-sided", axis=0)
        U[i], P[i] = res.statistic, np.nan_to_num(res.pvalue, nan=1.0)
    return U, P


def screen(seed=0, n=700, genes=30, kind="counts"):
    rng = np.random.default_rng(seed)
    groups = rng.choice(["ctrl", "A", "B", "C", "D", "E"], size=n, p=[0.4, 0.12, 0.12, 0.12, 0.12, 0.12])
    counts = rng.negative_binomial(2, 0.6, size=(n, genes)).astype(float)
    counts[groups == "A", :6] += rng.poisson(3, size=((groups == "A").sum(), 6))
    counts[groups == "B", 6:9] = 0  # knockdown: ties at zero
    if kind == "counts":
        return counts, groups
    if kind == "lognorm":
        return np.log1p(counts / np.maximum(counts.sum(1, keepdims=True), 1) * 1e4).astype(np.float32), groups
    if kind == "negative":
        x = counts - 1.5
        x[rng.random(x.shape) < 0.4] = 0
        return x, groups
    if kind == "continuous":
        x = rng.normal(size=(n, genes)) * (rng.random((n, genes)) < 0.3)
        x[groups == "A", :6] += 3.0
        return x, groups
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["counts", "lognorm", "negative", "continuous"])
@pytest.mark.parametrize("fmt", ["csr", "csc", "dense"])
def test_pvalues_equal_scipy(kind, fmt):
    X, groups = screen(kind=kind)
    M = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "dense": np.asarray}[fmt](X)
    res = rank_sum_test(M, groups, "ctrl")
    U, P = scipy_reference(X, groups, list(res.groups))
    np.testing.assert_allclose(res.statistic, U, rtol=0, atol=1e-9)
    np.testing.assert_allclose(res.pvalue, P, rtol=1e-9, atol=0)
    assert res.pvalue_adj.shape == P.shape
    # The strongest effect (A on the first genes) is found.
    assert res.pvalue[list(res.groups).index("A"), :6].max() < 1e-3


def test_small_blocks_and_group_order_and_ignored_cells():
    X, groups = screen(kind="lognorm")
    groups = groups.astype(object)
    groups[:25] = "unused"  # cells of a group not asked for are ignored
    res = rank_sum_test(sp.csr_matrix(X), groups, "ctrl", group_order=["C", "A"], block_genes=3,
                        genes=[f"g{j}" for j in range(X.shape[1])])
    assert list(res.groups) == ["C", "A"] and res.genes[0] == "g0"
    U, P = scipy_reference(X, np.asarray(groups), ["C", "A"])
    np.testing.assert_allclose(res.pvalue, P, rtol=1e-9)
    frame = res.to_frame()
    assert len(frame) == 2 * X.shape[1] and set(frame.columns) >= {"group", "gene", "pvalue", "pvalue_adj", "mean_diff"}


def test_mean_difference_and_direction():
    X, groups = screen(kind="counts")
    res = rank_sum_test(sp.csr_matrix(X), groups, "ctrl")
    i = list(res.groups).index("A")
    expected = X[groups == "A"].mean(0) - X[groups == "ctrl"].mean(0)
    np.testing.assert_allclose(res.mean_diff[i], expected, rtol=1e-12)
    assert (res.zscore[i, :6] > 0).all()


def test_constant_gene_has_p_one():
    X = np.zeros((50, 2))
    X[:, 1] = 3.0
    groups = np.array(["ctrl"] * 25 + ["A"] * 25)
    for M in (X, sp.csr_matrix(X)):
        res = rank_sum_test(M, groups, "ctrl")
        np.testing.assert_array_equal(res.pvalue, [[1.0, 1.0]])


def test_bad_input():
    X, groups = screen(kind="counts")
    with pytest.raises(ValueError, match="control"):
        rank_sum_test(X, groups, "missing-control")
    with pytest.raises(ValueError, match="labels"):
        rank_sum_test(X, groups[:-1], "ctrl")
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        rank_sum_test(bad, groups, "ctrl")
    with pytest.raises(ValueError, match="NaN"):
        rank_sum_test(sp.csr_matrix(bad), groups, "ctrl", n_threads=2)
    with pytest.raises(ValueError, match="n_threads"):
        rank_sum_test(X, groups, "ctrl", n_threads=0)


def test_order_codes_preserve_order_and_ties():
    for values in (np.array([3.0, -1.0, 0.0, -0.0, 2.5, 2.5, 1e-300]), np.array([0.1, 0.2, -5.0, 0.1], dtype=np.float32)):
        codes, zero = order_codes(values)
        order = np.argsort(values, kind="stable")
        assert np.all(np.diff(codes[order].astype(np.int64)) >= 0)
        assert np.array_equal(codes[:, None] == codes[None, :], values[:, None] == values[None, :])
        assert np.all((codes > zero) == (values > 0)) and np.all((codes < zero) == (values < 0))


def test_order_codes_of_positive_float32_are_their_bits():
    values = np.array([0.5, 3.0, 1e-30, 0.5, 7.25], dtype=np.float32)
    codes, zero = order_codes(values)
    assert np.shares_memory(codes, values)  # no pass over the values but the check
    assert np.array_equal(codes[:, None] < codes[None, :], values[:, None] < values[None, :])
    assert np.array_equal(codes[:, None] == codes[None, :], values[:, None] == values[None, :])
    assert (codes > zero).all()


def test_a_block_read_from_csr_equals_its_column_slice():
    X, groups = screen(kind="negative", genes=23)
    M = sp.csr_matrix(X)
    codes = np.arange(X.shape[0]) % 5
    reader = _BlockReader(M, codes.astype(np.uint8))
    assert reader.by_crossings  # sorted CSR: read through the crossing table, not sliced
    bounds = [0, 4, 5, 11, 23]
    reader.prepare(bounds, max_values=37)  # chunks of a few rows
    for start, stop in zip(bounds, bounds[1:]):
        values, gene, group, negative = reader.read(start, stop)
        block = M[:, start:stop].tocoo()
        assert negative == bool((block.data < 0).any())
        want = sorted(zip(block.col, block.data, codes[block.row]))
        assert sorted(zip(gene, values, group)) == want


@pytest.mark.parametrize("fmt", ["csr", "csr-unsorted", "csc", "coo", "dense"])
def test_blocks_of_any_size_give_the_same_result(fmt):
    X, groups = screen(kind="negative", genes=40)
    groups = groups.astype(object)
    groups[::7] = "left-out"  # cells of no group asked for: sorted under a code of their own, then ignored
    tested = ["A", "B", "C", "D", "E"]
    M = {"csr": sp.csr_matrix, "csr-unsorted": unsorted_csr, "csc": sp.csc_matrix, "coo": sp.coo_matrix,
         "dense": np.asarray}[fmt](X)
    whole = rank_sum_test(M, groups, "ctrl", group_order=tested, block_genes=10_000, max_block_values=2**40)
    small = rank_sum_test(M, groups, "ctrl", group_order=tested, block_genes=7, max_block_values=50)
    threaded = rank_sum_test(M, groups, "ctrl", group_order=tested, block_genes=9, n_threads=3)
    for name in ("statistic", "pvalue", "zscore", "mean_diff"):
        np.testing.assert_array_equal(getattr(small, name), getattr(whole, name))
        np.testing.assert_array_equal(getattr(threaded, name), getattr(whole, name))
    _, P = scipy_reference(X, np.asarray(groups), tested)
    np.testing.assert_allclose(whole.pvalue, P, rtol=1e-9)


def unsorted_csr(X):
    """A CSR matrix whose rows list their columns in reverse (valid, but not sorted)."""
    M = sp.csr_matrix(X)
    for r in range(M.shape[0]):
        a, b = M.indptr[r], M.indptr[r + 1]
        M.indices[a:b], M.data[a:b] = M.indices[a:b][::-1].copy(), M.data[a:b][::-1].copy()
    M.has_sorted_indices = False
    assert not _BlockReader(M, np.zeros(M.shape[0], dtype=np.uint8)).by_crossings  # read by slicing
    return M


def test_explicit_zeros_count_as_zeros():
    X, groups = screen(kind="counts")
    M = sp.csr_matrix(X)
    with_zeros = M.copy()
    with_zeros.data[::3] = 0  # stored zeros, not removed from the structure
    dense = with_zeros.toarray()
    res = rank_sum_test(with_zeros, groups, "ctrl")
    _, P = scipy_reference(dense, groups, list(res.groups))
    np.testing.assert_allclose(res.pvalue, P, rtol=1e-9)


def test_consecutive_blocks_respect_both_limits():
    per_gene = np.array([5, 5, 5, 50, 1, 1, 1, 1, 1, 0, 3])
    blocks = _consecutive_blocks(per_gene, 3, 12)
    assert blocks[0][0] == 0 and blocks[-1][1] == per_gene.size
    assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
    for start, stop in blocks:
        assert 1 <= stop - start <= 3
        # only a gene too large on its own may exceed the value limit, alone in its block
        assert per_gene[start:stop].sum() <= 12 or stop - start == 1
    assert (3, 4) in blocks


def test_memory_above_the_data_is_bounded_by_the_block_size():
    rng = np.random.default_rng(1)
    n_cells, n_genes = 20_000, 200
    X = sp.random(n_cells, n_genes, density=0.3, format="csr", dtype=np.float32, random_state=rng)
    X.data = np.round(X.data * 20).astype(np.float32)  # ties, as counts have
    groups = np.where(rng.random(n_cells) < 0.2, "ctrl", rng.choice([f"P{k}" for k in range(20)], n_cells))
    data_bytes = X.data.nbytes + X.indices.nbytes
    tracemalloc.start()
    try:
        rank_sum_test(X, groups, "ctrl", max_block_values=2**14)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # A copy of X (as a CSC conversion of the whole matrix makes) would reach data_bytes alone.
    assert peak < 0.5 * data_bytes, (peak, data_bytes)
