"""Orders that are the same on every CPU: largest value first, equal values by name.

NumPy's default sort (``kind="quicksort"``, also what ``pandas.Series.sort_values`` uses) is not
stable, and since NumPy 2.0 it dispatches to vectorised sorts chosen by the CPU (AVX2, AVX-512):
equal values come out in an order that differs between machines. A cut after the first ``k``
("the most expressed genes", "the genes with the most labels") that falls among equal values then
keeps different genes on different machines. Here equal values are ordered by name, with a stable
lexicographic sort, so the order is a function of the values and the names alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["descending", "largest_first"]


def descending(values: Sequence[float] | np.ndarray, names: Sequence[str] | np.ndarray) -> np.ndarray:
    """Positions that order ``values`` from largest to smallest, equal values by ``names`` (ascending).

    Parameters
    ----------
    values
        Numbers (integers or floats; NaN comes last).
    names
        One name per value: the tie-break.

    Returns
    -------
    numpy.ndarray
        Integer positions into ``values``.

    Raises
    ------
    ValueError
        When ``values`` and ``names`` differ in length.
    """
    v = np.asarray(values, dtype=float)
    n = np.asarray(names, dtype=str)
    if v.shape != n.shape or v.ndim != 1:
        raise ValueError(f"descending: values {v.shape} and names {n.shape} must be one-dimensional and of one length")
    # Negation is exact, so -v orders the values from largest to smallest; lexsort is stable and
    # sorts by its last key first: by value, then by name.
    return np.lexsort((n, -v))


def largest_first(series: pd.Series) -> pd.Series:
    """``series`` from its largest value to its smallest, equal values by index label (as strings)."""
    return series.iloc[descending(series.to_numpy(dtype=float), series.index.astype(str))]
