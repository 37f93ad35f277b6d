"""Writing PertReasonQA datasets: subsampling for test resources, the graph's scope, and the files.

The dataset components of the task (genetic and chemical) share everything after their items are
built: this module keeps a seeded sample of perturbations and items for small test resources,
cuts the graph down to what the kept items use, and writes the train, test, solution, context and
graph files of the task's API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import anndata as ad
import numpy as np
import pandas as pd

from pertreasonqa_lib import reasoning_paths as rp
from pertsci import knowledge_graphs as kg

#: Columns every item file carries.
ITEM_KEYS = ["cell", "perturbation", "perturbation_type", "gene"]
GRAPH_SCOPES = ("full", "walks", "paths")


def test_folds(fold: str, graph_scope: str) -> list[str]:
    """The test folds of a dataset (``all`` or one fold), after checking ``--fold`` and ``--graph_scope``."""
    from pertreasonqa_lib.items_and_splits import FOLDS

    if graph_scope not in GRAPH_SCOPES:
        raise ValueError(f"--graph_scope {graph_scope!r}: expected one of {', '.join(GRAPH_SCOPES)}")
    if fold != "all" and fold not in FOLDS:
        raise ValueError(f"--fold {fold!r}: expected 'all' or one of {', '.join(FOLDS)}")
    return list(FOLDS) if fold == "all" else [fold]


def items_with_paths(items: pd.DataFrame, graph: rp.SignedGraph, basal: pd.DataFrame, thresholds: pd.DataFrame,
                     folds: Sequence[str], rng: np.random.Generator, *, max_perturbations: int = 0,
                     max_items_per_perturbation: int = 0, perturbations_in_graph_only: bool = False,
                     graph_scope: str = "full") -> tuple[pd.DataFrame, rp.SignedGraph]:
    """The items of the train, valid and test folds with their paths, and the graph to write.

    Samples perturbations (:func:`sample_perturbations`) before the path search, which always runs
    on the whole graph, then items (:func:`sample_items`), then cuts the graph (:func:`scope_graph`).
    """
    items = items[items["fold"].isin(["train", "valid", *folds])]
    if max_perturbations > 0:
        items = sample_perturbations(items, graph, max_perturbations, rng, perturbations_in_graph_only)
    items = items.join(rp.reference_paths_for_items(items, graph, basal, thresholds))
    if max_items_per_perturbation > 0:
        items = sample_items(items, max_items_per_perturbation, rng)
    return items, scope_graph(graph, items, graph_scope)


def sample_perturbations(items: pd.DataFrame, graph: rp.SignedGraph, max_perturbations: int, rng: np.random.Generator,
                         in_graph_only: bool = False) -> pd.DataFrame:
    """Items of a seeded sample of at most ``max_perturbations`` perturbations per fold.

    With ``in_graph_only``, perturbations are drawn among those with an out-edge in the graph (a
    gene with a regulation edge, or a compound with targets).
    """
    candidates = items
    if in_graph_only:
        out_deg = pd.Series(np.bincount(graph.src, minlength=graph.n_nodes), index=graph.nodes)
        candidates = items[items["perturbation"].map(out_deg).fillna(0).to_numpy() > 0]
    keep = []
    for _, group in candidates.groupby("fold", sort=True):
        perts = np.sort(group["perturbation"].unique())
        keep.extend(rng.choice(perts, size=min(max_perturbations, len(perts)), replace=False))
    return items[items["perturbation"].isin(keep)]


def sample_items(items: pd.DataFrame, max_items: int, rng: np.random.Generator) -> pd.DataFrame:
    """At most ``max_items`` items per (cell, perturbation): those with candidate paths first, then a seeded fill."""
    order = rng.permutation(len(items))
    ranked = items.iloc[order].assign(_has=lambda d: d["n_candidate_paths"] > 0)
    ranked = ranked.sort_values("_has", ascending=False, kind="stable")
    kept = ranked.groupby(["cell", "perturbation"], sort=False).head(max_items)
    return kept.drop(columns="_has").sort_index()


def scope_graph(graph: rp.SignedGraph, items: pd.DataFrame, scope: str) -> rp.SignedGraph:
    """The edges written to the graph file.

    ``full``: every edge; ``walks``: edges on walks of at most ``D_max`` edges from the items'
    perturbations to their genes; ``paths``: the edges of the items' candidate paths.
    """
    if scope not in GRAPH_SCOPES:
        raise ValueError(f"graph scope {scope!r}: expected one of {', '.join(GRAPH_SCOPES)}")
    if scope == "walks":
        return rp.restrict_graph(graph, items["perturbation"].unique(), items["gene"].unique())
    if scope == "paths":
        used = {(t[0], t[2]) for text in items["candidate_paths"] for path in rp.paths_from_json(text) for t in path}
        frame = graph.to_frame()
        return graph.subgraph(np.array([pair in used for pair in zip(frame["source"], frame["target"])]))
    return graph


def write_dataset(items: pd.DataFrame, graph: rp.SignedGraph, basal: pd.DataFrame, thresholds: pd.DataFrame,
                  cells: Mapping[str, Mapping], uns: Mapping, test_folds: Sequence[str], outputs: Mapping[str, str],
                  basal_uns: Mapping | None = None) -> dict[str, int]:
    """Write the train, test, solution, context and graph files of a dataset.

    Parameters
    ----------
    items
        Items with ``cell``, ``perturbation``, ``perturbation_type``, ``gene``, ``fold``, ``label``
        and the path columns of :func:`pertreasonqa_lib.reasoning_paths.reference_paths_for_items`.
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
        Paths for ``train``, ``test``, ``solution``, ``context`` and ``graph``.
    basal_uns
        Extra ``uns`` entries of the context (e.g. how many genes have a basal value).

    Returns
    -------
    dict
        ``n_train``, ``n_test``, ``n_genes`` and ``n_edges`` written.
    """
    train = items[items["fold"].isin(["train", "valid"])].rename(columns={"fold": "split"})
    test = items[items["fold"].isin(list(test_folds))]
    ad.AnnData(obs=train[ITEM_KEYS + ["split", "label", "candidate_paths", "reference_paths", "n_reference_paths"]],
               uns=dict(uns)).write_h5ad(outputs["train"], compression="gzip")
    ad.AnnData(obs=test[ITEM_KEYS + ["fold", "candidate_paths"]], uns=dict(uns)).write_h5ad(outputs["test"], compression="gzip")
    ad.AnnData(obs=test[ITEM_KEYS + ["fold", "label", "reference_paths", "n_reference_paths"]],
               uns=dict(uns)).write_h5ad(outputs["solution"], compression="gzip")

    # Context: basal expression of every gene the items or the graph mention (compounds are no genes).
    compounds = set(graph.nodes[graph.src[graph.drug_edge]])
    named = set(graph.nodes) | set(items["gene"]) | set(items["perturbation"])
    genes = pd.Index(sorted(named - compounds))
    go_sets = kg.gene_sets("go_bp")
    go = rp.GOProfiles.from_gene_sets(go_sets, genes=genes)
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
    return {"n_train": len(train), "n_test": len(test), "n_genes": len(genes), "n_edges": graph.n_edges}
