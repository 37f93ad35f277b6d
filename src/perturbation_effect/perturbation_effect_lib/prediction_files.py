"""The method side of the task's files: training profiles and LSFT setting read, prediction file written."""

from __future__ import annotations

from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

__all__ = ["training_profiles", "lsft_fraction", "fit_summary", "write_prediction"]


def training_profiles(train: ad.AnnData) -> np.ndarray:
    """The training profiles of a training file (``X``), dense, float64: perturbations x genes."""
    return np.asarray(train.X.toarray() if sp.issparse(train.X) else train.X, dtype=np.float64)


def lsft_fraction(train: ad.AnnData, requested: float | None) -> float:
    """The LSFT share a method uses: ``requested`` when given, else the dataset's ``uns["lsft_fraction"]`` (0 when absent)."""
    return float(train.uns.get("lsft_fraction", 0.0)) if requested is None else requested


def fit_summary(excluded: dict[str, list[str]], pca_convention: str) -> dict:
    """The ``uns`` entries that say which training perturbations were outside the paper's model.

    Parameters
    ----------
    excluded
        Perturbation ids per reason (:attr:`perturbation_effect_lib.linear_model.LinearModel.excluded`).
    pca_convention
        The convention of the fit: under ``"authors"`` these perturbations were left out of the
        fit; under ``"perturbations"`` they were fitted with a summed or zero embedding.

    Returns
    -------
    dict
        ``pca_convention``, ``n_train_combination``, ``n_train_target_without_embedding`` and
        ``train_target_without_embedding`` (the ids, ``;``-joined).
    """
    return {
        "pca_convention": pca_convention,
        "n_train_combination": len(excluded.get("combination", [])),
        "n_train_target_without_embedding": len(excluded.get("target_without_embedding", [])),
        "train_target_without_embedding": ";".join(excluded.get("target_without_embedding", [])),
    }


def write_prediction(path: str | Path, prediction: np.ndarray, *, obs: pd.DataFrame, var: pd.DataFrame,
                     dataset_id: str, method_id: str, uns: dict | None = None) -> None:
    """Write a prediction file (``file_prediction``).

    Parameters
    ----------
    path
        Where to write the h5ad (gzip-compressed).
    prediction
        Predicted profiles, test perturbations x genes (``layers["prediction"]``).
    obs
        Indexed by the test perturbations: no columns, or the hardness columns of a method with a
        perturbation embedding.
    var
        Indexed by the genes of the training file.
    dataset_id, method_id
        Written to ``uns``.
    uns
        More ``uns`` entries (e.g. :func:`fit_summary`).
    """
    uns = {**(uns or {}), "dataset_id": dataset_id, "method_id": method_id}
    ad.AnnData(obs=obs, var=var, layers={"prediction": prediction}, uns=uns).write_h5ad(path, compression="gzip")
