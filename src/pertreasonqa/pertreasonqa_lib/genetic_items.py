"""PertReasonQA's genetic items: PerturbQA's CRISPRi outcomes and their split (Kim et al. 2026, section 2.2 and appendix B.1).

- :func:`load_perturbqa_items`: outcome items (cell, perturbation, effect gene, label) from the
  PerturbQA labels: ``de`` label 0 -> *unchanged*; ``de`` 1 with ``dir`` 1 -> *up*, 0 -> *down*.
- :func:`genetic_split`: B.1's functional split of the CRISPRi perturbations
  (:mod:`pertreasonqa_lib.functional_splits`), and :func:`genetic_items` the items with their folds.

Choices the paper leaves open
-----------------------------
- Cells: K562 is the ID cell (train, valid, ID-cell tests), RPE1 the OOD cell (tests only, as in
  Table 1); RPE1 items of train/valid perturbations are not used. PerturbQA's own split column is
  ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pertreasonqa_lib.functional_splits import (
    N_CLUSTERS,
    OOD_FRACTION,
    assign_splits,
    fold_of_items,
    functional_clusters,
)
from pertsci import knowledge_graphs as kg

#: PerturbQA file prefix of each cell line and whether it is in or out of distribution.
CELLS = {"K562": {"prefix": "k562", "distribution": "ID"},
         "RPE1": {"prefix": "rpe1", "distribution": "OOD"}}


def load_perturbqa_items(cell: str, data_dir: str | Path) -> pd.DataFrame:
    """Outcome items of one cell line from PerturbQA's ``<cell>-de.csv`` and ``<cell>-dir.csv``.

    Parameters
    ----------
    cell
        ``K562`` or ``RPE1`` (:data:`CELLS`).
    data_dir
        The shared data folder, holding ``perturbqa/``.

    Returns
    -------
    pandas.DataFrame
        Columns ``cell``, ``perturbation``, ``perturbation_type`` (``CRISPRi``), ``gene``, ``label``
        (up/down/unchanged), ``perturbqa_split``.
    """
    if cell not in CELLS:
        raise KeyError(f"unknown cell {cell!r}; known: {sorted(CELLS)}")
    base = Path(data_dir)
    de_path = base / "perturbqa" / f"{CELLS[cell]['prefix']}-de.csv"
    dir_path = base / "perturbqa" / f"{CELLS[cell]['prefix']}-dir.csv"
    de, dr = pd.read_csv(de_path), pd.read_csv(dir_path)
    for path, df in ((de_path, de), (dir_path, dr)):
        missing = {"pert", "gene", "label", "split"} - set(df.columns)
        if missing:
            raise ValueError(f"{path}: missing columns {sorted(missing)}")
        if df.duplicated(["pert", "gene"]).any():
            raise ValueError(f"{path}: duplicated (pert, gene) rows")
    merged = de.merge(dr[["pert", "gene", "label"]].rename(columns={"label": "dir"}), on=["pert", "gene"], how="left")
    bad = (merged["label"] == 1) & merged["dir"].isna()
    if bad.any():
        raise ValueError(f"{dir_path}: {int(bad.sum())} DE pairs of {de_path.name} have no direction")
    label = np.where(merged["label"] == 0, "unchanged", np.where(merged["dir"] == 1, "up", "down"))
    return pd.DataFrame({"cell": cell, "perturbation": merged["pert"].astype(str), "perturbation_type": "CRISPRi",
                         "gene": merged["gene"].astype(str), "label": label, "perturbqa_split": merged["split"]})


def genetic_split(edges: pd.DataFrame, data_dir: str | Path, *, n_clusters: int = N_CLUSTERS,
                  seed: int = 0, ood_fraction: float = OOD_FRACTION, assign: Sequence[str] = ()
                  ) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series]:
    """The functional split of the CRISPRi perturbations (B.1) and the clusters it rests on.

    Parameters
    ----------
    edges
        Directed gene edges of the network used by B.1 (``source``, ``target``).
    data_dir
        The shared data folder, holding ``perturbqa/`` (the items) and ``knowledge_graphs/`` (GO BP).
    n_clusters, seed, ood_fraction
        See :func:`~pertreasonqa_lib.functional_splits.functional_clusters` and
        :func:`~pertreasonqa_lib.functional_splits.assign_splits`.
    assign
        Further genes to place in the fitted clusters (:func:`~pertreasonqa_lib.functional_splits.functional_clusters`).

    Returns
    -------
    items, splits, clusters
        Every K562 and RPE1 item (:func:`load_perturbqa_items`), the per-perturbation split table,
        and gene -> cluster for the perturbation genes and ``assign``.
    """
    items = pd.concat([load_perturbqa_items(c, data_dir) for c in CELLS], ignore_index=True)
    perts = sorted(items["perturbation"].unique())
    go = kg.gene_sets("go_bp", Path(data_dir) / "knowledge_graphs")
    clusters = functional_clusters(perts, edges, go, n_clusters=n_clusters, seed=seed, assign=assign)
    splits = assign_splits(perts, clusters.loc[perts], ood_fraction=ood_fraction, seed=seed)
    return items, splits, clusters


def genetic_items(edges: pd.DataFrame, data_dir: str | Path, *, n_clusters: int = N_CLUSTERS,
                  seed: int = 0, ood_fraction: float = OOD_FRACTION) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every K562 and RPE1 CRISPRi item with its fold, and the split of every perturbation.

    Parameters
    ----------
    edges, data_dir, n_clusters, seed, ood_fraction
        See :func:`genetic_split`.

    Returns
    -------
    items, splits
        Items with ``fold`` (:func:`~pertreasonqa_lib.functional_splits.fold_of_items`) and an ``item_id`` index ``cell|perturbation|gene``;
        the per-perturbation split table.
    """
    items, splits, _ = genetic_split(edges, data_dir, n_clusters=n_clusters, seed=seed, ood_fraction=ood_fraction)
    items["fold"] = fold_of_items(items, splits, CELLS).to_numpy()
    items.index = pd.Index(items["cell"] + "|" + items["perturbation"] + "|" + items["gene"], name="item_id")
    return items, splits

