"""Differential expression: Wilcoxon rank-sum tests of many groups against one control group.

:func:`rank_sum_test` compares every perturbation (group of cells) with the control cells, gene by
gene, as ``scipy.stats.mannwhitneyu(group, control, method="asymptotic", use_continuity=True,
alternative="two-sided")`` does one pair at a time: the Mann–Whitney U statistic, its normal
approximation with the tie correction and the continuity correction, and the two-sided p-value.
:func:`pertsci.multiple_testing.benjamini_hochberg` adjusts its p-values for the false discovery rate.

How it is fast
    The test of group *k* against the control for gene *j* needs, for each cell of group *k*, how
    many control values are smaller and how many equal (U counts those), and the sizes of the
    tie groups in the union of the two samples (the tie correction). Both come from one sort of
    the gene's values over *all* cells: walking the sorted values, the number of control values
    below each run of equal values is a running sum, and a group's ties with the control are the
    control count of the run it falls in. So every group is tested against the control from a
    single sort per gene rather than one sort per (group, gene).

    Single-cell matrices are mostly zeros. Zeros are never sorted: for each gene the zeros of the
    control and of each group are counted, and their contribution to U and to the tie term is
    added in closed form. Only the stored (non-zero) values are sorted.

    Values are first mapped to unsigned 32-bit codes that preserve order and equality exactly
    (the bit pattern of a float32, made monotone; or, for data that float32 cannot hold exactly,
    the index among the sorted distinct values). Each stored value becomes one ``uint64`` key,
    ``value code | group``, and a gene's keys are sorted in place with ``numpy.sort``: sorting
    plain integers is faster than an ``argsort`` of floats, and one gene's keys fit in the CPU
    cache, so the handful of ``bincount`` and ``cumsum`` passes that follow are cheap. Genes are
    visited in a Python loop; its overhead (a few microseconds per numpy call) is small next to
    the sorting for screens of thousands of cells.

How it stays small
    The matrix is never copied whole. Genes are taken in blocks of at most ``max_block_values``
    stored values; only the block is converted to columns (CSC), and each gene's keys are built
    from its own values. The memory above the data is therefore a block (about 16 bytes per
    stored value while it is converted) plus arrays of shape ``(n_groups, n_genes)``: on a screen
    of 100,000 cells x 2,000 genes (57 million stored values) about 130 MB, where converting the
    whole matrix took about 760 MB. Cells of groups not tested are dropped gene by gene rather
    than by copying the rows that remain.

Examples
--------
>>> import numpy as np, scipy.sparse as sp
>>> rng = np.random.default_rng(0)
>>> X = sp.random(300, 20, density=0.3, random_state=0, format="csr", dtype=np.float32)
>>> groups = np.repeat(["ctrl", "A", "B"], 100)
>>> res = rank_sum_test(X, groups, control="ctrl")
>>> res.pvalue.shape
(2, 20)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy import special

from pertsci.multiple_testing import benjamini_hochberg

__all__ = ["RankSumResult", "rank_sum_test", "order_codes"]


@dataclasses.dataclass
class RankSumResult:
    """Results of :func:`rank_sum_test`; arrays have shape ``(n_groups, n_genes)``.

    Attributes
    ----------
    groups : pandas.Index
        The groups tested (every group but the control, in order of first appearance unless
        given).
    genes : pandas.Index
        The genes (columns of the matrix).
    statistic : numpy.ndarray
        Mann–Whitney U of the group's cells against the control's (``U1`` of
        ``mannwhitneyu(group, control)``).
    zscore : numpy.ndarray
        The standardised statistic, signed: positive when the group's values tend to be larger.
    pvalue : numpy.ndarray
        Two-sided asymptotic p-value with tie and continuity corrections.
    pvalue_adj : numpy.ndarray
        Benjamini–Hochberg adjusted p-values, over the genes of each group (as scanpy does).
    mean_diff : numpy.ndarray
        Mean of the group minus mean of the control.
    n_cells : numpy.ndarray
        Cells per group; ``n_control`` cells in the control.
    n_control : int
    """

    groups: pd.Index
    genes: pd.Index
    statistic: np.ndarray
    zscore: np.ndarray
    pvalue: np.ndarray
    pvalue_adj: np.ndarray
    mean_diff: np.ndarray
    n_cells: np.ndarray
    n_control: int

    def to_frame(self) -> pd.DataFrame:
        """Long table: one row per (group, gene) with every statistic."""
        n_groups, n_genes = self.pvalue.shape
        return pd.DataFrame({
            "group": np.repeat(np.asarray(self.groups), n_genes),
            "gene": np.tile(np.asarray(self.genes), n_groups),
            "statistic": self.statistic.ravel(),
            "zscore": self.zscore.ravel(),
            "pvalue": self.pvalue.ravel(),
            "pvalue_adj": self.pvalue_adj.ravel(),
            "mean_diff": self.mean_diff.ravel(),
        })


def order_codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Map values to ``uint32`` codes with the same order and the same ties.

    Parameters
    ----------
    values : numpy.ndarray
        Real numbers (any float or integer dtype), without NaN.

    Returns
    -------
    codes : numpy.ndarray
        ``uint32``; ``codes[a] < codes[b]`` exactly when ``values[a] < values[b]``.
    zero_code : int
        The code of 0.0: its own code if present, else a code between its neighbours'.

    Notes
    -----
    Values a float32 holds exactly use their float32 bit pattern with the sign handled (negative
    numbers have all bits flipped, positive ones the sign bit set), which is O(n). Others are
    replaced by their index among the sorted distinct values (one sort). Both are exact: no two
    different values share a code.
    """
    values = np.asarray(values)
    if values.dtype.kind == "f" and np.isnan(values).any():
        raise ValueError("values contain NaN, which has no rank")
    as32 = values.astype(np.float32, copy=False)
    if values.dtype == np.float32 or bool(np.array_equal(as32, values)):
        bits = np.ascontiguousarray(as32).view(np.uint32)
        negative = (bits >> np.uint32(31)).astype(bool)
        codes = np.where(negative, ~bits, bits | np.uint32(0x80000000))
        # -0.0 and +0.0 compare equal; give them one code.
        codes[as32 == 0] = np.uint32(0x80000000)
        return codes.astype(np.uint32, copy=False), 0x80000000
    distinct, inverse = np.unique(values, return_inverse=True)
    if distinct.size >= 2**31:
        raise ValueError("more than 2**31 distinct values")
    # Odd codes for the values present, so that 0.0 gets a code of its own even when absent.
    where = int(np.searchsorted(distinct, 0.0))
    zero_code = 2 * where + 1 if where < distinct.size and distinct[where] == 0 else 2 * where
    return (2 * inverse.ravel() + 1).astype(np.uint32), zero_code


def _group_codes(groups: Sequence, control: str, order: Sequence | None) -> tuple[np.ndarray, pd.Index]:
    """Integer code per cell: 0..G-1 for tested groups, G for the control, -1 for cells left out."""
    labels = pd.Series(np.asarray(groups)).astype(str)
    if order is None:
        tested = pd.Index(pd.unique(labels[labels != control]))
    else:
        tested = pd.Index([str(g) for g in order])
        if control in set(tested):
            raise ValueError(f"the control group {control!r} cannot be one of the groups tested")
    codes = tested.get_indexer(labels)
    codes[(labels == control).to_numpy()] = len(tested)
    return codes.astype(np.int64), tested


def rank_sum_test(
    X,
    groups: Sequence,
    control: str,
    *,
    genes: Sequence[str] | None = None,
    group_order: Sequence[str] | None = None,
    block_genes: int = 256,
    max_block_values: int = 2**22,
    n_threads: int = 1,
) -> RankSumResult:
    """Wilcoxon rank-sum (Mann–Whitney U) test of each group against the control, per gene.

    Parameters
    ----------
    X : array or sparse matrix, shape (n_cells, n_genes)
        Expression values (e.g. log(TP10k+1)); any real values, no NaN. Sparse matrices are
        handled without densifying: implicit zeros are counted, not sorted.
    groups : sequence of str, length n_cells
        Group label of each cell.
    control : str
        Label of the reference cells (e.g. ``"non-targeting"``).
    genes : sequence of str, optional
        Gene names (default ``"0", "1", ...``).
    group_order : sequence of str, optional
        The groups to test, in this order (default: every non-control label, in order of first
        appearance). Cells of other groups are ignored.
    block_genes : int
        Most genes taken column by column at once.
    max_block_values : int
        Most stored values in such a block of genes (a block holds one gene at least). A block of
        a sparse matrix costs about 16 bytes per stored value while it is converted (8 bytes
        after), a block of a dense matrix its values' size: the memory used above the data is
        about ``16 * max_block_values`` bytes plus a few arrays of shape ``(n_groups, n_genes)``.
    n_threads : int
        Threads testing the genes of a block (default 1). The results do not depend on it: each
        gene is computed alone, the same way.

    Returns
    -------
    RankSumResult
        Statistics of shape ``(n_groups, n_genes)``. The p-value of group ``k`` and gene ``j``
        equals ``scipy.stats.mannwhitneyu(X[group k, j], X[control, j], method="asymptotic",
        use_continuity=True, alternative="two-sided").pvalue``; where both samples hold one value
        only (no variance) the p-value is 1, as scipy gives after clipping.

    Raises
    ------
    ValueError
        When shapes disagree, the control has no cell, X holds NaN, or ``n_threads < 1``.

    Notes
    -----
    Sparse matrices other than CSR and CSC are converted to CSR first (a copy). A CSR matrix is
    read one block of genes at a time (a column slice per block, each a pass over the stored
    values): X is never copied whole.
    """
    n_cells, n_genes = X.shape
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1, got {n_threads}")
    if len(groups) != n_cells:
        raise ValueError(f"groups has {len(groups)} labels but X has {n_cells} cells")
    codes, tested = _group_codes(groups, control, group_order)
    n_groups = len(tested)
    ctrl = n_groups
    n_per = np.bincount(codes[codes >= 0], minlength=n_groups + 1).astype(np.int64)
    n_ctrl = int(n_per[ctrl])
    if n_ctrl == 0:
        raise ValueError(f"no cell is labelled with the control {control!r}")
    empty = [str(g) for g, n in zip(tested, n_per[:n_groups]) if n == 0]
    if empty:
        raise ValueError(f"groups without cells: {empty[:5]}")
    gene_index = pd.Index([str(g) for g in genes]) if genes is not None else pd.Index([str(j) for j in range(n_genes)])
    if len(gene_index) != n_genes:
        raise ValueError(f"{len(gene_index)} gene names for {n_genes} columns")

    n_codes = n_groups + 1
    U = np.zeros((n_genes, n_codes))
    T = np.zeros((n_genes, n_codes))
    nnz = np.zeros((n_genes, n_codes))
    sums = np.zeros((n_genes, n_codes))
    ctrl_neg = np.zeros(n_genes)  # control values below zero, per gene
    gbits = max(1, int(n_codes - 1).bit_length())
    # Cells left out keep code -1 and are dropped gene by gene: subsetting the rows of X up front
    # would copy the whole matrix.
    keep_all = bool((codes >= 0).all())

    def test_gene(j: int, values: np.ndarray, cell_codes: np.ndarray) -> None:
        # One uint64 key per stored value: its order code in the high bits, its group in the low
        # bits, so that sorting the keys sorts by value and puts equal values of a group together.
        # Built per gene, the keys and their temporaries stay small and in the CPU cache.
        if not keep_all:
            taking_part = cell_codes >= 0
            values, cell_codes = values[taking_part], cell_codes[taking_part]
        if values.size == 0:
            return
        sums[j] += np.bincount(cell_codes, weights=values, minlength=n_codes)
        value_codes, zero_code = order_codes(values)
        keys = value_codes.astype(np.uint64)
        keys <<= np.uint64(gbits)
        keys |= cell_codes.astype(np.uint64)
        _gene(keys, gbits, n_groups, n_ctrl, zero_code, U[j], T[j], nnz[j], ctrl_neg, j)

    # Genes are independent and each writes its own rows only; threads share the block held (so
    # the memory stays that of one block) and numpy releases the GIL in sort and most array passes.
    pool = ThreadPoolExecutor(max_workers=n_threads) if n_threads > 1 else None

    def each_gene(func, start: int, stop: int) -> None:
        if pool is None:
            for j in range(start, stop):
                func(j)
            return
        # Interleaved shares of the block: neighbouring genes cost about the same.
        shares = [range(start + t, stop, n_threads) for t in range(n_threads)]
        for done in [pool.submit(lambda genes: [func(j) for j in genes], share) for share in shares]:
            done.result()

    try:
        if sp.issparse(X):
            if X.dtype.kind not in "fiu":
                raise ValueError(f"X has dtype {X.dtype}; expected numbers")
            # Only one block of genes is ever held column by column (CSC): converting all of X at
            # once would double the memory of the data.
            M = X if X.format in ("csr", "csc") else sp.csr_matrix(X)
            for start, stop in _gene_blocks(_stored_per_gene(M), block_genes, max_block_values):
                block = M[:, start:stop]
                block = block if block.format == "csc" else block.tocsc()
                if block.dtype.kind == "f" and np.isnan(block.data).any():
                    raise ValueError("X contains NaN")

                def sparse_gene(j: int, block=block, start=start) -> None:
                    a, b = block.indptr[j - start], block.indptr[j - start + 1]
                    values = block.data[a:b]
                    cells = codes[block.indices[a:b]]
                    stored = values != 0  # explicit zeros are zeros like the implicit ones
                    if not stored.all():
                        values, cells = values[stored], cells[stored]
                    test_gene(j, values, cells)

                each_gene(sparse_gene, start, stop)
                del block, sparse_gene
        else:
            dense = np.asarray(X)
            if dense.dtype.kind not in "fiu":
                raise ValueError(f"X has dtype {dense.dtype}; expected numbers")
            per_gene = np.full(n_genes, n_cells, dtype=np.int64)
            for start, stop in _gene_blocks(per_gene, block_genes, max_block_values):
                # Genes x cells, so that a gene's values are contiguous.
                block = np.ascontiguousarray(dense[:, start:stop].T)
                if block.dtype.kind == "f" and np.isnan(block).any():
                    raise ValueError("X contains NaN")

                def dense_gene(j: int, block=block, start=start) -> None:
                    # Dense: every value is stored, zeros included, so there are no implicit zeros.
                    test_gene(j, block[j - start], codes)

                each_gene(dense_gene, start, stop)
                del block, dense_gene
    finally:
        if pool is not None:
            pool.shutdown()

    means = sums / n_per[None, :]
    mean_diff = (means[:, :n_groups] - means[:, [ctrl]]).T

    # Implicit zeros, in closed form. A zero of group k is above the control's negative values
    # and tied with the control's zeros; the zero run adds its own tie term.
    z_ctrl = n_ctrl - nnz[:, ctrl]
    z_grp = n_per[None, :n_groups] - nnz[:, :n_groups]
    U1 = U[:, :n_groups] + z_grp * (ctrl_neg[:, None] + 0.5 * z_ctrl[:, None])
    t_ctrl0 = z_ctrl**3 - z_ctrl
    t0 = z_grp + z_ctrl[:, None]
    tie = T[:, [ctrl]] + t_ctrl0[:, None] + T[:, :n_groups] + (t0**3 - t0 - t_ctrl0[:, None])

    n1 = n_per[None, :n_groups].astype(np.float64)
    n2 = float(n_ctrl)
    n = n1 + n2
    mu = n1 * n2 / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.sqrt(n1 * n2 / 12 * ((n + 1) - tie / (n * (n - 1))))
        U_max = np.maximum(U1, n1 * n2 - U1)
        z_abs = (U_max - mu - 0.5) / sigma
        pvalue = np.clip(2 * special.ndtr(-z_abs), 0.0, 1.0)
        zscore = np.where(sigma > 0, (U1 - mu) / sigma, 0.0)
    pvalue = np.where(np.isnan(pvalue), 1.0, pvalue).T
    adj = benjamini_hochberg(pvalue, axis=1)
    return RankSumResult(groups=tested, genes=gene_index, statistic=U1.T.copy(), zscore=zscore.T.copy(),
                         pvalue=pvalue, pvalue_adj=adj, mean_diff=mean_diff, n_cells=n_per[:n_groups].copy(),
                         n_control=n_ctrl)


def _stored_per_gene(M) -> np.ndarray:
    """Stored values per column of a CSR or CSC matrix, without a temporary the size of X."""
    if M.format == "csc":
        return np.diff(M.indptr).astype(np.int64)
    counts = np.zeros(M.shape[1], dtype=np.int64)
    chunk = 2**18  # bincount casts its input to intp: count a slice of the column indices at a time
    for start in range(0, M.indices.size, chunk):
        counts += np.bincount(M.indices[start : start + chunk], minlength=M.shape[1])
    return counts


def _gene_blocks(per_gene: np.ndarray, max_genes: int, max_values: int) -> list[tuple[int, int]]:
    """Consecutive ``(start, stop)`` gene ranges of at most ``max_genes`` genes and ``max_values`` values.

    A gene holding more than ``max_values`` values on its own makes a block of one.
    """
    max_genes, max_values = max(1, int(max_genes)), max(1, int(max_values))
    ends = np.cumsum(per_gene)
    blocks = []
    start, n_genes = 0, per_gene.size
    while start < n_genes:
        before = ends[start - 1] if start else 0
        fits = int(np.searchsorted(ends, before + max_values, side="right"))
        stop = min(start + max_genes, max(fits, start + 1), n_genes)
        blocks.append((start, stop))
        start = stop
    return blocks


def _gene(keys: np.ndarray, gbits: int, n_groups: int, n_ctrl: int, zero_code: int,
          U: np.ndarray, T: np.ndarray, nnz: np.ndarray, ctrl_neg: np.ndarray, j: int) -> None:
    """Fill one gene's row of U, tie terms and stored-value counts from its stored values.

    ``keys`` (sorted here, in place) pack each stored value's order code and group. ``U[k]`` gets
    the part of group k's U that its stored values give; ``T[k]`` (k < control) the change of the
    tie term of the union (k, control) that they cause and ``T[control]`` the tie term of the
    control's stored values; implicit zeros are left to the caller.
    """
    ctrl = n_groups
    n_codes = n_groups + 1
    n = keys.size
    keys.sort()
    grp = (keys & np.uint64((1 << gbits) - 1)).view(np.int64)
    vkey = keys >> np.uint64(gbits)
    counts = np.bincount(grp, minlength=n_codes)
    nnz += counts
    z_ctrl = n_ctrl - counts[ctrl]  # the control's implicit zeros

    new_run = np.empty(n, dtype=bool)
    np.not_equal(vkey[1:], vkey[:-1], out=new_run[1:])
    new_run[0] = False  # so that the runs are numbered from 0
    run = np.cumsum(new_run)
    new_run[0] = True
    n_runs = int(run[-1]) + 1
    is_ctrl = grp == ctrl
    c_run = np.bincount(run[is_ctrl], minlength=n_runs).astype(np.float64)
    # Per run: control values strictly below it, plus half of those tied with it.
    w_run = np.cumsum(c_run)
    w_run -= 0.5 * c_run
    # Values sort by code, so the positive ones (above every implicit zero of the control) and the
    # negative ones form the two ends of the sorted keys.
    first_pos = int(np.searchsorted(vkey, np.uint64(zero_code), side="right"))
    first_nonneg = int(np.searchsorted(vkey, np.uint64(zero_code), side="left"))
    ctrl_neg[j] = np.count_nonzero(is_ctrl[:first_nonneg])
    U += np.bincount(grp, weights=w_run[run], minlength=n_codes)
    U += z_ctrl * np.bincount(grp[first_pos:], minlength=n_codes)

    # Tie terms. Only values in runs of two or more can tie. A run holding g values of group k and
    # c of the control changes the union's tie term by (c+g)^3 - (c+g) - (c^3 - c).
    tied = ~new_run
    tied[:-1] |= ~new_run[1:]
    if not tied.any():
        return
    t_keys = keys[tied]
    t_run = run[tied]
    t_grp = grp[tied]
    c_tied = c_run[t_run]
    first_of_run = np.empty(t_run.size, dtype=bool)
    first_of_run[0] = True
    np.not_equal(t_run[1:], t_run[:-1], out=first_of_run[1:])
    c_first = c_tied[first_of_run]
    T[ctrl] += np.sum(c_first**3 - c_first)
    new_cell = np.empty(t_keys.size, dtype=bool)
    new_cell[0] = True
    np.not_equal(t_keys[1:], t_keys[:-1], out=new_cell[1:])
    starts = np.flatnonzero(new_cell)
    size = np.diff(np.append(starts, t_keys.size)).astype(np.float64)
    grp_s = t_grp[starts]
    keep = grp_s != ctrl
    c = c_tied[starts][keep]
    t = c + size[keep]
    T += np.bincount(grp_s[keep], weights=t**3 - t - (c**3 - c), minlength=n_codes)
