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
    ``gene | value code | group``, and a block of genes' keys is sorted at once, in place:
    sorting plain integers is faster than an ``argsort`` of floats, and one sort orders the
    block by gene, by value and, among equal values, by group. Everything after the sort is a
    few passes of numpy over a chunk of keys that fits in the CPU cache, all genes of the chunk
    together: there is no loop over genes, and no numpy call is short enough for its overhead,
    or for the GIL it holds, to count.

    Threads (``n_threads``) test whole blocks side by side; reading a block and every pass over
    it run in numpy or scipy code that releases the GIL.

How it stays small
    The matrix is never copied whole. Genes are taken in blocks of at most ``max_block_values``
    stored values. A CSR matrix (as stored in h5ad) is read by a table of where each row enters
    each block, counted in one pass over its column indices, so that reading a block gathers
    its own values only, and does not scan the whole matrix as slicing its columns would. The
    memory above the data is therefore about 32 bytes per value of a block and thread plus
    arrays of shape ``(n_groups, n_genes)``: on a screen of 100,000 cells x 2,000 genes (57
    million stored values) about 100 MB with one thread and 145 MB with two, where converting the
    whole matrix to columns took about 760 MB. Cells of groups not tested are sorted with the
    others under a code of their own and then ignored, rather than copying the rows that remain.

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

import contextlib
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
    if values.dtype == np.float32 and values.size and values.min() > 0:
        # Positive float32 numbers order as their bit patterns do (and NaN is never > 0).
        return values.view(np.uint32), 0
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
    """Integer code per cell: 0..G-1 for tested groups, G for the control, G+1 for cells left out."""
    labels = pd.Series(np.asarray(groups)).astype(str)
    if order is None:
        tested = pd.Index(pd.unique(labels[labels != control]))
    else:
        tested = pd.Index([str(g) for g in order])
        if control in set(tested):
            raise ValueError(f"the control group {control!r} cannot be one of the groups tested")
    codes = tested.get_indexer(labels)
    codes[codes < 0] = len(tested) + 1
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
    max_block_values: int = 2**21,
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
        Most genes taken at once.
    max_block_values : int
        Most stored values in such a block of genes (a block holds one gene at least). A block
        costs about 32 bytes per stored value while it is read (a dense matrix: its values' size
        more), so the memory used above the data is about ``32 * max_block_values`` bytes per
        thread plus a few arrays of shape ``(n_groups, n_genes)``.
    n_threads : int
        Threads, each testing a block of genes at a time (default 1). The results do not depend
        on it: each gene is computed alone, the same way.

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
    Sparse matrices other than CSR and CSC are converted to CSR first (a copy). X is never
    copied whole: a CSR matrix with sorted indices is read one block of genes at a time, each
    read touching only the block's own values.
    """
    n_cells, n_genes = X.shape
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1, got {n_threads}")
    if len(groups) != n_cells:
        raise ValueError(f"groups has {len(groups)} labels but X has {n_cells} cells")
    codes, tested = _group_codes(groups, control, group_order)
    n_groups = len(tested)
    ctrl = n_groups
    # One code more than the groups and the control: the cells left out, sorted with the others
    # and then ignored (subsetting the rows of X up front would copy the whole matrix).
    n_codes = n_groups + 2
    n_per = np.bincount(codes, minlength=n_codes).astype(np.int64)
    n_ctrl = int(n_per[ctrl])
    if n_ctrl == 0:
        raise ValueError(f"no cell is labelled with the control {control!r}")
    empty = [str(g) for g, n in zip(tested, n_per[:n_groups]) if n == 0]
    if empty:
        raise ValueError(f"groups without cells: {empty[:5]}")
    gene_index = pd.Index([str(g) for g in genes]) if genes is not None else pd.Index([str(j) for j in range(n_genes)])
    if len(gene_index) != n_genes:
        raise ValueError(f"{len(gene_index)} gene names for {n_genes} columns")

    reader = _BlockReader(X, codes.astype(np.min_scalar_type(n_codes - 1)))
    tallies = _Tallies(n_genes, n_codes, ctrl)
    # A block's genes take the bits of a key above the value's 32 and the group's.
    block_genes = min(int(block_genes), 2 ** (32 - tallies.gbits))
    blocks = _consecutive_blocks(reader.per_gene, block_genes, max_block_values)

    def test_block(block: tuple[int, int]) -> None:
        start, stop = block
        tallies.add(start, stop, *reader.read(start, stop))

    # Blocks are independent and each writes its own genes' rows only. Each thread holds one
    # block; its numpy calls run over a block's values at once, so the GIL is rarely held.
    with ThreadPoolExecutor(max_workers=n_threads) if n_threads > 1 else contextlib.nullcontext() as pool:
        map_ = pool.map if pool is not None else map
        try:
            reader.prepare([start for start, _ in blocks] + [n_genes], max_block_values, map_)
            for done in map_(test_block, blocks):
                assert done is None
        except BaseException:
            if pool is not None:  # a block failed (e.g. NaN): the blocks not started are not run
                pool.shutdown(cancel_futures=True)
            raise
    return tallies.result(n_per, tested, gene_index)


class _BlockReader:
    """Reads blocks of genes of X as (values, gene in block, group) triplets, stored zeros left out.

    A CSR matrix with sorted indices (the usual layout of an h5ad file) is read through a table
    of where each row crosses each block's first column, counted in one pass over the column
    indices (:meth:`prepare`): a block's read then touches its own values only. Other layouts
    are sliced.
    """

    #: Most stored values counted at once by :meth:`prepare`.
    chunk_values = 2**18

    def __init__(self, X, cell_codes: np.ndarray):
        self.cell_codes = cell_codes
        if sp.issparse(X):
            if X.dtype.kind not in "fiu":
                raise ValueError(f"X has dtype {X.dtype}; expected numbers")
            self.M = X if X.format in ("csr", "csc") else sp.csr_matrix(X)
            self.per_gene = _stored_per_gene(self.M)
        else:
            self.M = np.asarray(X)
            if self.M.dtype.kind not in "fiu":
                raise ValueError(f"X has dtype {self.M.dtype}; expected numbers")
            self.per_gene = np.full(self.M.shape[1], self.M.shape[0], dtype=np.int64)
        self.by_crossings = sp.issparse(self.M) and self.M.format == "csr" and self.M.has_sorted_indices

    def prepare(self, bounds: list[int], max_values: int, map_=map) -> None:
        """Count, per row, the stored values before each bound (blocks' first columns, then the last).

        Rows are counted in chunks of at most ``max_values`` values (and :attr:`chunk_values`), run
        by ``map_`` (e.g. a thread pool's ``map``).
        """
        if not self.by_crossings:
            return
        M = self.M
        n_rows, n_blocks = M.shape[0], len(bounds) - 1
        self.bound_index = {bound: b for b, bound in enumerate(bounds)}
        # A row holds at most one value per column: its counts fit the smallest type for n_genes.
        self.before = np.empty((n_rows, n_blocks + 1), dtype=np.min_scalar_type(M.shape[1]))
        self.before[:, 0] = 0
        block_of_column = np.repeat(np.arange(n_blocks), np.diff(bounds)).astype(np.min_scalar_type(n_blocks))
        row_lengths = np.diff(M.indptr)

        def count(rows: tuple[int, int]) -> None:
            r0, r1 = rows
            cell = np.repeat(np.arange(r1 - r0, dtype=np.int64) * n_blocks, row_lengths[r0:r1])
            cell += block_of_column[M.indices[M.indptr[r0] : M.indptr[r1]]]
            counts = np.bincount(cell, minlength=(r1 - r0) * n_blocks).reshape(r1 - r0, n_blocks)
            self.before[r0:r1, 1:] = np.cumsum(counts, axis=1)

        # Chunks of rows small enough that their counts, rows x blocks, stay within a chunk's size.
        chunk = min(self.chunk_values, max_values)
        chunks = _consecutive_blocks(row_lengths, max(1, chunk // n_blocks), chunk)
        for done in map_(count, chunks):
            assert done is None

    def read(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
        """``(values, gene, group, negative)`` of the block's stored non-zero values.

        ``gene`` counts from ``start``; ``negative`` tells whether any value is below zero.
        """
        M = self.M
        if self.by_crossings:
            first, last = self.before[:, self.bound_index[start]], self.before[:, self.bound_index[stop]]
            rows = last.astype(np.int64) - first
            positions = _run_positions(M.indptr[:-1] + first, rows)
            # take, not fancy indexing: the positions are known to be in range (mode="clip" skips the
            # check), which makes it nearly twice as fast.
            values = np.take(M.data, positions, mode="clip")
            gene = np.take(M.indices, positions, mode="clip")
            del positions
            gene -= start
            group = np.repeat(self.cell_codes, rows)
        elif sp.issparse(M) and M.format == "csc":
            block = M[:, start:stop]
            values, gene = block.data, np.repeat(np.arange(stop - start), np.diff(block.indptr))
            group = self.cell_codes[block.indices]
        else:
            block = M[:, start:stop] if sp.issparse(M) else sp.csr_matrix(M[:, start:stop])
            values, gene = block.data, block.indices
            group = np.repeat(self.cell_codes, np.diff(block.indptr))
        lowest = values.min() if values.size else 1
        if np.isnan(lowest):
            raise ValueError("X contains NaN")
        if lowest <= 0:
            stored = values != 0
            if not stored.all():  # explicit zeros are zeros like the implicit ones
                values, gene, group = values[stored], gene[stored], group[stored]
        return values, gene, group, bool(lowest < 0)


def _run_positions(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[r], starts[r] + 1, ..., starts[r] + lengths[r] - 1`` of every run, in order."""
    total = int(lengths.sum())
    positions = np.ones(total, dtype=np.int64)
    present = lengths > 0
    first = np.cumsum(lengths)[present] - lengths[present]  # where each run begins in the output
    run_starts = starts[present]
    if run_starts.size:
        # A running sum of ones, with a jump at each run's first position to that run's start.
        positions[first[1:]] = run_starts[1:] - (run_starts[:-1] + lengths[present][:-1] - 1)
        positions[0] = run_starts[0]
        np.cumsum(positions, out=positions)
    return positions


class _Tallies:
    """Per gene and group sums over the stored values, filled block by block, then the test.

    Arrays of shape ``(n_genes, n_codes)``: ``U`` the part of each group's U statistic that its
    stored values give against the control's stored values; ``T`` the change of the tie term of
    the union (group, control) that the group's stored values cause (for the control, the tie
    term of its own stored values); ``nnz`` and ``neg`` the stored and the negative values;
    ``sums`` the sum of the values. Implicit zeros are added in closed form in :meth:`result`.
    """

    #: Most values whose keys are worked on at once: their temporaries stay in the CPU cache.
    chunk_values = 2**17

    def __init__(self, n_genes: int, n_codes: int, ctrl: int):
        self.n_codes, self.ctrl = n_codes, ctrl
        self.gbits = max(1, int(n_codes - 1).bit_length())
        if self.gbits > 31:
            raise ValueError(f"{n_codes} groups: at most 2**31 can be tested")
        self.U, self.T, self.nnz, self.neg, self.sums = (np.zeros((n_genes, n_codes)) for _ in range(5))

    def add(self, start: int, stop: int, values: np.ndarray, gene: np.ndarray, group: np.ndarray,
            negative: bool) -> None:
        """Tally the stored values of genes ``start`` to ``stop`` (``gene`` counts from ``start``).

        ``negative``: whether any value is below zero (found by the read; else none is looked for).
        """
        n_codes = self.n_codes
        n_block = stop - start
        rows = slice(start, stop)
        cell = gene.astype(np.int64) * n_codes
        cell += group
        self.sums[rows] = np.bincount(cell, weights=values, minlength=n_block * n_codes).reshape(n_block, n_codes)
        self.nnz[rows] = np.bincount(cell, minlength=n_block * n_codes).reshape(n_block, n_codes)
        if negative:
            below = values < 0
            self.neg[rows] = np.bincount(cell[below], minlength=n_block * n_codes).reshape(n_block, n_codes)
        del cell
        # One uint64 key per stored value: gene, then order code, then group, from the high bits
        # down, so that one sort orders the block by gene, by value within a gene, and by group
        # among equal values (every tested group before the control).
        # Stored values are never zero, so where zero falls among the codes is not needed: the
        # negative values were counted above.
        value_codes, _ = order_codes(values)
        del values
        keys = gene.astype(np.uint64)
        keys <<= np.uint64(32)
        keys |= value_codes
        del value_codes, gene
        keys <<= np.uint64(self.gbits)
        keys |= group
        del group
        keys.sort()
        per_gene = self.nnz[rows].sum(axis=1).astype(np.int64)
        ends = np.cumsum(per_gene)
        for first, last in _consecutive_blocks(per_gene, n_block, self.chunk_values):
            a, b = int(ends[first] - per_gene[first]), int(ends[last - 1])
            if a == b:
                continue
            U, T = _tally_keys(keys[a:b], self.gbits, n_codes, self.ctrl, first, last - first)
            self.U[start + first : start + last] = U
            self.T[start + first : start + last] = T

    def result(self, n_per: np.ndarray, tested: pd.Index, gene_index: pd.Index) -> RankSumResult:
        """The statistics, with the implicit zeros added: U, the tie-corrected z-score and p-value."""
        n_groups, ctrl = len(tested), self.ctrl
        n_ctrl = int(n_per[ctrl])
        means = self.sums[:, : n_groups + 1] / n_per[None, : n_groups + 1]
        mean_diff = (means[:, :n_groups] - means[:, [ctrl]]).T

        # Implicit zeros. A zero of group k is above the control's negative values and tied with
        # the control's zeros; a positive value of group k is above every zero of the control.
        # The zero run adds its own tie term.
        nnz, neg = self.nnz[:, :n_groups], self.neg[:, :n_groups]
        z_ctrl = (n_ctrl - self.nnz[:, ctrl])[:, None]
        z_grp = n_per[None, :n_groups] - nnz
        U1 = self.U[:, :n_groups] + (nnz - neg) * z_ctrl + z_grp * (self.neg[:, [ctrl]] + 0.5 * z_ctrl)
        t_ctrl0 = z_ctrl**3 - z_ctrl
        t0 = z_grp + z_ctrl
        tie = self.T[:, [ctrl]] + t_ctrl0 + self.T[:, :n_groups] + (t0**3 - t0 - t_ctrl0)

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


def _consecutive_blocks(per_item: np.ndarray, max_items: int, max_values: int) -> list[tuple[int, int]]:
    """Consecutive ``(start, stop)`` ranges of at most ``max_items`` items (genes, rows) and ``max_values`` values.

    An item holding more than ``max_values`` values on its own makes a block of one.
    """
    max_items, max_values = max(1, int(max_items)), max(1, int(max_values))
    ends = np.cumsum(per_item)
    blocks = []
    start, n_items = 0, per_item.size
    while start < n_items:
        before = ends[start - 1] if start else 0
        fits = int(np.searchsorted(ends, before + max_values, side="right"))
        stop = min(start + max_items, max(fits, start + 1), n_items)
        blocks.append((start, stop))
        start = stop
    return blocks


def _tally_keys(keys: np.ndarray, gbits: int, n_codes: int, ctrl: int, gene0: int, n_genes: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """U and tie-term rows (see :class:`_Tallies`) of genes ``gene0...`` from their sorted keys.

    The work is done on *entries*, the runs of equal keys (one value of one gene in one group),
    and on *runs*, the entries of one value of one gene: within a run the groups come in code
    order, so every tested group's entry precedes the control's.
    """
    n = keys.size
    new_entry = np.empty(n, dtype=bool)
    new_entry[0] = True
    np.not_equal(keys[1:], keys[:-1], out=new_entry[1:])
    starts = np.flatnonzero(new_entry)
    del new_entry
    entry = keys[starts]
    size = _lengths(starts, n, dtype=np.float64)
    del starts
    grp = (entry & np.uint64((1 << gbits) - 1)).view(np.int64)
    value = entry >> np.uint64(gbits)  # with the gene above: a run never spans two genes
    gene = (value >> np.uint64(32)).view(np.int64)
    gene -= gene0
    cell = gene * n_codes
    cell += grp

    new_run = np.empty(entry.size, dtype=bool)
    new_run[0] = True
    np.not_equal(value[1:], value[:-1], out=new_run[1:])
    del entry, value
    run_starts = np.flatnonzero(new_run)
    del new_run
    run = np.repeat(np.arange(run_starts.size), _lengths(run_starts, size.size))
    run_gene = gene[run_starts]
    is_ctrl = np.flatnonzero(grp == ctrl)
    c_run = np.zeros(run_starts.size)  # control values in each run
    c_run[run[is_ctrl]] = size[is_ctrl]
    # Each value of group k counts the control values below it (in its gene) and half of those
    # tied with it.
    ctrl_per_gene = np.bincount(run_gene, weights=c_run, minlength=n_genes)
    won = np.cumsum(c_run)
    won -= 0.5 * c_run
    won -= (np.cumsum(ctrl_per_gene) - ctrl_per_gene)[run_gene]
    won = won[run]
    won *= size
    bins = n_genes * n_codes
    U = np.bincount(cell, weights=won, minlength=bins).reshape(n_genes, n_codes)
    del won
    # Tie terms: an entry of s values of group k in a run holding c control values changes the
    # union's tie term by (c+s)^3 - (c+s) - (c^3 - c) = s^3 - s + 3 s c (c + s); the control's
    # own runs give c^3 - c. Most entries hold one value, for which this is 3 c (c + 1), a
    # property of the run: the few larger entries are corrected after. (Products, not powers:
    # float ** 3 calls pow, ten times slower.)
    change = (3 * c_run * (c_run + 1))[run]
    larger = np.flatnonzero(size > 1)
    s, c = size[larger], c_run[run[larger]]
    change[larger] = s * (s * s - 1 + 3 * c * (c + s))
    T = np.bincount(cell, weights=change, minlength=bins).reshape(n_genes, n_codes)
    T[:, ctrl] = np.bincount(run_gene, weights=c_run * (c_run * c_run - 1), minlength=n_genes)
    return U, T


def _lengths(starts: np.ndarray, total: int, dtype=np.int64) -> np.ndarray:
    """Lengths of the consecutive runs that begin at ``starts`` and together span ``total``."""
    lengths = np.empty(starts.size, dtype=dtype)
    np.subtract(starts[1:], starts[:-1], out=lengths[:-1])
    lengths[-1] = total - starts[-1]
    return lengths
