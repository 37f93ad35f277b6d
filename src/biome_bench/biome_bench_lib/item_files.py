"""Reading and writing the task's h5ad files: item tables (train, test, solution), predictions and scores.

Every file keeps its table in ``obs`` and has no variables. Item and prediction columns are plain
strings (an empty field is ``""``, never NaN); score files hold ``metric_ids``/``metric_values`` in
``uns`` and per-item values in ``obs``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anndata as ad
import pandas as pd

from biome_bench_lib.vocabulary import TASK_MECHANISM, TASK_RELATION

__all__ = ["write_items", "read_items", "write_prediction", "write_score"]


def write_items(items: pd.DataFrame, path: str | Path, uns: Mapping[str, Any]) -> None:
    """Write an item table as the obs of an h5ad file (no variables), gzip-compressed.

    Every column is written as strings, so that an empty field is ``""`` and never NaN.

    Parameters
    ----------
    items
        One row per item, indexed by item id.
    path
        The h5ad file to write.
    uns
        The file's ``uns`` (``dataset_id`` and, for the training items, the dataset's description).
    """
    obs = items.astype(str).copy()
    obs.index = obs.index.astype(str)
    ad.AnnData(obs=obs, uns=dict(uns)).write_h5ad(path, compression="gzip")


def read_items(path: str | Path) -> tuple[pd.DataFrame, dict]:
    """The obs (every column as plain strings) and uns of an item file.

    Reads prediction files too (they have no ``task`` column).

    Parameters
    ----------
    path
        An h5ad file of the task.

    Returns
    -------
    obs, uns

    Raises
    ------
    ValueError
        Naming the file when its ``task`` column holds a task other than Task A's or Task B's.
    """
    adata = ad.read_h5ad(path)
    obs = adata.obs.copy()
    for column in obs.columns:
        obs[column] = obs[column].astype(str)
    if "task" in obs.columns:
        unknown = sorted(set(obs["task"]) - {TASK_RELATION, TASK_MECHANISM})
        if unknown:
            raise ValueError(f"{path}: obs['task'] holds {unknown}; expected {TASK_RELATION!r} or {TASK_MECHANISM!r}")
    return obs, dict(adata.uns)


def write_prediction(path: str | Path, index: Sequence[str], answers: Sequence[str], *, dataset_id: str, method_id: str,
                     uns: Mapping[str, Any] | None = None) -> None:
    """Write a prediction: one ``answer`` string per test item.

    Parameters
    ----------
    path
        The h5ad file to write.
    index
        The test item ids.
    answers
        One answer per item (``None`` is written as ``""``).
    dataset_id, method_id
        Written into ``uns``.
    uns
        Further ``uns`` entries (a language-model method's ``llm_usage``).

    Raises
    ------
    ValueError
        When there are not as many answers as items.
    """
    if len(index) != len(answers):
        raise ValueError(f"{len(answers)} answers for {len(index)} items")
    obs = pd.DataFrame({"answer": ["" if a is None else str(a) for a in answers]}, index=pd.Index([str(i) for i in index]))
    ad.AnnData(obs=obs, uns={"dataset_id": dataset_id, "method_id": method_id, **dict(uns or {})}).write_h5ad(
        path, compression="gzip")


def write_score(path: str | Path, *, dataset_id: str, method_id: str, values: Mapping[str, float],
                per_item: pd.DataFrame | None = None, extra_uns: Mapping[str, Any] | None = None) -> None:
    """Write a score file: ``metric_ids``/``metric_values`` in uns and per-item values in obs.

    Parameters
    ----------
    path
        The h5ad file to write.
    dataset_id, method_id
        Written into ``uns``.
    values
        Metric id -> value (NaN: not applicable to the dataset).
    per_item
        Item id -> one column per metric id (may be empty or ``None``).
    extra_uns
        Further entries (counts, intervals) kept for the record.
    """
    obs = per_item if per_item is not None else pd.DataFrame(index=pd.Index([], dtype=str))
    obs = obs.astype(float)
    obs.index = obs.index.astype(str)
    uns = {"dataset_id": dataset_id, "method_id": method_id, "metric_ids": list(values),
           "metric_values": [float(v) for v in values.values()], **dict(extra_uns or {})}
    ad.AnnData(obs=obs, uns=uns).write_h5ad(path)
