"""The task's files: writing a dataset, reading its training pairs and test items, writing a prediction.

A dataset is three AnnData files whose ``obs`` hold the rows (training pairs, test items,
solution) plus the knowledge graph and gene descriptions as parquet tables. A prediction's
``obs`` has a ``score`` and a ``text`` per test item (:func:`prediction_frame`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from perturbqa_lib.task_items import PAIR_SUBTASKS

__all__ = ["write_dataset", "read_dataset", "set_members", "prediction_frame", "write_prediction"]


def write_dataset(dataset: Mapping, edges: pd.DataFrame, descriptions: pd.DataFrame, *, train: str | Path,
                  test: str | Path, solution: str | Path, kg_edges: str | Path, gene_descriptions: str | Path) -> None:
    """Write a dataset (from :func:`perturbqa_dataset` or the label pipeline) to the task's files."""
    import anndata as ad

    uns = dict(dataset["uns"])
    train_uns = dict(uns)
    if len(dataset.get("sets", [])):
        train_uns["downstream_sets"] = dataset["sets"].reset_index(drop=True)
    short = {k: uns[k] for k in ("dataset_id", "subtask", "cell_line", "cell_line_description", "downstream_type")}
    # How many test items are unlabelled decoys of the cross (dataset_assembly.scored_cross): a count,
    # not which; and how many labelled pairs of one-class genes were left out.
    short["n_decoy_items"] = int(uns.get("n_decoy_items", 0))
    short["n_unscored_pairs"] = int(uns.get("n_unscored_pairs", 0))

    def strings(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        for col in frame.columns:
            if frame[col].dtype == object:
                frame[col] = frame[col].astype(str)
        frame.index = frame.index.astype(str)
        return frame

    def write(frame: pd.DataFrame, uns_: dict, path) -> None:
        # gzip pays off for large tables only; on small ones its chunk overhead grows the file.
        ad.AnnData(obs=strings(frame), uns=uns_).write_h5ad(path, compression="gzip" if len(frame) > 5000 else None)

    write(dataset["train"], train_uns, train)
    write(dataset["test"], short, test)
    write(dataset["solution"], short, solution)
    edges.to_parquet(kg_edges, index=False)
    descriptions.to_parquet(gene_descriptions, index=False)


def read_dataset(train: str | Path, test: str | Path) -> tuple:
    """Read a dataset's training pairs and test items (what every method starts from).

    Returns
    -------
    train, test : anndata.AnnData
        As written by :func:`write_dataset`; ``train.uns["downstream_sets"]`` becomes a mapping
        (set name -> members) in ``train.uns["sets"]``.
    """
    import anndata as ad

    tr = ad.read_h5ad(train)
    te = ad.read_h5ad(test)
    # anndata stores repeated strings as categoricals; plain strings keep later edits simple.
    for adata in (tr, te):
        for col in adata.obs.columns:
            if isinstance(adata.obs[col].dtype, pd.CategoricalDtype):
                adata.obs[col] = adata.obs[col].astype(str)
    tr.uns["sets"] = set_members(tr.uns.get("downstream_sets"))
    return tr, te


def set_members(sets: pd.DataFrame | None) -> dict[str, list[str]]:
    """``uns['downstream_sets']`` (two columns ``set_name, gene``) as a mapping."""
    if sets is None or len(sets) == 0:
        return {}
    return {str(k): list(map(str, v)) for k, v in sets.groupby("set_name", sort=False)["gene"]}


def prediction_frame(test_obs: pd.DataFrame, scores: Mapping[str, float] | pd.Series | None = None,
                     texts: Mapping[str, str] | pd.Series | None = None) -> pd.DataFrame:
    """The ``obs`` of a prediction: ``score`` (NaN where not given) and ``text`` (``""``) per item.

    A method that does not address a subtask leaves its items at NaN / ``""``; the metrics then
    report that subtask as not addressed rather than scoring a guess.
    """
    out = pd.DataFrame(index=test_obs.index.copy())
    out["score"] = np.nan if scores is None else pd.Series(scores, dtype=float).reindex(out.index).to_numpy()
    text = pd.Series(texts, dtype=object).reindex(out.index) if texts is not None else pd.Series(index=out.index, dtype=object)
    out["text"] = text.fillna("").astype(str).to_numpy()
    return out


def write_prediction(path: str | Path, test_obs: pd.DataFrame, dataset_id: str, method_id: str, *,
                     scores: Mapping[str, float] | pd.Series | None = None,
                     texts: Mapping[str, str] | pd.Series | None = None, uns: Mapping | None = None) -> None:
    """Write a prediction file (see :func:`prediction_frame`)."""
    import anndata as ad

    obs = prediction_frame(test_obs, scores, texts)
    pairs = test_obs["subtask"].isin(PAIR_SUBTASKS).to_numpy()
    given = ~np.isnan(obs["score"].to_numpy())
    if given[pairs].any() and not given[pairs].all():
        raise ValueError(f"{path}: scores given for some pair items but not for {int((~given[pairs]).sum())} others")
    if np.isinf(obs["score"].to_numpy()[given]).any():
        raise ValueError(f"{path}: infinite scores")
    ad.AnnData(obs=obs, uns={"dataset_id": dataset_id, "method_id": method_id, **dict(uns or {})}).write_h5ad(path)
