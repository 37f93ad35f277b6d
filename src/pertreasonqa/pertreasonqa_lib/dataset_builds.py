"""The build of a PertReasonQA source: its labelled items of every fold, its whole graph and its cells, made once.

A source (the PerturbQA CRISPRi screens, the synthetic OP3 experiment) is built once by its loader
(:func:`write_build`); each test fold is then cut from that build by the split component
(:func:`read_build`, :func:`fold_uns`), which samples, searches the paths and writes the dataset's
files. Nothing the split reads is recomputed: the items, the graph with its drug-target edges, the
basal expression and the thresholds come from the build as they were made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anndata as ad
import pandas as pd

from pertreasonqa_lib.dataset_metadata import DATASET_UNS
from pertreasonqa_lib.signed_graph import SignedGraph

#: Output of each file of a build (the keys of :func:`write_build`'s ``outputs``, ``--output_<key>``).
BUILD_OUTPUTS = ("items", "network", "cells")


@dataclass
class Build:
    """What a loader built: everything the split of one test fold reads.

    Attributes
    ----------
    items
        Every item of every fold (``cell``, ``perturbation``, ``perturbation_type``, ``gene``, ``fold``, ``label``).
    graph
        The whole signed graph (drug-target edges included); the path search runs on all of it.
    basal
        Basal expression by gene symbol x cell (log1p NX).
    thresholds
        ``tau_low``, ``tau_high`` (and how they were drawn) per cell.
    cells
        Cell -> ``{"distribution": "ID" | "OOD"}``.
    facts
        ``modality`` (``chemical`` or ``genetic``) and the arguments of its metadata function (:data:`pertreasonqa_lib.dataset_metadata.DATASET_UNS`) that
        describe the build (simulation size and seed, basal-expression counts).
    """

    items: pd.DataFrame
    graph: SignedGraph
    basal: pd.DataFrame
    thresholds: pd.DataFrame
    cells: dict[str, dict[str, str]]
    facts: dict[str, Any]


def write_build(build: Build, outputs: Mapping[str, str | Path]) -> None:
    """Write a build's files: items and graph as parquet (exact types), cells as h5ad.

    Parameters
    ----------
    build
        What the loader made; ``facts["modality"]`` must be ``chemical`` or ``genetic``.
    outputs
        A path for each of :data:`BUILD_OUTPUTS`.
    """
    if build.facts.get("modality") not in DATASET_UNS:
        raise ValueError(f"build facts: modality {build.facts.get('modality')!r}; expected one of {sorted(DATASET_UNS)}")
    build.items.to_parquet(outputs["items"], index=True)
    build.graph.to_frame().to_parquet(outputs["network"], index=False)
    order = list(build.thresholds.index)
    obs = build.thresholds.assign(distribution=[build.cells[c]["distribution"] for c in order])
    ad.AnnData(X=build.basal.reindex(columns=order).T.to_numpy(dtype=float), obs=obs,
               var=pd.DataFrame(index=build.basal.index.astype(str)),
               uns={"build": dict(build.facts)}).write_h5ad(outputs["cells"], compression="gzip")


def read_build(items: str | Path, network: str | Path, cells: str | Path) -> Build:
    """A build from its files (:func:`write_build`), each value of the types it was made with.

    Raises
    ------
    ValueError
        Naming the file, when the cells file lacks its thresholds or facts.
    """
    table = pd.read_parquet(items)
    graph = SignedGraph.from_frame(pd.read_parquet(network), where=str(network))
    adata = ad.read_h5ad(cells)
    missing = {"tau_low", "tau_high", "distribution"} - set(adata.obs.columns)
    if missing or "build" not in adata.uns:
        raise ValueError(f"{cells}: not the cells file of a build (missing {sorted(missing) or 'uns build'})")
    # h5ad stores text columns as categories; the split reads them as the strings they were.
    obs = adata.obs.apply(lambda col: col.astype(object) if isinstance(col.dtype, pd.CategoricalDtype) else col)
    obs.index = obs.index.astype(object)
    basal = pd.DataFrame(adata.X.T, index=pd.Index(adata.var_names.astype(object)), columns=obs.index)
    return Build(items=table, graph=graph, basal=basal, thresholds=obs.drop(columns="distribution"),
                 cells={c: {"distribution": str(d)} for c, d in obs["distribution"].items()},
                 facts=_plain(adata.uns["build"]))


def fold_uns(facts: Mapping[str, Any], dataset_id: str, fold: str, test_folds: Sequence[str]) -> dict:
    """The ``uns`` metadata of a dataset cut from a build, by its modality's metadata function."""
    args = {k: v for k, v in facts.items() if k != "modality"}
    return DATASET_UNS[facts["modality"]](dataset_id, fold, test_folds, **args)


def _plain(value: Any) -> Any:
    """``uns`` as read back (numpy scalars, nested mappings) as plain Python values."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value.item() if hasattr(value, "item") else value
