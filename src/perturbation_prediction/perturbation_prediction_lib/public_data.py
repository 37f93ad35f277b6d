"""The published OP3 data as the task's files: loading it and describing the dataset.

Two public layouts exist:

- **Open Problems** (the living benchmark, Szałata et al. 2024 §4.4): ``de_train.h5ad`` and
  ``de_test.h5ad`` (rows = (cell type, compound), layers ``logFC``, ``P.Value``, ``adj.P.Value``,
  ``is_de``, ``is_de_adj``, ``sign_log10_pval``, ``clipped_sign_log10_pval``...) and ``id_map.csv``
  (``id, sm_name, cell_type``), in the public bucket ``openproblems-data`` under
  ``resources/perturbation_prediction/datasets/neurips-2023-data/``.
- **Kaggle** (the NeurIPS 2023 competition, §4.1): ``de_train.parquet`` (one row per (cell type,
  compound): ``cell_type, sm_name, sm_lincs_id, SMILES, control`` then one column per gene with
  ``sign(logFC) * -log10(p)``, unclipped) and ``id_map.csv`` (``id, cell_type, sm_name``) of the
  test rows, whose values were never published with the competition files (a Kaggle download
  needs an account, so these files are given by hand).

Both are turned into the task's files (``de_train``, ``de_test``, ``id_map``). For the Kaggle
layout without test labels, a held-out set is carved from ``de_train.parquet`` the way the
competition built its test set: the rows of the held-out cell types (B and myeloid cells) of a
random share of the compounds that have them.

Nothing here downloads: the Open Problems files are declared in the task's data manifest and
fetched by the data store before the dataset job (``docs/data.md``).
"""

from __future__ import annotations

import logging
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd

from pertsci.multiple_testing import benjamini_hochberg

log = logging.getLogger(__name__)

#: Where Open Problems publishes the release (the dataset's ``dataset_url``; the data manifest pins each file).
OPENPROBLEMS_URL = "https://openproblems-data.s3.amazonaws.com/resources/perturbation_prediction/datasets/neurips-2023-data"
KAGGLE_META_COLUMNS = ["cell_type", "sm_name", "sm_lincs_id", "SMILES", "control"]
CLIP_P = 1e-4


# --- shared conversion -----------------------------------------------------------------------------
def _clean_obs(obs: pd.DataFrame, where: str) -> pd.DataFrame:
    missing = {"cell_type", "sm_name"} - set(obs.columns)
    if missing:
        raise ValueError(f"{where}: obs lacks {sorted(missing)}")
    out = pd.DataFrame(index=obs.index.astype(str))
    for col in ("cell_type", "sm_name", "sm_lincs_id", "SMILES", "split"):
        if col in obs.columns:
            out[col] = obs[col].astype(str).to_numpy()
    out["SMILES"] = out["SMILES"] if "SMILES" in out else ""
    if "control" in obs.columns:
        out["control"] = obs["control"].astype(str).str.lower().isin(["true", "1"]).to_numpy()
    else:
        out["control"] = False
    return out


def _layers_from_signed_log10(values: np.ndarray) -> dict[str, np.ndarray]:
    """All p-value layers from sign(logFC) * -log10(p) (the Kaggle files hold nothing else)."""
    pval = np.power(10.0, -np.abs(values))
    # Over every row and gene at once, as the OP3 pipeline adjusts its p-values.
    adj = benjamini_hochberg(pval.ravel()).reshape(pval.shape)
    sign = np.sign(values)
    return {
        "sign_log10_pval": values,
        "clipped_sign_log10_pval": sign * -np.log10(np.maximum(pval, CLIP_P)),
        "P.Value": pval,
        "adj.P.Value": adj,
        "is_de": pval < 0.05,
        "is_de_adj": adj < 0.05,
    }


def _standard_de(adata: ad.AnnData, where: str) -> ad.AnnData:
    """An Open Problems DE h5ad in the task's layout: string obs, float and boolean layers."""
    obs = _clean_obs(adata.obs, where)
    layers: dict[str, np.ndarray] = {}
    for name, value in adata.layers.items():
        arr = value.toarray() if hasattr(value, "toarray") else np.asarray(value)
        layers[name] = arr.astype(bool) if name in ("is_de", "is_de_adj") else arr.astype(float)
    if "clipped_sign_log10_pval" not in layers:
        if "sign_log10_pval" in layers:
            derived = _layers_from_signed_log10(layers["sign_log10_pval"])
            layers = {**derived, **layers}
            layers["clipped_sign_log10_pval"] = derived["clipped_sign_log10_pval"]
        else:
            raise ValueError(f"{where}: neither clipped_sign_log10_pval nor sign_log10_pval among the layers {sorted(layers)}")
    for name in ("P.Value", "adj.P.Value", "is_de", "sign_log10_pval"):
        if name not in layers:
            raise ValueError(f"{where}: layer {name!r} is missing (layers: {sorted(layers)})")
    if "split" not in obs.columns:
        obs["split"] = np.where(obs["control"], "control", "train")
    out = ad.AnnData(obs=obs, var=pd.DataFrame(index=adata.var_names.astype(str)), layers=layers)
    out.uns.update({k: v for k, v in adata.uns.items() if str(k).startswith("dataset_") and isinstance(v, str)})
    return out


def _apply_uns(adatas: list[ad.AnnData], defaults: dict) -> None:
    for a in adatas:
        for key, value in defaults.items():
            if value and key not in a.uns:
                a.uns[key] = value
        a.uns["dataset_id"] = defaults.get("dataset_id") or a.uns.get("dataset_id", "op3")


# --- Open Problems ---------------------------------------------------------------------------------
def load_openproblems(de_train_path: str | Path, de_test_path: str | Path, id_map_path: str | Path,
                      dataset_uns: dict | None = None) -> tuple[ad.AnnData, ad.AnnData, pd.DataFrame]:
    """The Open Problems files as the task's (de_train, de_test, id_map).

    ``de_test`` rows are put in ``id_map`` order (matched by cell type and compound) and restricted
    to the genes of ``de_train``.

    Parameters
    ----------
    de_train_path, de_test_path, id_map_path
        The published files.
    dataset_uns
        ``dataset_*`` metadata set in both DE files where they lack it (``dataset_id`` always).

    Returns
    -------
    de_train, de_test, id_map

    Raises
    ------
    ValueError
        Naming the file, when rows of id_map are not in de_test, genes of de_train are not in
        de_test, or a file lacks columns or layers of the layout.
    """
    de_train = _standard_de(ad.read_h5ad(de_train_path), str(de_train_path))
    de_test = _standard_de(ad.read_h5ad(de_test_path), str(de_test_path))
    id_map = pd.read_csv(id_map_path)
    missing = {"id", "cell_type", "sm_name"} - set(id_map.columns)
    if missing:
        raise ValueError(f"{id_map_path}: id_map lacks the columns {sorted(missing)}")
    id_map = id_map.sort_values("id").reset_index(drop=True)
    pos = {(c, s): i for i, (c, s) in enumerate(zip(de_test.obs["cell_type"], de_test.obs["sm_name"]))}
    order = [pos.get((str(c), str(s))) for c, s in zip(id_map["cell_type"], id_map["sm_name"])]
    if any(o is None for o in order):
        absent = [f"{c}, {s}" for (c, s), o in zip(zip(id_map["cell_type"], id_map["sm_name"]), order) if o is None]
        raise ValueError(f"{id_map_path}: {len(absent)} rows are not in {de_test_path}, e.g. {absent[:3]}")
    missing_genes = de_train.var_names.difference(de_test.var_names)
    if len(missing_genes):
        raise ValueError(f"{de_test_path}: lacks {len(missing_genes)} genes of {de_train_path}, e.g. {list(missing_genes[:3])}")
    de_test = de_test[order, de_train.var_names].copy()
    de_test.obs_names = [f"{c}, {s}" for c, s in zip(de_test.obs["cell_type"], de_test.obs["sm_name"])]
    id_map = pd.DataFrame({"id": np.arange(len(id_map)), "cell_type": id_map["cell_type"].astype(str),
                           "sm_name": id_map["sm_name"].astype(str)})
    _apply_uns([de_train, de_test], dataset_uns or {})
    return de_train, de_test, id_map


# --- Kaggle ----------------------------------------------------------------------------------------
def read_kaggle_table(path: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A Kaggle-layout table: (row metadata, rows x genes values).

    Parameters
    ----------
    path
        A parquet file in the layout of the competition's ``de_train.parquet``.

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame)
        The metadata columns present among ``cell_type, sm_name, sm_lincs_id, SMILES, control, id``,
        and the gene columns.
    """
    table = pd.read_parquet(path)
    missing = {"cell_type", "sm_name"} - set(table.columns)
    if missing:
        raise ValueError(f"{path}: lacks the columns {sorted(missing)} of the Kaggle layout")
    meta_cols = [c for c in KAGGLE_META_COLUMNS + ["id"] if c in table.columns]
    values = table.drop(columns=meta_cols)
    non_numeric = [c for c in values.columns if not pd.api.types.is_numeric_dtype(values[c])]
    if non_numeric:
        raise ValueError(f"{path}: gene columns must be numeric; found {non_numeric[:5]}")
    return table[meta_cols].reset_index(drop=True), values.reset_index(drop=True)


def _kaggle_de(meta: pd.DataFrame, values: pd.DataFrame, split: str, where: str) -> ad.AnnData:
    obs = _clean_obs(meta, where)
    obs["split"] = np.where(obs["control"], "control", split)
    obs.index = [f"{c}, {s}" for c, s in zip(obs["cell_type"], obs["sm_name"])]
    arr = values.to_numpy(dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{where}: {int((~np.isfinite(arr)).sum())} non-finite values")
    return ad.AnnData(obs=obs, var=pd.DataFrame(index=values.columns.astype(str)), layers=_layers_from_signed_log10(arr))


def load_kaggle(de_train_path: str | Path, id_map_path: str | Path | None = None, *,
                test_values_path: str | Path | None = None,
                holdout_cell_types: tuple[str, ...] = ("B cells", "Myeloid cells"), holdout_fraction: float = 0.5,
                seed: int = 0, dataset_uns: dict | None = None) -> tuple[ad.AnnData, ad.AnnData, pd.DataFrame]:
    """The Kaggle files as the task's (de_train, de_test, id_map).

    With ``test_values_path`` (a table in the de_train layout holding the id_map rows, with or
    without an ``id`` column) the competition's own split is used. Otherwise the held-out rows are
    those of ``holdout_cell_types`` for ``holdout_fraction`` of the non-control compounds that have
    them in ``de_train``, chosen with ``seed``; they leave the training data.

    Parameters
    ----------
    de_train_path
        The competition's ``de_train.parquet``.
    id_map_path
        Its ``id_map.csv`` (needed with ``test_values_path``).
    test_values_path
        Values of the id_map rows, when available.
    holdout_cell_types, holdout_fraction, seed
        The held-out rows without test values.
    dataset_uns
        As :func:`load_openproblems`.

    Returns
    -------
    de_train, de_test, id_map
    """
    meta, values = read_kaggle_table(de_train_path)
    if test_values_path is not None:
        if id_map_path is None:
            raise ValueError("load_kaggle: test values need the id_map that orders them")
        id_map = pd.read_csv(id_map_path).sort_values("id").reset_index(drop=True)
        t_meta, t_values = read_kaggle_table(test_values_path)
        pos = {(c, s): i for i, (c, s) in enumerate(zip(t_meta["cell_type"], t_meta["sm_name"]))}
        order = [pos.get((c, s)) for c, s in zip(id_map["cell_type"], id_map["sm_name"])]
        if any(o is None for o in order):
            raise ValueError(f"{test_values_path}: lacks rows of {id_map_path}")
        t_values = t_values.iloc[order][values.columns].reset_index(drop=True)
        t_meta = t_meta.iloc[order].reset_index(drop=True)
        test_mask = None
    else:
        if id_map_path is not None:
            log.info("%s: the competition's test rows have no published values; holding out rows of %s instead",
                     id_map_path, list(holdout_cell_types))
        rng = np.random.default_rng(seed)
        is_control = _clean_obs(meta, str(de_train_path))["control"].to_numpy()
        in_holdout = meta["cell_type"].astype(str).isin(holdout_cell_types).to_numpy()
        candidates = sorted(set(meta.loc[in_holdout & ~is_control, "sm_name"].astype(str)))
        if len(candidates) < 2:
            raise ValueError(f"{de_train_path}: fewer than two non-control compounds with rows in {list(holdout_cell_types)}")
        n_hold = max(1, int(round(holdout_fraction * len(candidates))))
        held = set(rng.choice(candidates, min(n_hold, len(candidates) - 1), replace=False))
        test_mask = in_holdout & meta["sm_name"].astype(str).isin(held).to_numpy()
        t_meta, t_values = meta[test_mask].reset_index(drop=True), values[test_mask].reset_index(drop=True)
        meta, values = meta[~test_mask].reset_index(drop=True), values[~test_mask].reset_index(drop=True)
        id_map = pd.DataFrame({"id": np.arange(len(t_meta)), "cell_type": t_meta["cell_type"].astype(str),
                               "sm_name": t_meta["sm_name"].astype(str)})
    de_train = _kaggle_de(meta, values, "train", str(de_train_path))
    de_test = _kaggle_de(t_meta, t_values, "test", str(test_values_path or de_train_path))
    id_map = pd.DataFrame({"id": np.arange(len(id_map)), "cell_type": id_map["cell_type"].astype(str),
                           "sm_name": id_map["sm_name"].astype(str)})
    _apply_uns([de_train, de_test], dataset_uns or {})
    return de_train, de_test, id_map


def to_kaggle_table(de: ad.AnnData, layer: str = "sign_log10_pval") -> pd.DataFrame:
    """A DE file in the Kaggle layout (metadata columns, then one column per gene).

    Parameters
    ----------
    de
        A DE file of the task.
    layer
        The values written (the competition's are ``sign_log10_pval``).

    Returns
    -------
    pandas.DataFrame
        One row per row of ``de``.
    """
    meta = pd.DataFrame({c: de.obs[c].astype(str).to_numpy() if c != "control" else de.obs[c].astype(bool).to_numpy()
                         for c in KAGGLE_META_COLUMNS if c in de.obs.columns})
    values = pd.DataFrame(np.asarray(de.layers[layer], dtype=float), columns=de.var_names.astype(str))
    return pd.concat([meta, values], axis=1)


# --- dataset metadata ------------------------------------------------------------------------------
def openproblems_uns(dataset_id: str = "") -> dict:
    """The ``dataset_*`` metadata of the Open Problems release.

    Parameters
    ----------
    dataset_id
        The dataset's id (default ``neurips-2023-data``).

    Returns
    -------
    dict
        ``dataset_id``, ``dataset_name``, ``dataset_summary``, ``dataset_description``,
        ``dataset_url``, ``dataset_reference``, ``dataset_organism``, ``dataset_license``.
    """
    return {"dataset_id": dataset_id or "neurips-2023-data",
            "dataset_name": "OP3 published (Open Problems)",
            "dataset_summary": "NeurIPS 2023 scPerturb DGE: limma-voom DE of 146 compounds in PBMCs of three donors, "
                               "Open Problems release.",
            "dataset_description": "Differential expression of (cell type, compound) pairs against DMSO from the OP3 single-cell "
                                   "perturbation screen, as published by Open Problems (public test merged into training).",
            "dataset_url": OPENPROBLEMS_URL, "dataset_reference": "szalata2024benchmark",
            "dataset_organism": "homo_sapiens", "dataset_license": "CC BY 4.0"}


def kaggle_uns(dataset_id: str = "", held_out: str | None = None) -> dict:
    """The ``dataset_*`` metadata of the Kaggle competition's files.

    Parameters
    ----------
    dataset_id
        The dataset's id (default ``neurips-2023-kaggle``).
    held_out
        How the test rows were held out, or None when the test rows' values were given.

    Returns
    -------
    dict
        As :func:`openproblems_uns`.
    """
    return {"dataset_id": dataset_id or "neurips-2023-kaggle",
            "dataset_name": "OP3 published (Kaggle)",
            "dataset_summary": "NeurIPS 2023 scPerturb DGE in the Kaggle competition layout (sign(logFC) * -log10(p) only).",
            "dataset_description": "The competition's de_train.parquet; "
                                   + (f"held-out rows: {held_out}." if held_out else "its test rows' values were given."),
            "dataset_url": "https://www.kaggle.com/competitions/open-problems-single-cell-perturbations",
            "dataset_reference": "szalata2024benchmark", "dataset_organism": "homo_sapiens",
            "dataset_license": "Kaggle competition data licence"}


def no_half_cells(de_test: ad.AnnData, reason: str) -> ad.AnnData:
    """The ``de_test_half`` of a dataset without single cells: no rows, and why.

    Parameters
    ----------
    de_test
        The dataset's ``de_test`` (its genes and ``uns`` are kept).
    reason
        Why no half-cell DE can be computed; the ceiling control fails with it.

    Returns
    -------
    anndata.AnnData
        0 rows x the genes of ``de_test``, the ceiling's layers empty, ``uns["half_cells_unavailable"]``.
    """
    empty = np.zeros((0, de_test.n_vars))
    obs = pd.DataFrame({"cell_type": pd.Series([], dtype=str), "sm_name": pd.Series([], dtype=str)},
                       index=pd.Index([], dtype=str))
    out = ad.AnnData(obs=obs,
                     var=pd.DataFrame(index=de_test.var_names.copy()),
                     layers={"clipped_sign_log10_pval": empty, "sign_log10_pval": empty, "P.Value": empty.copy()},
                     uns={k: v for k, v in de_test.uns.items() if k.startswith("dataset_")})
    out.uns["half_cells_unavailable"] = reason
    return out
