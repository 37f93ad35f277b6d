"""Resampling statistics for comparing methods on per-item scores.

A benchmark produces, for every method, one value per item (a perturbation, a
cell line, a dataset...). This module turns such values into uncertainty
statements that do not assume normality:

* :func:`bootstrap_ci` / :func:`bootstrap_ci_matrix`: percentile bootstrap
  confidence intervals of a location statistic, resampling items.
* :func:`paired_permutation_test`: sign-flip permutation test of a mean paired
  difference.
* :func:`regression_with_ci`: least-squares slope, intercept and Pearson
  correlation with pairs-bootstrap confidence intervals.
* :func:`compare_to_best`: every method tested against the best one on the
  items they share.

Everything is seeded through :func:`numpy.random.default_rng` and vectorised
over replicates. Replicates are processed in blocks (``chunk_size``) so memory
stays bounded for many items; blocks are drawn consecutively from one
generator, and numpy's integer streams do not depend on how a draw is split,
so the block size never changes a result. The random draws are, in order:

* bootstrap: ``rng.integers(0, n, size=(n_boot, n))``, one row of item indices
  per replicate;
* permutation: ``rng.integers(0, 2, size=(n_permutations, n))``, one row of
  coin flips per permutation, mapped to signs ``2 * flip - 1``.

A plain loop drawing one row at a time therefore reproduces every result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

__all__ = ["BootstrapResult", "BootstrapMatrixResult", "PermutationResult", "RegressionResult", "bootstrap_ci",
           "bootstrap_ci_matrix", "paired_permutation_test", "regression_with_ci", "compare_to_best"]

Alternative = Literal["two-sided", "greater", "less"]
Statistic = Literal["mean", "median"]

_ALTERNATIVES = ("two-sided", "greater", "less")
_STATISTICS: dict[str, Callable[..., np.ndarray]] = {"mean": np.mean, "median": np.median}

# Largest number of array elements materialised per block of replicates
# (2**22 float64 = 32 MiB); with n items a block holds about this / n replicates.
_BLOCK_ELEMENTS = 1 << 22

# Null statistics within this fraction of mean(|d|) of the observed one count
# as ties. mean(|d|) is the largest attainable |null statistic|, so it is the
# natural scale; relative to |observed| would break down when observed is 0.
_TIE_RTOL = 1e-12


@dataclass(frozen=True)
class BootstrapResult:
    """A point estimate with a percentile bootstrap confidence interval.

    Attributes
    ----------
    estimate
        Statistic of the observed (non-missing) values.
    low, high
        Bounds of the ``1 - alpha`` percentile interval.
    n
        Number of items used.
    n_boot
        Number of bootstrap replicates drawn.
    se
        Bootstrap standard error: the standard deviation (``ddof=1``) of the statistic over the
        replicates; 0 with one item, NaN with none.
    """

    estimate: float
    low: float
    high: float
    n: int
    n_boot: int
    se: float = float("nan")


@dataclass(frozen=True)
class BootstrapMatrixResult:
    """Per-column estimates and intervals from one shared set of resamples.

    Attributes
    ----------
    estimate, low, high
        Arrays of shape ``(n_columns,)``.
    n
        Number of complete rows (items) used.
    n_boot
        Number of bootstrap replicates drawn.
    se
        Per-column bootstrap standard errors (see :class:`BootstrapResult`), or None.
    """

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n: int
    n_boot: int
    se: np.ndarray | None = None


@dataclass(frozen=True)
class PermutationResult:
    """Outcome of :func:`paired_permutation_test`.

    Attributes
    ----------
    statistic
        Observed mean of ``x - y`` over complete pairs.
    p_value
        ``(k + 1) / (n_permutations + 1)``, ``k`` the number of null
        statistics at least as extreme as the observed one.
    n
        Number of complete pairs.
    n_permutations
        Number of random sign flips drawn.
    alternative
        The alternative hypothesis tested.
    """

    statistic: float
    p_value: float
    n: int
    n_permutations: int
    alternative: str


@dataclass(frozen=True)
class RegressionResult:
    """Least-squares fit of ``y`` on ``x`` with bootstrap intervals.

    Attributes
    ----------
    slope, intercept, correlation
        Estimates with percentile intervals over the valid replicates.
    n
        Number of complete ``(x, y)`` pairs.
    n_boot
        Number of bootstrap replicates drawn.
    n_degenerate
        Replicates whose resampled ``x`` was constant; they have no slope and
        are left out of every interval. Replicates with constant ``y`` only
        (slope 0, correlation undefined) are left out of the correlation
        interval alone and are not counted here.
    """

    slope: BootstrapResult
    intercept: BootstrapResult
    correlation: BootstrapResult
    n: int
    n_boot: int
    n_degenerate: int


# ---------------------------------------------------------------------------
# input handling


def _as_1d(values, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D, got an array of shape {arr.shape}.")
    return arr


def _paired(x, y, names: tuple[str, str] = ("x", "y")) -> tuple[np.ndarray, np.ndarray]:
    x = _as_1d(x, names[0])
    y = _as_1d(y, names[1])
    if x.shape != y.shape:
        raise ValueError(
            f"`{names[0]}` and `{names[1]}` must have the same length, got {x.size} and {y.size}."
        )
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep]


def _check_count(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
    return int(value)


def _check_alpha(alpha: float) -> float:
    if not 0 < alpha < 1:
        raise ValueError(f"`alpha` must lie strictly between 0 and 1, got {alpha!r}.")
    return float(alpha)


def _check_alternative(alternative: str) -> str:
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"`alternative` must be one of {_ALTERNATIVES}, got {alternative!r}.")
    return alternative


def _block_rows(n_total: int, row_elements: int, chunk_size: int | None) -> int:
    if chunk_size is not None:
        return _check_count(chunk_size, "chunk_size")
    return max(1, min(n_total, _BLOCK_ELEMENTS // max(row_elements, 1)))


def _blocks(n_total: int, rows: int):
    for start in range(0, n_total, rows):
        yield min(rows, n_total - start)


def _replicates(n: int, n_boot: int, width: int, row_elements: int, seed: int | None, chunk_size: int | None,
                statistic_of: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``(n_boot, width)`` replicates: ``statistic_of(indices)`` of resamples of ``n`` items, block by block."""
    rng = np.random.default_rng(seed)
    replicates = np.empty((n_boot, width))
    start = 0
    for size in _blocks(n_boot, _block_rows(n_boot, row_elements, chunk_size)):
        replicates[start : start + size] = statistic_of(rng.integers(0, n, size=(size, n)))
        start += size
    return replicates


def _percentile_interval(replicates: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bounds along axis 0, ignoring NaN replicates (all NaN -> NaN)."""
    q = [100 * alpha / 2, 100 * (1 - alpha / 2)]
    valid = ~np.isnan(replicates)
    if valid.all():
        low, high = np.percentile(replicates, q, axis=0)
    else:
        # nanpercentile warns on all-NaN slices; those get NaN explicitly instead.
        some = valid.any(axis=0)
        shape = replicates.shape[1:]
        low, high = np.full(shape, np.nan), np.full(shape, np.nan)
        if np.any(some):
            bounds = np.nanpercentile(replicates[:, some], q, axis=0)
            low[some], high[some] = bounds[0], bounds[1]
    return low, high


# ---------------------------------------------------------------------------
# bootstrap of a location statistic


def _bootstrap_columns(values: np.ndarray, *, n_boot: int, alpha: float, seed: int | None, statistic: str,
                       chunk_size: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Shared engine: ``values`` is complete, shape ``(n, k)``; returns per-column estimate, low, high, se."""
    n, k = values.shape
    if n == 0:
        nan = np.full(k, np.nan)
        return nan, nan.copy(), nan.copy(), nan.copy()
    func = _STATISTICS[statistic]
    estimate = func(values, axis=0)
    if n == 1:
        # Every resample is the single item, so the interval is the point.
        return estimate, estimate.copy(), estimate.copy(), np.zeros(k)

    replicates = _replicates(n, n_boot, k, n * k, seed, chunk_size, lambda idx: func(values[idx], axis=1))
    low, high = _percentile_interval(replicates, alpha)
    return estimate, low, high, replicates.std(axis=0, ddof=1) if n_boot > 1 else np.zeros(k)


def bootstrap_ci(values, *, n_boot: int = 1000, alpha: float = 0.05, seed: int | None = 0,
                 statistic: Statistic = "mean", chunk_size: int | None = None) -> BootstrapResult:
    """Percentile bootstrap confidence interval of a location statistic.

    Items are resampled with replacement ``n_boot`` times; the interval is the
    ``alpha / 2`` and ``1 - alpha / 2`` percentiles (linear interpolation) of
    the statistic over the resamples.

    Parameters
    ----------
    values
        1-D per-item values. NaN entries are dropped before anything else, so
        ``n`` counts the non-missing items only.
    n_boot
        Number of bootstrap replicates.
    alpha
        One minus the confidence level (``0.05`` gives a 95% interval).
    seed
        Seed for :func:`numpy.random.default_rng`.
    statistic
        ``"mean"`` or ``"median"``.
    chunk_size
        Replicates evaluated at once. Only memory use depends on it; by
        default blocks hold about 4 million resampled values.

    Returns
    -------
    BootstrapResult
        With no items every field but ``n`` and ``n_boot`` is NaN; with one
        item ``low == high == estimate``.

    Raises
    ------
    ValueError
        If ``values`` is not 1-D or a parameter is out of range.

    Examples
    --------
    >>> res = bootstrap_ci([0.2, 0.4, 0.35, 0.5, 0.1], n_boot=2000, seed=1)
    >>> res.low <= res.estimate <= res.high
    True
    """
    res = bootstrap_ci_matrix(_as_1d(values, "values")[:, None], n_boot=n_boot, alpha=alpha, seed=seed,
                              statistic=statistic, chunk_size=chunk_size)
    return BootstrapResult(float(res.estimate[0]), float(res.low[0]), float(res.high[0]), res.n, res.n_boot,
                           float(res.se[0]))


def bootstrap_ci_matrix(values, *, n_boot: int = 1000, alpha: float = 0.05, seed: int | None = 0,
                        statistic: Statistic = "mean", chunk_size: int | None = None) -> BootstrapMatrixResult:
    """Bootstrap intervals for several columns from the same resampled items.

    Every replicate draws one set of row indices and applies it to all
    columns, so the intervals of different columns (methods) stay paired and
    differences between columns can be bootstrapped consistently. Column ``j``
    gives exactly ``bootstrap_ci(values[:, j])`` when ``values`` has no NaN.

    Parameters
    ----------
    values
        2-D array (or DataFrame), items x columns. Rows containing any NaN are
        dropped, because a paired resample needs every column on every item.
    n_boot, alpha, seed, statistic, chunk_size
        As in :func:`bootstrap_ci`.

    Returns
    -------
    BootstrapMatrixResult
        Arrays of length ``n_columns``.

    Raises
    ------
    ValueError
        If ``values`` is not 2-D or a parameter is out of range.
    """
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 2:
        raise ValueError(f"`values` must be 2-D (items x columns), got an array of shape {arr.shape}.")
    n_boot = _check_count(n_boot, "n_boot")
    alpha = _check_alpha(alpha)
    if statistic not in _STATISTICS:
        raise ValueError(f"`statistic` must be one of {tuple(_STATISTICS)}, got {statistic!r}.")
    arr = arr[~np.isnan(arr).any(axis=1)]
    estimate, low, high, se = _bootstrap_columns(
        arr, n_boot=n_boot, alpha=alpha, seed=seed, statistic=statistic, chunk_size=chunk_size
    )
    return BootstrapMatrixResult(estimate=estimate, low=low, high=high, n=arr.shape[0], n_boot=n_boot, se=se)


# ---------------------------------------------------------------------------
# paired permutation test


def _count_extreme(null: np.ndarray, observed: float, tol: float, alternative: str) -> int:
    if alternative == "two-sided":
        return int(np.count_nonzero(np.abs(null) >= abs(observed) - tol))
    if alternative == "greater":
        return int(np.count_nonzero(null >= observed - tol))
    return int(np.count_nonzero(null <= observed + tol))


def paired_permutation_test(x, y, *, n_permutations: int = 10000, alternative: Alternative = "two-sided",
                            seed: int | None = 0, chunk_size: int | None = None) -> PermutationResult:
    """Sign-flip permutation test of the mean paired difference ``x - y``.

    Under the null hypothesis each difference ``d_i = x_i - y_i`` is as likely
    to have either sign, so null statistics are ``mean(s * d)`` with ``s_i``
    independent uniform signs. The p-value is ``(k + 1) / (P + 1)``, which
    counts the observed labelling as one of the permutations and is never 0.

    Parameters
    ----------
    x, y
        1-D paired values of equal length. Pairs with a NaN on either side are
        dropped.
    n_permutations
        Number of random sign vectors ``P``. Signs are drawn as
        ``rng.integers(0, 2, size=(P, n))`` and mapped to ``2 * flip - 1``.
    alternative
        ``"two-sided"`` counts ``|null| >= |observed|``, ``"greater"`` counts
        ``null >= observed`` (evidence that ``x > y``), ``"less"`` counts
        ``null <= observed``. Comparisons allow a tolerance of ``1e-12 *
        mean(|d|)`` so that exact ties, which rounding can displace by an ulp,
        are counted as ties.
    seed
        Seed for :func:`numpy.random.default_rng`.
    chunk_size
        Permutations evaluated at once; affects memory only.

    Returns
    -------
    PermutationResult
        With no complete pairs ``statistic`` and ``p_value`` are NaN.

    Raises
    ------
    ValueError
        If an input is not 1-D, the lengths differ or ``alternative`` is unknown.

    Examples
    --------
    >>> res = paired_permutation_test([3.0, 2.5, 4.1, 3.3], [2.0, 2.4, 3.0, 3.1], seed=0)
    >>> res.statistic > 0
    True
    """
    alternative = _check_alternative(alternative)
    n_permutations = _check_count(n_permutations, "n_permutations")
    x, y = _paired(x, y)
    d = x - y
    n = d.size
    if n == 0:
        return PermutationResult(np.nan, np.nan, 0, n_permutations, alternative)

    observed = float(d.mean())
    tol = _TIE_RTOL * float(np.abs(d).mean())
    rng = np.random.default_rng(seed)
    rows = _block_rows(n_permutations, n, chunk_size)
    extreme = 0
    for size in _blocks(n_permutations, rows):
        flips = rng.integers(0, 2, size=(size, n))
        # mean(s * d) with s = 2 * flip - 1, without building the float sign matrix.
        null = (2.0 * (flips @ d) - d.sum()) / n
        extreme += _count_extreme(null, observed, tol, alternative)
    p_value = (extreme + 1) / (n_permutations + 1)
    return PermutationResult(observed, p_value, n, n_permutations, alternative)


# ---------------------------------------------------------------------------
# regression


def _fit_rows(xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Slope, intercept, correlation per row of ``(m, n)`` samples; constant-x flags."""
    mx = xs.mean(axis=1)
    my = ys.mean(axis=1)
    dx = xs - mx[:, None]
    dy = ys - my[:, None]
    sxx = np.einsum("ij,ij->i", dx, dx)
    syy = np.einsum("ij,ij->i", dy, dy)
    sxy = np.einsum("ij,ij->i", dx, dy)
    # Constancy is tested on the data, not on sxx: a rounded mean can leave
    # sxx at 1e-33 for identical values and produce an absurd slope.
    flat_x = xs.max(axis=1) == xs.min(axis=1)
    flat_y = ys.max(axis=1) == ys.min(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(flat_x, np.nan, sxy / sxx)
        corr = np.where(flat_x | flat_y, np.nan, sxy / np.sqrt(sxx * syy))
    intercept = my - slope * mx
    # Rounding can push |r| a hair past 1.
    corr = np.clip(corr, -1.0, 1.0)
    return slope, intercept, corr, flat_x


def regression_with_ci(x, y, *, n_boot: int = 1000, alpha: float = 0.05, seed: int | None = 0,
                       chunk_size: int | None = None) -> RegressionResult:
    """Least-squares line of ``y`` on ``x`` and Pearson correlation, with bootstrap intervals.

    Intervals come from a pairs bootstrap: ``(x_i, y_i)`` pairs are resampled
    together (indices ``rng.integers(0, n, size=(n_boot, n))``) and the fit is
    recomputed for all replicates at once.

    Parameters
    ----------
    x, y
        1-D values of equal length. Pairs with a NaN on either side are dropped.
    n_boot, alpha, seed, chunk_size
        As in :func:`bootstrap_ci`.

    Returns
    -------
    RegressionResult
        Replicates with constant resampled ``x`` have no slope, intercept or
        correlation; they are NaN and skipped by :func:`numpy.nanpercentile`
        (their number is ``n_degenerate``). Replicates with constant ``y``
        have slope 0 but no correlation and are skipped for the correlation
        only. With fewer than two pairs, or constant ``x`` in the data, the
        estimates are NaN and no resampling is done.

    Raises
    ------
    ValueError
        If an input is not 1-D or the lengths differ.
    """
    n_boot = _check_count(n_boot, "n_boot")
    alpha = _check_alpha(alpha)
    x, y = _paired(x, y)
    n = x.size

    def result(est, lows, highs, n_degenerate):
        parts = [
            BootstrapResult(float(e), float(lo), float(hi), n, n_boot)
            for e, lo, hi in zip(est, lows, highs)
        ]
        return RegressionResult(*parts, n=n, n_boot=n_boot, n_degenerate=n_degenerate)

    if n < 2:
        return result([np.nan] * 3, [np.nan] * 3, [np.nan] * 3, 0)
    slope, intercept, corr, flat = _fit_rows(x[None, :], y[None, :])
    estimate = [slope[0], intercept[0], corr[0]]
    if flat[0]:
        # Every resample of constant x is constant too.
        return result(estimate, [np.nan] * 3, [np.nan] * 3, n_boot)

    degenerate = []

    def fit(idx: np.ndarray) -> np.ndarray:
        b_slope, b_intercept, b_corr, b_flat = _fit_rows(x[idx], y[idx])
        degenerate.append(int(b_flat.sum()))
        return np.column_stack([b_slope, b_intercept, b_corr])

    low, high = _percentile_interval(_replicates(n, n_boot, 3, 2 * n, seed, chunk_size, fit), alpha)
    return result(estimate, low, high, sum(degenerate))


# ---------------------------------------------------------------------------
# comparison against the best method


def compare_to_best(table: pd.DataFrame, *, maximize: bool = True, n_permutations: int = 10000,
                    alternative: Alternative = "two-sided", seed: int | None = 0, alpha: float = 0.05) -> pd.DataFrame:
    """Test every method against the best one with a paired permutation test.

    The best method has the highest (``maximize=True``) or lowest mean over
    its own non-missing items; ties go to the first such column. Each other
    method is compared with :func:`paired_permutation_test` on the items both
    have, using the same ``seed`` for every comparison so that adding or
    reordering methods does not change the others' p-values. P-values are not
    adjusted for multiple comparisons.

    Parameters
    ----------
    table
        Items x methods; column labels are the method ids, NaN where a method
        has no value for an item.
    maximize
        Whether larger values are better.
    n_permutations, alternative, seed
        Passed to :func:`paired_permutation_test`, with ``x`` the method and
        ``y`` the best method.
    alpha
        Significance threshold for the ``significant`` column.

    Returns
    -------
    pandas.DataFrame
        One row per method in column order, with ``method_id``,
        ``best_method_id``, ``mean_difference`` (method minus best, over shared
        items), ``p_value``, ``significant`` (``p_value < alpha``) and
        ``n_items`` (shared items). The best method's row has difference 0,
        p-value 1 and ``n_items`` equal to its own item count; a method sharing
        no item with the best has NaN difference and p-value.

    Raises
    ------
    ValueError
        If ``table`` is not a DataFrame, has duplicate or no columns, or no
        method has any value.
    """
    if not isinstance(table, pd.DataFrame):
        raise ValueError(f"`table` must be a pandas DataFrame (items x methods), got {type(table).__name__}.")
    if table.shape[1] == 0:
        raise ValueError("`table` has no method columns.")
    if not table.columns.is_unique:
        raise ValueError("`table` has duplicate method columns.")
    alternative = _check_alternative(alternative)
    alpha = _check_alpha(alpha)

    values = table.to_numpy(dtype=float)
    counts = (~np.isnan(values)).sum(axis=0)
    if not counts.any():
        raise ValueError("No method in `table` has any non-missing value.")
    # Columns without values must never win, whichever direction is better.
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.nansum(values, axis=0) / counts
    means = np.where(counts > 0, means, -np.inf if maximize else np.inf)
    best = int(np.argmax(means) if maximize else np.argmin(means))
    best_id = table.columns[best]

    rows = []
    for j, method_id in enumerate(table.columns):
        if j == best:
            rows.append((method_id, best_id, 0.0, 1.0, False, int(counts[best])))
            continue
        res = paired_permutation_test(
            values[:, j],
            values[:, best],
            n_permutations=n_permutations,
            alternative=alternative,
            seed=seed,
        )
        significant = bool(res.p_value < alpha)  # NaN compares False
        rows.append((method_id, best_id, res.statistic, res.p_value, significant, res.n))
    return pd.DataFrame(
        rows,
        columns=["method_id", "best_method_id", "mean_difference", "p_value", "significant", "n_items"],
    )
