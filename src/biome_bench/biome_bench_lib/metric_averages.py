"""Averaging metrics: the mean of finite per-item values, and the paper's "Avg." (Table 2) of every metric on 0-100."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

__all__ = ["finite_mean", "normalised_average"]


def finite_mean(values: Iterable[float]) -> float:
    """Mean of the finite values; NaN (not a warning) when there are none.

    Parameters
    ----------
    values
        Per-item values; NaN marks an item without a value (e.g. an unreadable judge answer).

    Returns
    -------
    float
    """
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else float("nan")


def normalised_average(
    *,
    accuracy: float | None = None,
    macro_f1: float | None = None,
    judge: Mapping[str, float] | None = None,
    similarity: float | None = None,
    coverage: float | None = None,
) -> float:
    """The paper's "Avg." (Table 2): the mean of all metrics on a 0-100 scale.

    Accuracy, macro-F1, similarity and coverage (proportions) are multiplied by 100 and the 1-5
    judge scores by 20 (5 -> 100); this reproduces the Avg. column of Table 2 (e.g. Qwen3-14B:
    64.13). Metrics that are missing (``None`` or NaN: a dataset without Task A items or without
    reference knowledge graphs) are left out of the mean.

    Parameters
    ----------
    accuracy, macro_f1
        Task A proportions.
    judge
        Judge dimension -> mean 1-5 score.
    similarity, coverage
        Task B proportions (embedding similarity, knowledge-graph coverage).

    Returns
    -------
    float
        NaN when no metric is available.
    """
    values = [v * 100 for v in (accuracy, macro_f1, similarity, coverage) if v is not None]
    values += [v * 20 for v in (judge or {}).values() if v is not None]
    values = [v for v in values if np.isfinite(v)]
    return float(np.mean(values)) if values else float("nan")
