"""The source data of Ahlmann-Eltze, Huber & Anders (2025), read for the task's Reproduction section.

The paper's figures come with their source data (In-tron/linear_perturbation_prediction-Paper,
``source_data/``): one row per dataset, seed, method and perturbation, with the perturbation's
role in that seed's split (``train``: ``train``, ``val``, ``test``) and its Pearson delta
(``r2_delta``) and L2 distance (``l2``) on the 1,000 genes most expressed in control cells.

* ``perturbation_prediction.xlsx``, sheet ``Panel A`` (Fig. 1): Norman et al.'s double
  perturbations (``norman_from_scfoundation``), seeds 1 to 5, the paper's double split;
* ``single_perturbation_prediction.xlsx``, sheet ``Panel A`` (Fig. 2): Adamson and Replogle's
  K562 and RPE1 essential screens, GEARS's simulation split, seeds 1 and 2.

:func:`held_out` gives the split membership; :func:`ahlmann_eltze_scores` the per-perturbation
values of chosen methods in the records of ``api/published_results.yaml``'s readers: one per
dataset and seed, method and metric, its value the mean over the held-out perturbations (test and
validation, both scored by the paper and by the task), with every perturbation's value under the
task's item ids (:func:`perturbation_effect_lib.pseudobulk.condition_key`: targets sorted, joined
by ``+``, no ``ctrl``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from perturbation_effect_lib.pseudobulk import condition_key, parse_condition
from perturbation_effect_lib.xlsx_tables import read_sheet

__all__ = ["HELD_OUT", "METRICS", "read_source_data", "held_out", "ahlmann_eltze_scores"]

#: The split roles the paper scores (its figures pool the test and validation perturbations).
HELD_OUT = ("test", "val")
#: The per-perturbation metrics of the source data.
METRICS = ("r2_delta", "l2")
_COLUMNS = ("dataset_name", "seed", "method", "perturbation", "train", *METRICS)


def read_source_data(path: str | Path, sheet: str = "Panel A") -> pd.DataFrame:
    """One sheet of the source data, with each perturbation's item id (column ``item``).

    Raises
    ------
    ValueError
        Naming the file and sheet, when a column of the source data is missing.
    """
    table = read_sheet(path, sheet)
    missing = [c for c in _COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: sheet {sheet!r} lacks the columns {missing} (has {list(table.columns)})")
    table = table.loc[:, list(_COLUMNS)].copy()
    table["seed"] = table["seed"].astype(int)
    table["item"] = [condition_key(parse_condition(str(p))) for p in table["perturbation"]]
    for metric in METRICS:
        table[metric] = pd.to_numeric(table[metric], errors="coerce")
    return table


def held_out(path: str | Path, sheet: str = "Panel A") -> pd.DataFrame:
    """The split role of every perturbation the source data lists, per dataset and seed.

    Returns
    -------
    pandas.DataFrame
        ``dataset_name, seed, item, split`` (``train``, ``val`` or ``test``), one row per
        perturbation of a seed (every method of the paper scored the same perturbations).

    Raises
    ------
    ValueError
        When one perturbation has two roles in one seed.
    """
    table = read_source_data(path, sheet)
    roles = table.drop_duplicates(["dataset_name", "seed", "item", "train"])
    clash = roles.duplicated(["dataset_name", "seed", "item"], keep=False)
    if clash.any():
        first = roles.loc[clash].iloc[0]
        raise ValueError(f"{path}: {first['item']} has two roles in {first['dataset_name']} seed {first['seed']}")
    return roles.rename(columns={"train": "split"})[["dataset_name", "seed", "item", "split"]].reset_index(drop=True)


def ahlmann_eltze_scores(path: str | Path, *, sheet: str = "Panel A", methods: Sequence[str] = (),
                         metrics: Sequence[str] = METRICS) -> list[dict]:
    """Published per-perturbation values as the records of a Reproduction reader.

    Parameters
    ----------
    path
        A source-data workbook of the paper.
    sheet
        Its sheet (``Panel A`` of either workbook).
    methods
        The paper's method names to read (all when empty).
    metrics
        Of :data:`METRICS`.

    Returns
    -------
    list of dict
        ``{"dataset": "<dataset_name> seed <k>", "method", "metric", "value", "n", "items"}``
        per dataset and seed, method and metric with a defined value: ``items`` maps each held-out
        perturbation (test and validation) to its value (NaN where the paper's is undefined, e.g.
        the correlation of no change), ``value`` is their mean over defined values, ``n`` their number.
    """
    table = read_source_data(path, sheet)
    table = table[table["train"].isin(HELD_OUT)]
    if methods:
        unknown = sorted(set(methods) - set(table["method"]))
        if unknown:
            raise ValueError(f"{path}: sheet {sheet!r} has no method {unknown}; it has {sorted(set(table['method']))}")
        table = table[table["method"].isin(list(methods))]
    records = []
    for (name, seed, method), group in table.groupby(["dataset_name", "seed", "method"], sort=True):
        duplicated = group["item"].duplicated()
        if duplicated.any():
            raise ValueError(f"{path}: {name} seed {seed} {method} lists {group['item'][duplicated].iloc[0]} twice")
        for metric in metrics:
            values = group.set_index("item")[metric].astype(float)
            defined = values.dropna()
            if defined.empty:
                continue  # undefined for every perturbation (Pearson delta of no change): nothing to compare
            records.append({"dataset": f"{name} seed {seed}", "method": str(method), "metric": metric,
                            "value": float(np.mean(defined)), "n": int(len(defined)),
                            "items": {str(k): float(v) for k, v in values.items()}})
    return records
