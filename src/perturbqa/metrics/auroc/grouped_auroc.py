"""AUROC from average ranks, within groups (the per-gene AUROC of the metric) and pooled."""

from __future__ import annotations

import numpy as np
import pandas as pd


def auroc_by_group(labels: np.ndarray, scores: np.ndarray, groups: np.ndarray) -> pd.Series:
    """AUROC of ``scores`` for ``labels`` (0/1) within each group holding both classes.

    Uses the Mann–Whitney identity AUROC = (R1 - n1 (n1 + 1) / 2) / (n1 n0), with R1 the sum of the
    positives' average ranks within the group, so tied scores count one half.

    Returns
    -------
    pandas.Series
        AUROC per group (index: group), sorted by group; groups with one class are left out.
    """
    frame = pd.DataFrame({"y": np.asarray(labels, dtype=int), "s": np.asarray(scores, dtype=float), "g": np.asarray(groups)})
    frame["rank"] = frame.groupby("g")["s"].rank(method="average")
    stats = frame.groupby("g").agg(n1=("y", "sum"), n=("y", "size"))
    stats["r1"] = frame[frame["y"] == 1].groupby("g")["rank"].sum()
    stats["n0"] = stats["n"] - stats["n1"]
    stats = stats[(stats["n1"] > 0) & (stats["n0"] > 0)]
    auc = (stats["r1"] - stats["n1"] * (stats["n1"] + 1) / 2) / (stats["n1"] * stats["n0"])
    return auc.sort_index().astype(float)


def auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    """AUROC of all items together (NaN when only one class is present)."""
    result = auroc_by_group(labels, scores, np.zeros(len(labels), dtype=int))
    return float(result.iloc[0]) if len(result) else float("nan")
