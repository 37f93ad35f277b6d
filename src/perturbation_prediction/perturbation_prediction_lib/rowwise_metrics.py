"""The task's metrics: row-wise errors and correlations between prediction and truth, and the score file."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd


def rowwise_errors(truth: np.ndarray, pred: np.ndarray) -> pd.DataFrame:
    """Per-row RMSE and MAE over genes (Szałata et al. 2024, equation 2).

    Parameters
    ----------
    truth, pred
        Rows x genes, aligned.

    Returns
    -------
    pandas.DataFrame
        ``mean_rowwise_rmse`` and ``mean_rowwise_mae``, one row per row of ``truth``.
    """
    diff = pred - truth
    return pd.DataFrame({"mean_rowwise_rmse": np.sqrt(np.mean(diff**2, axis=1)),
                         "mean_rowwise_mae": np.mean(np.abs(diff), axis=1)})


def _rowwise_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _rowwise_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _rowwise_cosine(a - a.mean(axis=1, keepdims=True), b - b.mean(axis=1, keepdims=True))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n within each row, tied values given the mean of their ranks.

    The values of ``scipy.stats.rankdata(values, axis=1)`` (method ``"average"``), exactly: each
    rank is the mean of two integers. A row holding NaN is all NaN, as rankdata propagates it.
    Written here because importing ``scipy.stats`` takes longer (about 0.4 s) than this metric
    takes on a test dataset.

    Parameters
    ----------
    values
        Rows x columns.

    Returns
    -------
    numpy.ndarray
        ``float64`` ranks, the shape of ``values``.
    """
    values = np.asarray(values)
    n_rows, n = values.shape
    order = np.argsort(values, axis=1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=1)
    # In sorted order a value's rank is its position + 1, unless it is tied: a run of equal values
    # spanning positions [first, last] shares (first + last) / 2 + 1.
    in_order = np.broadcast_to(np.arange(1, n + 1, dtype=np.float64), (n_rows, n))
    tied = np.zeros((n_rows, n), dtype=bool)
    tied[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
    rows = np.flatnonzero(tied.any(axis=1))
    if len(rows):
        position = np.broadcast_to(np.arange(n), (len(rows), n))
        starts = ~tied[rows]
        ends = np.ones_like(starts)
        ends[:, :-1] = starts[:, 1:]
        first = np.maximum.accumulate(np.where(starts, position, 0), axis=1)
        last = np.minimum.accumulate(np.where(ends, position, n - 1)[:, ::-1], axis=1)[:, ::-1]
        in_order = in_order.copy()
        in_order[rows] = (first + last) / 2 + 1
    ranks = np.empty((n_rows, n), dtype=np.float64)
    ranks[np.arange(n_rows)[:, None], order] = in_order
    ranks[np.isnan(values).any(axis=1)] = np.nan
    return ranks


def rowwise_correlations(truth: np.ndarray, pred: np.ndarray) -> pd.DataFrame:
    """Per-row Pearson, Spearman (ranks with ties averaged) and cosine similarity over genes.

    Undefined values (a constant or all-zero row) count as 0, as Open Problems scores them.

    Parameters
    ----------
    truth, pred
        Rows x genes, aligned.

    Returns
    -------
    pandas.DataFrame
        ``mean_rowwise_pearson``, ``mean_rowwise_spearman`` and ``mean_rowwise_cosine``, one row per
        row of ``truth``.
    """
    scores = {
        "mean_rowwise_pearson": _rowwise_pearson(truth, pred),
        "mean_rowwise_spearman": _rowwise_pearson(average_ranks(truth), average_ranks(pred)),
        "mean_rowwise_cosine": _rowwise_cosine(truth, pred),
    }
    return pd.DataFrame({k: np.where(np.isfinite(v), v, 0.0) for k, v in scores.items()})


def score_adata(per_row: pd.DataFrame, de_test: ad.AnnData, pred: ad.AnnData) -> ad.AnnData:
    """A score file: per-row values in ``obs`` (index: row ids), their means in ``uns``.

    Parameters
    ----------
    per_row
        One column per metric (e.g. from :func:`rowwise_errors`), rows in id_map order.
    de_test, pred
        The truth and the prediction file, for their dataset and method ids.

    Returns
    -------
    anndata.AnnData
        ``uns`` holds ``dataset_id``, ``method_id``, ``metric_ids`` and ``metric_values``.
    """
    per_row = per_row.copy()
    per_row.index = [str(i) for i in range(len(per_row))]
    return ad.AnnData(obs=per_row, uns={
        "dataset_id": str(de_test.uns.get("dataset_id", "")),
        "method_id": str(pred.uns.get("method_id", "")),
        "metric_ids": list(per_row.columns),
        "metric_values": [float(per_row[c].mean()) for c in per_row.columns],
    })
