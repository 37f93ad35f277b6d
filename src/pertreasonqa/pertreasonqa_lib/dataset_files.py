"""The files of a PertReasonQA dataset: written by the dataset loaders, read by methods and metrics.

:func:`write_dataset` writes the train, test, solution, context, graph and gene-description files
of the task's API; :func:`read_context`, :func:`read_graph` and :func:`read_gene_descriptions`
read the ones methods and metrics use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from pertreasonqa_lib.faithfulness import GOProfiles
from pertreasonqa_lib.signed_graph import SignedGraph

#: Columns every item file carries.
ITEM_KEYS = ["cell", "perturbation", "perturbation_type", "gene"]


#: Output of each file of a dataset (the keys of :func:`write_dataset`'s ``outputs``).
OUTPUTS = ("train", "test", "solution", "context", "graph", "gene_descriptions")


def write_dataset(items: pd.DataFrame, graph: SignedGraph, basal: pd.DataFrame, thresholds: pd.DataFrame,
                  cells: Mapping[str, Mapping], uns: Mapping, test_folds: Sequence[str], outputs: Mapping[str, str | Path],
                  *, go_sets: Mapping[str, Sequence[str]], descriptions: Mapping[str, str],
                  basal_uns: Mapping | None = None) -> dict[str, int]:
    """Write the train, test, solution, context, graph and gene-description files of a dataset.

    Parameters
    ----------
    items
        Items with ``cell``, ``perturbation``, ``perturbation_type``, ``gene``, ``fold``, ``label``
        and the path columns of :func:`pertreasonqa_lib.reference_paths.reference_paths_for_items`.
    graph
        The graph to write (compounds included).
    basal
        Basal expression by gene symbol x cell (log1p NX).
    thresholds
        ``tau_low``, ``tau_high`` per cell.
    cells
        Cell -> ``{"distribution": "ID" | "OOD"}``.
    uns
        Dataset metadata written to every file.
    test_folds
        Folds of the test file.
    outputs
        A path for each of :data:`OUTPUTS`.
    go_sets
        GO BP term -> genes (the whole GMT: the IDF of GO similarity counts over all of it).
    descriptions
        Gene symbol -> functional description (STRING v12); the file keeps the genes of the context
        that have a non-empty one.
    basal_uns
        Extra ``uns`` entries of the context (e.g. how many genes have a basal value).

    Returns
    -------
    dict
        ``n_train``, ``n_test``, ``n_genes``, ``n_edges`` and ``n_descriptions`` written.
    """
    train = items[items["fold"].isin(["train", "valid"])].rename(columns={"fold": "split"})
    test = items[items["fold"].isin(list(test_folds))]
    ad.AnnData(obs=train[ITEM_KEYS + ["split", "label", "candidate_paths", "reference_paths", "n_reference_paths"]],
               uns=dict(uns)).write_h5ad(outputs["train"], compression="gzip")
    # The test file carries no paths: the reference paths are the candidates that pass the label
    # filter, so shipping the candidates would hand methods a superset of the answer's mechanism.
    # A method derives the label-free candidates from the graph and the context itself
    # (:func:`pertreasonqa_lib.reference_paths.candidate_triplets`).
    ad.AnnData(obs=test[ITEM_KEYS + ["fold"]], uns=dict(uns)).write_h5ad(outputs["test"], compression="gzip")
    ad.AnnData(obs=test[ITEM_KEYS + ["fold", "label", "reference_paths", "n_reference_paths"]],
               uns=dict(uns)).write_h5ad(outputs["solution"], compression="gzip")

    # Context: basal expression of every gene the items or the graph mention (compounds are no genes).
    compounds = set(graph.nodes[graph.src[graph.drug_edge]])
    named = set(graph.nodes) | set(items["gene"]) | set(items["perturbation"])
    genes = pd.Index(sorted(named - compounds))
    go = GOProfiles.from_gene_sets(go_sets, genes=genes)
    used = np.flatnonzero(np.asarray(go.membership.sum(axis=0)).ravel() > 0)
    order = sorted(items["cell"].unique())
    context = ad.AnnData(
        X=basal.reindex(index=genes, columns=order).T.to_numpy(dtype=float),
        obs=pd.DataFrame({"tau_low": thresholds.loc[order, "tau_low"].to_numpy(),
                          "tau_high": thresholds.loc[order, "tau_high"].to_numpy(),
                          "distribution": [cells[c]["distribution"] for c in order]}, index=pd.Index(order, name="cell")),
        var=pd.DataFrame({"in_graph": genes.isin(graph.nodes)}, index=genes),
        varm={"go_bp": go.membership.tocsc()[:, used].tocsr()},
        uns={**uns, "go_bp_idf": go.idf[used], "go_bp_terms": np.asarray(list(go_sets), dtype=object)[used],
             "expression_scale": "log1p(NX), HPA v20", **(basal_uns or {})},
    )
    context.write_h5ad(outputs["context"], compression="gzip")
    graph.to_frame().to_csv(outputs["graph"], index=False)
    described = [g for g in genes if descriptions.get(g)]
    pd.DataFrame({"gene": described, "description": [str(descriptions[g]) for g in described]}, dtype=object).to_parquet(
        outputs["gene_descriptions"], index=False)
    return {"n_train": len(train), "n_test": len(test), "n_genes": len(genes), "n_edges": graph.n_edges,
            "n_descriptions": len(described)}


def read_context(adata: ad.AnnData) -> tuple[pd.DataFrame, pd.DataFrame, GOProfiles]:
    """Split a context AnnData into basal expression (genes x cells), thresholds (cells) and GO profiles."""
    x = adata.X.toarray() if sp.issparse(adata.X) else np.asarray(adata.X, dtype=float)
    basal = pd.DataFrame(x.T, index=adata.var_names.copy(), columns=adata.obs_names.copy())
    thresholds = adata.obs[["tau_low", "tau_high"]].astype(float)
    go = GOProfiles(genes=adata.var_names.copy(), membership=adata.varm["go_bp"], idf=np.asarray(adata.uns["go_bp_idf"], dtype=float))
    return basal, thresholds, go


def read_graph(path: str | Path) -> SignedGraph:
    """The graph file of a dataset (``source, target, sign, databases``)."""
    return SignedGraph.from_frame(pd.read_csv(path), where=str(path))


def read_gene_descriptions(path: str | Path) -> dict[str, str]:
    """Gene symbol -> functional description, from a dataset's gene-description file (``gene``, ``description``)."""
    table = pd.read_parquet(path)
    missing = {"gene", "description"} - set(table.columns)
    if missing:
        raise ValueError(f"{path}: missing columns {sorted(missing)}")
    if table["gene"].duplicated().any():
        raise ValueError(f"{path}: duplicated genes, e.g. {table.loc[table['gene'].duplicated(), 'gene'].iloc[0]!r}")
    return dict(zip(table["gene"].astype(str), table["description"].astype(str)))
