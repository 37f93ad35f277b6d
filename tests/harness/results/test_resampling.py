"""Tests for openpert.results.resampling.

The vectorised functions are checked against slow references below that draw
one bootstrap replicate / one permutation at a time from the same generator,
compute statistics with plain Python arithmetic and take percentiles with a
hand-written interpolation.
"""

from __future__ import annotations

import doctest
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from openpert.results import resampling as st
from openpert.results.resampling import (
    bootstrap_ci,
    bootstrap_ci_matrix,
    compare_to_best,
    paired_permutation_test,
    regression_with_ci,
)

# ---------------------------------------------------------------------------
# slow references


def _ref_percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), 0 <= q <= 100."""
    h = (len(sorted_values) - 1) * q / 100
    lo = math.floor(h)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (h - lo) * (sorted_values[hi] - sorted_values[lo])


def _ref_interval(replicates: list[float], alpha: float) -> tuple[float, float]:
    kept = sorted(r for r in replicates if not math.isnan(r))
    if not kept:
        return math.nan, math.nan
    return _ref_percentile(kept, 100 * alpha / 2), _ref_percentile(kept, 100 * (1 - alpha / 2))


def _ref_median(values: list[float]) -> float:
    s = sorted(values)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def ref_bootstrap(values, n_boot, alpha, seed, statistic="mean"):
    v = [float(a) for a in values if not math.isnan(a)]
    n = len(v)
    func = (lambda xs: math.fsum(xs) / len(xs)) if statistic == "mean" else _ref_median
    rng = np.random.default_rng(seed)
    replicates = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, size=n)
        replicates.append(func([v[i] for i in idx]))
    low, high = _ref_interval(replicates, alpha)
    return func(v), low, high


def ref_permutation(x, y, n_permutations, alternative, seed):
    d = [a - b for a, b in zip(x, y) if not (math.isnan(a) or math.isnan(b))]
    n = len(d)
    observed = math.fsum(d) / n
    tol = 1e-12 * math.fsum(abs(a) for a in d) / n
    rng = np.random.default_rng(seed)
    extreme = 0
    for _ in range(n_permutations):
        flips = rng.integers(0, 2, size=n)
        null = math.fsum((2 * int(f) - 1) * a for f, a in zip(flips, d)) / n
        if alternative == "two-sided":
            extreme += abs(null) >= abs(observed) - tol
        elif alternative == "greater":
            extreme += null >= observed - tol
        else:
            extreme += null <= observed + tol
    return observed, (extreme + 1) / (n_permutations + 1)


def _ref_fit(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    if max(xs) == min(xs):
        return math.nan, math.nan, math.nan
    n = len(xs)
    mx, my = math.fsum(xs) / n, math.fsum(ys) / n
    sxx = math.fsum((a - mx) ** 2 for a in xs)
    syy = math.fsum((b - my) ** 2 for b in ys)
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(xs, ys))
    slope = sxy / sxx
    r = math.nan if max(ys) == min(ys) else max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))
    return slope, my - slope * mx, r


def ref_regression(x, y, n_boot, alpha, seed):
    pairs = [(a, b) for a, b in zip(x, y) if not (math.isnan(a) or math.isnan(b))]
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    n = len(xs)
    rng = np.random.default_rng(seed)
    reps, degenerate = [], 0
    for _ in range(n_boot):
        idx = rng.integers(0, n, size=n)
        bx = [xs[i] for i in idx]
        reps.append(_ref_fit(bx, [ys[i] for i in idx]))
        degenerate += max(bx) == min(bx)
    estimate = _ref_fit(xs, ys)
    intervals = [_ref_interval([r[k] for r in reps], alpha) for k in range(3)]
    return estimate, intervals, degenerate


def _close(a: float, b: float, tol: float = 1e-12) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


# ---------------------------------------------------------------------------
# bootstrap


@pytest.mark.parametrize("statistic", ["mean", "median"])
@pytest.mark.parametrize("n", [2, 3, 25])
def test_bootstrap_matches_reference(statistic, n):
    values = np.random.default_rng(n).gamma(2.0, size=n)
    res = bootstrap_ci(values, n_boot=301, alpha=0.1, seed=7, statistic=statistic)
    est, low, high = ref_bootstrap(values, 301, 0.1, 7, statistic)
    assert _close(res.estimate, est)
    assert _close(res.low, low)
    assert _close(res.high, high)
    assert (res.n, res.n_boot) == (n, 301)


def test_bootstrap_chunking_does_not_change_results(monkeypatch):
    values = np.random.default_rng(1).normal(size=57)
    full = bootstrap_ci(values, n_boot=500, seed=3)
    for chunk in (1, 7, 499, 500, 10_000):
        assert bootstrap_ci(values, n_boot=500, seed=3, chunk_size=chunk) == full
    # The default block size comes from the element budget; shrink it to force many blocks.
    monkeypatch.setattr(st, "_BLOCK_ELEMENTS", 100)
    assert bootstrap_ci(values, n_boot=500, seed=3) == full


def test_bootstrap_drops_nan():
    values = np.array([1.0, np.nan, 2.0, 4.0, np.nan, 8.0])
    res = bootstrap_ci(values, n_boot=200, seed=5)
    assert res == bootstrap_ci(values[~np.isnan(values)], n_boot=200, seed=5)
    assert res.n == 4
    assert res.estimate == pytest.approx(3.75)


def test_bootstrap_degenerate_sizes():
    empty = bootstrap_ci([], n_boot=50)
    assert empty.n == 0 and empty.n_boot == 50
    assert all(math.isnan(v) for v in (empty.estimate, empty.low, empty.high))
    assert math.isnan(bootstrap_ci([np.nan, np.nan]).estimate)

    single = bootstrap_ci([np.nan, 0.3])
    assert single.n == 1
    assert single.low == single.high == single.estimate == 0.3


def test_bootstrap_seed_reproducible_and_sensitive():
    values = np.random.default_rng(2).normal(size=40)
    assert bootstrap_ci(values, seed=11) == bootstrap_ci(values, seed=11)
    assert bootstrap_ci(values, seed=11) != bootstrap_ci(values, seed=12)


def test_bootstrap_ci_contains_estimate_and_narrows():
    rng = np.random.default_rng(0)
    small = bootstrap_ci(rng.normal(1.0, 1.0, size=20), seed=1)
    large = bootstrap_ci(rng.normal(1.0, 1.0, size=2000), seed=1)
    for res in (small, large):
        assert res.low < res.estimate < res.high
    # Width scales like 1/sqrt(n): 100x more items gives about a tenth of the width.
    ratio = (large.high - large.low) / (small.high - small.low)
    assert 0.05 < ratio < 0.2
    assert large.low < 1.0 < large.high


def test_bootstrap_alpha_controls_width():
    values = np.random.default_rng(4).normal(size=100)
    wide = bootstrap_ci(values, alpha=0.01, seed=0)
    narrow = bootstrap_ci(values, alpha=0.5, seed=0)
    assert wide.low < narrow.low < narrow.high < wide.high


def test_bootstrap_matrix_matches_columns_and_is_paired():
    rng = np.random.default_rng(9)
    base = rng.normal(size=60)
    values = np.column_stack([base, base + 5.0, rng.normal(size=60)])
    res = bootstrap_ci_matrix(values, n_boot=400, seed=2)
    for j in range(3):
        single = bootstrap_ci(values[:, j], n_boot=400, seed=2)
        assert _close(res.estimate[j], single.estimate)
        assert _close(res.low[j], single.low)
        assert _close(res.high[j], single.high)
    # Shared resamples: a constant shift moves both bounds by exactly that shift.
    assert res.low[1] - res.low[0] == pytest.approx(5.0, abs=1e-12)
    assert res.high[1] - res.high[0] == pytest.approx(5.0, abs=1e-12)
    assert bootstrap_ci_matrix(values, n_boot=400, seed=2, chunk_size=3).low.tolist() == res.low.tolist()


def test_bootstrap_matrix_drops_incomplete_rows():
    values = pd.DataFrame({"a": [1.0, 2.0, np.nan, 4.0], "b": [1.0, np.nan, 3.0, 5.0]})
    res = bootstrap_ci_matrix(values, n_boot=100)
    assert res.n == 2
    np.testing.assert_allclose(res.estimate, [2.5, 3.0])


# ---------------------------------------------------------------------------
# permutation test


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_permutation_matches_reference(alternative):
    rng = np.random.default_rng(21)
    x = rng.normal(size=15)
    y = x - 0.3 + rng.normal(size=15)
    x[3] = np.nan
    y[8] = np.nan
    res = paired_permutation_test(x, y, n_permutations=999, alternative=alternative, seed=4)
    observed, p = ref_permutation(x, y, 999, alternative, seed=4)
    assert _close(res.statistic, observed)
    assert res.p_value == p
    assert (res.n, res.n_permutations, res.alternative) == (13, 999, alternative)


def test_permutation_reference_with_exact_ties():
    # Integer differences make many null statistics tie with the observed one exactly.
    x = np.array([1.0, 2.0, 1.0, 3.0, 1.0, 2.0])
    y = np.zeros(6)
    for alternative in ("two-sided", "greater", "less"):
        res = paired_permutation_test(x, y, n_permutations=500, alternative=alternative, seed=8)
        assert res.p_value == ref_permutation(x, y, 500, alternative, seed=8)[1]


def test_permutation_chunking_does_not_change_results(monkeypatch):
    rng = np.random.default_rng(13)
    x, y = rng.normal(size=31), rng.normal(size=31)
    full = paired_permutation_test(x, y, n_permutations=2000, seed=6)
    for chunk in (1, 3, 1999, 5000):
        assert paired_permutation_test(x, y, n_permutations=2000, seed=6, chunk_size=chunk) == full
    monkeypatch.setattr(st, "_BLOCK_ELEMENTS", 64)
    assert paired_permutation_test(x, y, n_permutations=2000, seed=6) == full


def test_permutation_strong_difference_gives_minimal_p():
    rng = np.random.default_rng(3)
    y = rng.normal(size=40)
    x = y + 2.0 + rng.normal(scale=0.1, size=40)
    res = paired_permutation_test(x, y, n_permutations=999)
    assert res.p_value == 1 / 1000
    assert res.statistic == pytest.approx(np.mean(x - y))


def test_permutation_identical_samples_give_p_one():
    x = np.random.default_rng(1).normal(size=25)
    for alternative in ("two-sided", "greater", "less"):
        res = paired_permutation_test(x, x.copy(), n_permutations=300, alternative=alternative)
        assert res.p_value == 1.0


def test_permutation_one_sided_directions():
    rng = np.random.default_rng(17)
    y = rng.normal(size=30)
    x = y + 0.8 + rng.normal(size=30)
    greater = paired_permutation_test(x, y, n_permutations=1999, alternative="greater")
    less = paired_permutation_test(x, y, n_permutations=1999, alternative="less")
    two = paired_permutation_test(x, y, n_permutations=1999, alternative="two-sided")
    assert greater.p_value < 0.01
    assert less.p_value > 0.99
    assert greater.p_value <= two.p_value
    # Swapping the samples swaps the directions.
    swapped = paired_permutation_test(y, x, n_permutations=1999, alternative="less")
    assert swapped.p_value == greater.p_value
    assert swapped.statistic == pytest.approx(-greater.statistic)


def test_permutation_null_p_values_roughly_uniform():
    p_values = []
    for seed in range(200):
        d = np.random.default_rng(10_000 + seed).normal(size=20)
        p_values.append(paired_permutation_test(d, np.zeros(20), n_permutations=999, seed=seed).p_value)
    p_values = np.array(p_values)
    assert 0.01 <= np.mean(p_values < 0.05) <= 0.10
    assert 0.35 <= np.mean(p_values < 0.5) <= 0.65
    assert p_values.min() >= 1 / 1000 and p_values.max() <= 1.0


def test_permutation_no_complete_pairs():
    res = paired_permutation_test([np.nan, 1.0], [2.0, np.nan])
    assert res.n == 0
    assert math.isnan(res.statistic) and math.isnan(res.p_value)


# ---------------------------------------------------------------------------
# regression


@pytest.mark.parametrize("true_slope", [0.7, -0.7])
def test_regression_matches_reference(true_slope):
    rng = np.random.default_rng(30)
    x = rng.normal(size=12)
    y = true_slope * x + rng.normal(size=12)
    x[2] = np.nan
    res = regression_with_ci(x, y, n_boot=300, alpha=0.1, seed=9)
    estimate, intervals, degenerate = ref_regression(x, y, 300, 0.1, 9)
    for part, est, (low, high) in zip((res.slope, res.intercept, res.correlation), estimate, intervals):
        assert _close(part.estimate, est)
        assert _close(part.low, low)
        assert _close(part.high, high)
    assert (res.n, res.n_boot, res.n_degenerate, degenerate) == (11, 300, 0, 0)
    assert np.sign(res.correlation.estimate) == np.sign(true_slope)


def test_regression_degenerate_replicates_excluded():
    # With one distinct x among ten, about a third of the resamples have constant x.
    x = np.array([0.0] * 9 + [1.0])
    y = np.arange(10.0)
    res = regression_with_ci(x, y, n_boot=400, seed=2)
    estimate, intervals, degenerate = ref_regression(x, y, 400, 0.05, 2)
    assert res.n_degenerate == degenerate
    assert 80 < degenerate < 200
    assert _close(res.slope.estimate, estimate[0]) and _close(res.slope.estimate, 5.0)
    assert _close(res.slope.low, intervals[0][0]) and _close(res.slope.high, intervals[0][1])
    assert _close(res.correlation.low, intervals[2][0]) and _close(res.correlation.high, intervals[2][1])
    assert np.isfinite([res.slope.low, res.slope.high]).all()


def test_regression_chunking_does_not_change_results():
    rng = np.random.default_rng(31)
    x, y = rng.normal(size=50), rng.normal(size=50)
    full = regression_with_ci(x, y, n_boot=200, seed=1)
    assert regression_with_ci(x, y, n_boot=200, seed=1, chunk_size=9) == full


def test_regression_recovers_known_line():
    rng = np.random.default_rng(42)
    x = rng.uniform(0, 10, size=300)
    y = 2.0 * x + 1.0 + rng.normal(scale=2.0, size=300)
    res = regression_with_ci(x, y, seed=0)
    fit = sps.linregress(x, y)
    assert res.slope.estimate == pytest.approx(fit.slope, rel=1e-10)
    assert res.intercept.estimate == pytest.approx(fit.intercept, rel=1e-10)
    assert res.correlation.estimate == pytest.approx(fit.rvalue, rel=1e-10)
    true_r = 2.0 * math.sqrt(100 / 12) / math.sqrt(4.0 * 100 / 12 + 4.0)
    for part, truth in ((res.slope, 2.0), (res.intercept, 1.0), (res.correlation, true_r)):
        assert part.low < truth < part.high
        assert part.low < part.estimate < part.high
    assert res.slope.high - res.slope.low < 0.2


def test_regression_constant_inputs():
    const_x = regression_with_ci([1.0, 1.0, 1.0], [1.0, 2.0, 3.0], n_boot=20)
    assert math.isnan(const_x.slope.estimate) and math.isnan(const_x.slope.low)
    assert const_x.n_degenerate == 20

    const_y = regression_with_ci([1.0, 2.0, 3.0, 4.0], [5.0] * 4, n_boot=50)
    assert const_y.slope.estimate == 0.0 and const_y.slope.low == const_y.slope.high == 0.0
    assert math.isnan(const_y.correlation.estimate) and math.isnan(const_y.correlation.low)

    tiny = regression_with_ci([1.0], [2.0])
    assert tiny.n == 1 and math.isnan(tiny.slope.estimate)


# ---------------------------------------------------------------------------
# compare_to_best


def _score_table() -> pd.DataFrame:
    rng = np.random.default_rng(50)
    items = 40
    base = rng.normal(size=items)
    table = pd.DataFrame(
        {
            "mid": 0.5 + base + rng.normal(scale=0.05, size=items),
            "top": 0.6 + base + rng.normal(scale=0.05, size=items),
            "low": 0.2 + base + rng.normal(scale=0.05, size=items),
            "close": 0.59 + base + rng.normal(scale=0.3, size=items),
        },
        index=[f"item{i}" for i in range(items)],
    )
    table.iloc[:5, 3] = np.nan
    return table


def test_compare_to_best_maximize():
    table = _score_table()
    out = compare_to_best(table, n_permutations=999)
    assert list(out.columns) == [
        "method_id", "best_method_id", "mean_difference", "p_value", "significant", "n_items"
    ]
    assert out["method_id"].tolist() == ["mid", "top", "low", "close"]
    assert (out["best_method_id"] == "top").all()
    rows = out.set_index("method_id")
    assert rows.loc["top", "p_value"] == 1.0 and not rows.loc["top", "significant"]
    assert rows.loc["top", "mean_difference"] == 0.0 and rows.loc["top", "n_items"] == 40
    assert rows.loc["mid", "significant"] and rows.loc["low", "significant"]
    assert rows.loc["low", "mean_difference"] < rows.loc["mid", "mean_difference"] < 0
    assert not rows.loc["close", "significant"]
    assert rows.loc["close", "n_items"] == 35
    # Each row is the plain paired test on the shared items.
    direct = paired_permutation_test(table["close"], table["top"], n_permutations=999)
    assert rows.loc["close", "p_value"] == direct.p_value
    assert rows.loc["close", "mean_difference"] == pytest.approx((table["close"] - table["top"]).mean())


def test_compare_to_best_minimize_and_alpha():
    out = compare_to_best(_score_table(), maximize=False, n_permutations=499, alpha=1e-9)
    assert (out["best_method_id"] == "low").all()
    assert (out.loc[out["method_id"] != "low", "mean_difference"] > 0).all()
    # No permutation p-value can fall below 1 / (P + 1).
    assert not out["significant"].any()


def test_compare_to_best_missing_columns_and_ties():
    table = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [3.0, 2.0, 1.0], "empty": [np.nan] * 3})
    for maximize in (True, False):
        out = compare_to_best(table, maximize=maximize, n_permutations=99).set_index("method_id")
        assert (out["best_method_id"] == "a").all()
        assert out.loc["empty", "n_items"] == 0
        assert math.isnan(out.loc["empty", "p_value"]) and not out.loc["empty", "significant"]


def test_compare_to_best_rejects_bad_tables():
    with pytest.raises(ValueError, match="DataFrame"):
        compare_to_best(np.ones((3, 2)))
    with pytest.raises(ValueError, match="no method"):
        compare_to_best(pd.DataFrame(index=range(3)))
    with pytest.raises(ValueError, match="non-missing"):
        compare_to_best(pd.DataFrame({"a": [np.nan], "b": [np.nan]}))
    with pytest.raises(ValueError, match="duplicate"):
        compare_to_best(pd.DataFrame([[1.0, 2.0]], columns=["a", "a"]))
    with pytest.raises(ValueError, match="alternative"):
        compare_to_best(_score_table(), alternative="bigger")


# ---------------------------------------------------------------------------
# input validation


def test_input_errors():
    with pytest.raises(ValueError, match="must be 1-D"):
        bootstrap_ci(np.ones((3, 2)))
    with pytest.raises(ValueError, match="must be 2-D"):
        bootstrap_ci_matrix(np.ones(3))
    with pytest.raises(ValueError, match="must be 1-D"):
        paired_permutation_test(np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="same length, got 3 and 2"):
        paired_permutation_test([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="same length"):
        regression_with_ci([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="must be 1-D"):
        regression_with_ci(np.ones((3, 1)), np.ones(3))
    with pytest.raises(ValueError, match="`alternative` must be one of"):
        paired_permutation_test([1.0], [2.0], alternative="two_sided")
    with pytest.raises(ValueError, match="statistic"):
        bootstrap_ci([1.0, 2.0], statistic="trimmed")
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_ci([1.0, 2.0], n_boot=0)
    with pytest.raises(ValueError, match="n_permutations"):
        paired_permutation_test([1.0], [2.0], n_permutations=2.5)
    with pytest.raises(ValueError, match="alpha"):
        regression_with_ci([1.0, 2.0], [1.0, 2.0], alpha=1.0)
    with pytest.raises(ValueError, match="chunk_size"):
        bootstrap_ci([1.0, 2.0], chunk_size=0)


def test_docstring_examples():
    result = doctest.testmod(st, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 2 and result.failed == 0


def test_bootstrap_standard_error_is_the_sd_of_the_replicates():
    """``se`` is the standard deviation of the replicate means, drawn as the module docstring says."""
    values = np.array([0.1, 0.4, 0.35, 0.8, 0.2, 0.55, 0.3])
    res = bootstrap_ci(values, n_boot=500, seed=3)
    rng = np.random.default_rng(3)
    means = [values[rng.integers(0, len(values), size=len(values))].mean() for _ in range(500)]
    assert res.se == pytest.approx(np.std(means, ddof=1), rel=1e-12)
    # close to the analytic standard error of a mean
    assert res.se == pytest.approx(values.std(ddof=0) / np.sqrt(len(values)), rel=0.15)
    assert bootstrap_ci([0.3], n_boot=10).se == 0.0
    assert np.isnan(bootstrap_ci([], n_boot=10).se)
