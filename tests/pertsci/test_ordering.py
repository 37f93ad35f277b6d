"""pertsci.ordering: largest first, equal values by name, whatever order the values come in."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pertsci import ordering


def test_equal_values_are_ordered_by_name_whatever_the_input_order():
    values = np.array([3, 7, 3, 7, 3, 1, 7])
    names = np.array(["d", "z", "a", "b", "c", "e", "m"])
    expected = ["b", "m", "z", "a", "c", "d", "e"]
    rng = np.random.default_rng(0)
    for _ in range(20):
        perm = rng.permutation(values.size)
        order = ordering.descending(values[perm], names[perm])
        assert list(names[perm][order]) == expected


def test_many_ties_at_a_cut_keep_the_same_names_under_any_input_order():
    # 2,000 values in 5 levels: NumPy's default sort orders ties by the CPU's vectorised sort; the
    # first 300 must be the same names (the first by name among the ties at the cut) every time.
    rng = np.random.default_rng(1)
    values = rng.integers(0, 5, 2000)
    names = np.array([f"g{i:04d}" for i in range(values.size)])
    first = None
    for _ in range(5):
        perm = rng.permutation(values.size)
        kept = names[perm][ordering.descending(values[perm], names[perm])[:300]]
        assert first is None or list(kept) == first
        first = list(kept)
    top = names[values == values.max()]
    assert top.size > 300  # the cut falls among ties
    assert first == sorted(top)[:300]


def test_floats_a_few_ulp_apart_are_not_ties_and_nan_comes_last():
    x = 0.1 + 0.2
    values = np.array([np.nan, x, np.nextafter(x, 1.0), x, 0.0])
    order = ordering.descending(values, ["a", "c", "z", "b", "y"])
    assert list(order) == [2, 3, 1, 4, 0]


def test_largest_first_orders_a_series_by_value_then_label():
    s = pd.Series([2, 5, 2, 5], index=["RPS15", "B", "RPL10", "A"])
    assert list(ordering.largest_first(s).index) == ["A", "B", "RPL10", "RPS15"]


def test_values_and_names_of_different_lengths_are_an_error():
    with pytest.raises(ValueError, match="one length"):
        ordering.descending([1.0, 2.0], ["a"])
