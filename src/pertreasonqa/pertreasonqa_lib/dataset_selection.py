"""Which items and edges a PertReasonQA dataset keeps: its test folds, seeded subsampling, the graph's scope.

Small test resources keep a seeded sample of perturbations and items; the graph file is cut down
to what the kept items use. The path search itself always runs on the whole graph.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pertreasonqa_lib.functional_splits import FOLDS
from pertreasonqa_lib.path_serialisation import paths_from_json
from pertreasonqa_lib.reference_paths import reference_paths_for_items
from pertreasonqa_lib.signed_graph import SignedGraph, restrict_graph

#: What the graph file of a dataset holds (:func:`scope_graph`).
GRAPH_SCOPES = ("full", "walks", "paths")


def folds_to_test(fold: str, graph_scope: str) -> list[str]:
    """The test folds of a dataset (``all`` or one fold), after checking ``--fold`` and ``--graph_scope``.

    Raises
    ------
    ValueError
        Naming the argument whose value is unknown.
    """
    if graph_scope not in GRAPH_SCOPES:
        raise ValueError(f"--graph_scope {graph_scope!r}: expected one of {', '.join(GRAPH_SCOPES)}")
    if fold != "all" and fold not in FOLDS:
        raise ValueError(f"--fold {fold!r}: expected 'all' or one of {', '.join(FOLDS)}")
    return list(FOLDS) if fold == "all" else [fold]


def items_with_paths(items: pd.DataFrame, graph: SignedGraph, basal: pd.DataFrame, thresholds: pd.DataFrame,
                     folds: Sequence[str], rng: np.random.Generator, *, max_perturbations: int = 0,
                     max_items_per_perturbation: int = 0, perturbations_in_graph_only: bool = False,
                     graph_scope: str = "full") -> tuple[pd.DataFrame, SignedGraph]:
    """The items of the train, valid and test folds with their paths, and the graph to write.

    Samples perturbations (:func:`sample_perturbations`) before the path search, which always runs
    on the whole graph, then items (:func:`sample_items`), then cuts the graph (:func:`scope_graph`).
    """
    # Boolean masks as arrays: a Series mask would be aligned on the items' (string) index first.
    items = items[items["fold"].isin(["train", "valid", *folds]).to_numpy()]
    if max_perturbations > 0:
        items = sample_perturbations(items, graph, max_perturbations, rng, perturbations_in_graph_only)
    items = items.join(reference_paths_for_items(items, graph, basal, thresholds))
    if max_items_per_perturbation > 0:
        items = sample_items(items, max_items_per_perturbation, rng)
    return items, scope_graph(graph, items, graph_scope)


def sample_perturbations(items: pd.DataFrame, graph: SignedGraph, max_perturbations: int, rng: np.random.Generator,
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
    return items[items["perturbation"].isin(keep).to_numpy()]


def sample_items(items: pd.DataFrame, max_items: int, rng: np.random.Generator) -> pd.DataFrame:
    """At most ``max_items`` items per (cell, perturbation): those with candidate paths first, then a seeded fill."""
    order = rng.permutation(len(items))
    ranked = items.iloc[order].assign(_has=lambda d: d["n_candidate_paths"] > 0)
    ranked = ranked.sort_values("_has", ascending=False, kind="stable")
    kept = ranked.groupby(["cell", "perturbation"], sort=False).head(max_items)
    return kept.drop(columns="_has").sort_index()


def scope_graph(graph: SignedGraph, items: pd.DataFrame, scope: str) -> SignedGraph:
    """The edges written to the graph file.

    ``full``: every edge; ``walks``: edges on walks of at most ``D_max`` edges from the items'
    perturbations to their genes; ``paths``: the edges of the items' candidate paths.
    """
    if scope not in GRAPH_SCOPES:
        raise ValueError(f"graph scope {scope!r}: expected one of {', '.join(GRAPH_SCOPES)}")
    if scope == "walks":
        return restrict_graph(graph, items["perturbation"].unique(), items["gene"].unique())
    if scope == "paths":
        used = {(t[0], t[2]) for text in items["candidate_paths"] for path in paths_from_json(text) for t in path}
        frame = graph.to_frame()
        return graph.subgraph(np.array([pair in used for pair in zip(frame["source"], frame["target"])]))
    return graph
