"""Reading and writing the task's files: DE layers, id_map, predictions (also aligned to the truth)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd


def read_de(path: str | Path, layer: str) -> tuple[ad.AnnData, np.ndarray]:
    """A DE file and one of its layers as a dense float matrix.

    Parameters
    ----------
    path
        ``de_train.h5ad`` or ``de_test.h5ad``.
    layer
        The layer to read (e.g. ``clipped_sign_log10_pval``).

    Returns
    -------
    (anndata.AnnData, numpy.ndarray)
        The file and its rows x genes values.

    Raises
    ------
    ValueError
        Naming the file, when the layer is missing or has non-finite values.
    """
    adata = ad.read_h5ad(path)
    if layer not in adata.layers:
        raise ValueError(f"{path}: no layer {layer!r}; layers are {sorted(adata.layers)}")
    values = np.asarray(adata.layers[layer], dtype=float)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{path}: layer {layer!r} has {int((~np.isfinite(values)).sum())} non-finite values")
    return adata, values


def read_id_map(path: str | Path) -> pd.DataFrame:
    """``id_map.csv``, the rows to predict, with its columns checked.

    Parameters
    ----------
    path
        The id_map file.

    Returns
    -------
    pandas.DataFrame
        At least ``id``, ``cell_type``, ``sm_name``.

    Raises
    ------
    ValueError
        Naming the file and the missing columns.
    """
    id_map = pd.read_csv(path)
    missing = {"id", "cell_type", "sm_name"} - set(id_map.columns)
    if missing:
        raise ValueError(f"{path}: id_map lacks the columns {sorted(missing)}")
    return id_map


def row_keys(obs: pd.DataFrame) -> pd.DataFrame:
    """The (cell type, compound) of each row, as strings.

    Parameters
    ----------
    obs
        ``obs`` of a DE file, or an id_map.

    Returns
    -------
    pandas.DataFrame
        ``cell_type`` and ``sm_name`` columns, with a fresh range index.
    """
    return pd.DataFrame({"cell_type": obs["cell_type"].astype(str).to_numpy(),
                         "sm_name": obs["sm_name"].astype(str).to_numpy()})


def write_prediction(values: np.ndarray, id_map: pd.DataFrame, genes: Sequence[str] | pd.Index, dataset_id: str,
                     method_id: str, path: str | Path) -> None:
    """Write a prediction file: ``layers["prediction"]``, rows = id_map ids (in order), columns = genes.

    Parameters
    ----------
    values
        Rows of ``id_map`` x ``genes``.
    id_map
        The rows predicted.
    genes
        Gene names (those of ``de_train``).
    dataset_id, method_id
        Stored in ``uns``.
    path
        Where to write (gzip-compressed h5ad).

    Raises
    ------
    ValueError
        When ``values`` does not have one row per id and one column per gene.
    """
    values = np.asarray(values, dtype=float)
    if values.shape != (len(id_map), len(genes)):
        raise ValueError(f"prediction has shape {values.shape}, expected {(len(id_map), len(genes))}")
    out = ad.AnnData(
        obs=pd.DataFrame(index=id_map["id"].astype(str).to_numpy()),
        var=pd.DataFrame(index=pd.Index(list(genes), dtype=str)),
        layers={"prediction": values},
        uns={"dataset_id": dataset_id, "method_id": method_id},
    )
    out.write_h5ad(Path(path), compression="gzip")


def aligned_truth_prediction(de_test_path: str | Path, layer: str, prediction_path: str | Path
                             ) -> tuple[ad.AnnData, ad.AnnData, np.ndarray, np.ndarray]:
    """True and predicted matrices over the genes of de_test, rows in de_test (= id_map) order.

    The prediction's rows are the id_map ids 0..n-1; genes are aligned by name.

    Parameters
    ----------
    de_test_path
        The truth.
    layer
        The layer of de_test that was predicted.
    prediction_path
        A prediction file (:func:`write_prediction`).

    Returns
    -------
    (anndata.AnnData, anndata.AnnData, numpy.ndarray, numpy.ndarray)
        de_test, the prediction file, the true and the predicted values (rows x genes of de_test).

    Raises
    ------
    ValueError
        Naming the prediction file, when it lacks genes of de_test, has other rows, or non-finite
        values.
    """
    de_test, truth = read_de(de_test_path, layer)
    pred = ad.read_h5ad(prediction_path)
    if "prediction" not in pred.layers:
        raise ValueError(f"{prediction_path}: no layer 'prediction'")
    missing = de_test.var_names.difference(pred.var_names)
    if len(missing):
        raise ValueError(f"{prediction_path}: lacks {len(missing)} genes of de_test, e.g. {list(missing[:3])}")
    try:
        ids = pred.obs_names.astype(int)
    except (TypeError, ValueError):
        raise ValueError(f"{prediction_path}: row names must be the integer ids of id_map") from None
    if sorted(ids) != list(range(de_test.n_obs)):
        raise ValueError(f"{prediction_path}: has {pred.n_obs} rows with ids {list(ids[:3])}...; "
                         f"expected the {de_test.n_obs} ids 0..{de_test.n_obs - 1} of id_map")
    values = np.asarray(pred.layers["prediction"], dtype=float)
    values = values[np.argsort(ids)][:, pred.var_names.get_indexer(de_test.var_names)]
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{prediction_path}: {int((~np.isfinite(values)).sum())} non-finite predicted values")
    return de_test, pred, truth, values


def read_half_cell_de(path: str | Path, layer: str, id_map: pd.DataFrame, genes: Sequence[str] | pd.Index
                      ) -> np.ndarray:
    """The half-cell DE of the test rows (``de_test_half``) as a prediction: id_map rows x ``genes``.

    Parameters
    ----------
    path
        ``de_test_half.h5ad``.
    layer
        The layer predicted.
    id_map
        The rows to predict; the file's rows must be these, in this order.
    genes
        The genes of the prediction (those of ``de_train``).

    Returns
    -------
    numpy.ndarray
        Rows of ``id_map`` x ``genes``.

    Raises
    ------
    ValueError
        Naming the file: when the dataset has no half-cell DE (with its reason), its rows are not
        those of id_map, or it lacks genes.
    """
    half, values = read_de(path, layer)
    if half.n_obs == 0:
        reason = half.uns.get("half_cells_unavailable", "the file has no rows")
        raise ValueError(f"{path}: no half-cell DE for this dataset: {reason}")
    keys, want = row_keys(half.obs), row_keys(id_map)
    if len(keys) != len(want) or not (keys.to_numpy() == want.to_numpy()).all():
        raise ValueError(f"{path}: its {half.n_obs} rows are not the {len(id_map)} rows of id_map in order")
    missing = pd.Index(genes).difference(half.var_names)
    if len(missing):
        raise ValueError(f"{path}: lacks {len(missing)} genes of de_train, e.g. {list(missing[:3])}")
    return values[:, half.var_names.get_indexer(pd.Index(genes))]
