"""Readers of the label files published with PerturbQA, checked, and the screens they cover.

The published files (``perturbqa/`` of the shared data): :func:`read_label_csv` reads
``<screen>-de.csv`` / ``<screen>-dir.csv`` (``pert, gene, label, split``),
:func:`read_clusters_json` the gene-set enrichment clusters and :func:`read_set_mapping` the K562
gene clusters used as downstream entities of K562-set. :func:`responses_from_labels` joins the two
label files into one ternary response per pair (``unchanged``, ``down``, ``up``), the form every
method of the task trains on; :func:`load_screen` does all of it for one screen, whose files its
manifest names (:mod:`perturbqa_lib.screen_manifest`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from perturbqa_lib.screen_manifest import ScreenManifest

__all__ = ["read_label_csv", "read_clusters_json", "read_set_mapping", "responses_from_labels", "load_screen"]

_LABEL_COLUMNS = ["pert", "gene", "label", "split"]


def read_label_csv(path: str | Path) -> pd.DataFrame:
    """Read a PerturbQA label file (``pert, gene, label, split``).

    Raises
    ------
    ValueError
        Naming the file, for missing columns, labels other than 0/1, splits other than
        train/test, duplicated pairs, or a perturbation in both splits.
    """
    path = Path(path)
    df = pd.read_csv(path, dtype={"pert": str, "gene": str, "split": str})
    missing = [c for c in _LABEL_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; a PerturbQA label file has {_LABEL_COLUMNS}")
    df = df[_LABEL_COLUMNS].copy()
    if df[["pert", "gene"]].isna().any().any():
        raise ValueError(f"{path}: empty pert or gene in {int(df[['pert', 'gene']].isna().any(axis=1).sum())} rows")
    bad = ~df["label"].isin([0, 1])
    if bad.any():
        raise ValueError(f"{path}: label must be 0 or 1; row {int(np.flatnonzero(bad)[0]) + 2} has {df['label'][bad].iloc[0]!r}")
    bad = ~df["split"].isin(["train", "test"])
    if bad.any():
        raise ValueError(f"{path}: split must be train or test; found {sorted(df['split'][bad].unique())[:3]}")
    dup = df.duplicated(["pert", "gene"])
    if dup.any():
        raise ValueError(f"{path}: {int(dup.sum())} duplicated (pert, gene) pairs, e.g. {tuple(df[dup].iloc[0][['pert', 'gene']])}")
    both = df.groupby("pert")["split"].nunique()
    if (both > 1).any():
        raise ValueError(f"{path}: perturbations in both splits, e.g. {list(both[both > 1].index[:3])}")
    df["label"] = df["label"].astype(int)
    return df.reset_index(drop=True)


def read_clusters_json(path: str | Path) -> pd.DataFrame:
    """Read a gene-set enrichment file: a list of ``{"genes": [...], "label": str or null}``.

    Returns
    -------
    pandas.DataFrame
        ``cluster`` (position in the file, from 1), ``members`` (list of str), ``annotation``
        (str, ``""`` when the cluster was not annotated).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON: {err}") from None
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of clusters")
    rows = []
    for i, entry in enumerate(data, 1):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("genes"), list) or not entry["genes"]:
            raise ValueError(f"{path}: cluster {i} needs a non-empty list 'genes'")
        label = entry.get("label")
        rows.append({"cluster": i, "members": [str(g) for g in entry["genes"]], "annotation": "" if label is None else str(label).strip()})
    return pd.DataFrame(rows)


def read_set_mapping(path: str | Path) -> dict[str, list[str]]:
    """Read the K562 gene clusters used as downstream entities (``{"<id>-<name>": [genes]}``)."""
    path = Path(path)
    data = json.loads(path.read_text())
    if not isinstance(data, Mapping) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError(f"{path}: expected a mapping of set name -> list of genes")
    return {str(k): [str(g) for g in v] for k, v in data.items()}


def responses_from_labels(de: pd.DataFrame, direction: pd.DataFrame, *, where: str = "") -> pd.DataFrame:
    """Join the ``de`` and ``dir`` label tables into one ternary response per pair.

    Parameters
    ----------
    de, direction
        Tables from :func:`read_label_csv`. Every ``dir`` pair must be a DE pair of ``de``, with
        the same split.
    where
        Prefix of error messages (e.g. the screen's file names).

    Returns
    -------
    pandas.DataFrame
        ``pert, gene, split, response`` with response ``unchanged`` (not DE), ``down`` or ``up``.
    """
    merged = de.merge(direction, on=["pert", "gene"], how="left", suffixes=("", "_dir"), validate="one_to_one")
    orphans = direction.merge(de, on=["pert", "gene"], how="left", indicator=True)
    if (orphans["_merge"] == "left_only").any():
        raise ValueError(f"{where}: {int((orphans['_merge'] == 'left_only').sum())} direction pairs are not in the DE file")
    has_dir = merged["label_dir"].notna()
    if (merged.loc[has_dir, "label"] != 1).any():
        raise ValueError(f"{where}: direction labels given for pairs that are not differentially expressed")
    if (merged.loc[has_dir, "split"] != merged.loc[has_dir, "split_dir"]).any():
        raise ValueError(f"{where}: a pair is in different splits of the DE and direction files")
    missing = (merged["label"] == 1) & ~has_dir
    if missing.any():
        raise ValueError(f"{where}: {int(missing.sum())} DE pairs have no direction label")
    response = np.where(merged["label"] == 0, "unchanged", np.where(merged["label_dir"] == 1, "up", "down"))
    return pd.DataFrame({"pert": merged["pert"], "gene": merged["gene"], "split": merged["split"], "response": response})


def load_screen(data_dir: str | Path, manifest: ScreenManifest) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """Responses of every labelled pair of a screen, and its downstream sets.

    Parameters
    ----------
    data_dir : path
        Folder of the files the manifest names.
    manifest : ScreenManifest
        The screen's declaration (label files, downstream type, sets file).

    Returns
    -------
    responses : pandas.DataFrame
        ``pert, gene, split, response`` (see :func:`responses_from_labels`).
    sets : dict
        Downstream gene sets (a ``gene_set`` screen such as K562-set) or empty.

    Raises
    ------
    ValueError
        Naming the file, for a label file without pairs, or downstream entities of a gene-set
        screen that its sets file does not define.
    """
    de_path, dir_path = manifest.file("de", data_dir), manifest.file("dir", data_dir)
    de = read_label_csv(de_path)
    if de.empty:
        raise ValueError(f"{de_path}: no labelled pairs (screen manifest {manifest.path})")
    responses = responses_from_labels(de, read_label_csv(dir_path), where=f"{de_path} + {dir_path.name}")
    sets: dict[str, list[str]] = {}
    if manifest.downstream_type == "gene_set":
        sets_path = manifest.file("downstream_sets", data_dir)
        sets = read_set_mapping(sets_path)
        unknown = sorted(set(responses["gene"]) - set(sets))
        if unknown:
            raise ValueError(f"{sets_path}: downstream entities of {de_path.name} without members here: {unknown[:3]}")
    return responses, sets
