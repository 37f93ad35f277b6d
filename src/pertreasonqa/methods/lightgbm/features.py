"""Features of (cell, perturbation, gene) items for the LightGBM method of PertReasonQA."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pertreasonqa_lib.answer_parsing import LABELS
from pertreasonqa_lib.path_params import DEFAULT_PARAMS, PathParams
from pertreasonqa_lib.reference_paths import search_items
from pertreasonqa_lib.sign_filters import INITIAL_SIGN, predict_from_paths, propagate_signs
from pertreasonqa_lib.signed_graph import SignedGraph, hop_distances

#: Order of the classes of the classifier.
CLASSES = list(LABELS)


def item_features(items: pd.DataFrame, graph: SignedGraph, basal: pd.DataFrame, thresholds: pd.DataFrame,
                  params: PathParams = DEFAULT_PARAMS) -> tuple[pd.DataFrame, list[list[tuple[int, ...]]], pd.Series]:
    """Basal, network and path features of each item.

    Returns
    -------
    features, paths, votes
        The feature frame (index of ``items``), each item's candidate paths (edge indices, cheapest
        first), and each path's vote as a list per item (``up``/``down``/``unchanged``/None).
    """
    paths, search = search_items(items, graph, basal, thresholds, params)
    cell = items["cell"].astype(str).to_numpy()
    tl = thresholds.loc[cell, "tau_low"].to_numpy()
    th = thresholds.loc[cell, "tau_high"].to_numpy()
    b_g = np.array([basal.at[g, c] if g in basal.index else np.nan for g, c in zip(items["gene"], cell)])
    b_p = np.array([basal.at[p, c] if p in basal.index else np.nan for p, c in zip(items["perturbation"], cell)])
    out_deg = pd.Series(np.bincount(graph.src, minlength=graph.n_nodes), index=graph.nodes)
    in_deg = pd.Series(np.bincount(graph.dst, minlength=graph.n_nodes), index=graph.nodes)
    undirected = np.full(len(items), 7.0)
    gene_pos = graph.nodes.get_indexer(items["gene"].astype(str))
    for pert, idx in pd.Series(np.arange(len(items))).groupby(items["perturbation"].astype(str).to_numpy()):
        if pert in graph.nodes:
            dist = hop_distances(graph, [graph.nodes.get_loc(pert)], 6, undirected=True)
            ok = gene_pos[idx.to_numpy()] >= 0
            undirected[idx.to_numpy()[ok]] = dist[gene_pos[idx.to_numpy()[ok]]]
    kinds = items["perturbation_type"].astype(str).to_numpy()
    votes, n_up, n_down, n_unch, n_abstain, first_sign, n_ambiguous = [], [], [], [], [], [], []
    for bag, kind, state in zip(paths, kinds, search["gene_state"]):
        v = []
        amb = 0
        for p in bag:
            signs = graph.sign[list(p)]
            amb += int((signs == 0).sum())
            answer, which = predict_from_paths([signs], kind, int(state), params.ambiguity_budget, "first")
            v.append(answer if which is not None and _votes(signs, kind, params) else None)
        votes.append(v)
        n_up.append(v.count("up"))
        n_down.append(v.count("down"))
        n_unch.append(v.count("unchanged"))
        n_abstain.append(v.count(None))
        first_sign.append(np.prod(graph.sign[list(bag[0])]) if bag else np.nan)
        n_ambiguous.append(amb)
    feats = pd.DataFrame({
        "basal_gene": b_g, "basal_pert": b_p, "gene_minus_tau_low": b_g - tl, "gene_minus_tau_high": b_g - th,
        "pert_minus_tau_low": b_p - tl, "gene_state": search["gene_state"].to_numpy(dtype=float),
        "pert_in_graph": items["perturbation"].isin(graph.nodes).to_numpy(dtype=float),
        "gene_in_graph": (gene_pos >= 0).astype(float),
        "pert_out_degree": items["perturbation"].astype(str).map(out_deg).fillna(0).to_numpy(dtype=float),
        "gene_in_degree": items["gene"].astype(str).map(in_deg).fillna(0).to_numpy(dtype=float),
        "gene_out_degree": items["gene"].astype(str).map(out_deg).fillna(0).to_numpy(dtype=float),
        "ppr": search["ppr_target"].to_numpy(dtype=float),
        "log10_ppr": np.log10(search["ppr_target"].to_numpy(dtype=float) + 1e-12),
        "hop_distance": search["hop_distance"].to_numpy(dtype=float), "undirected_distance": undirected,
        "n_paths": [len(b) for b in paths], "log10_best_cost": np.log10(np.clip(search["best_cost"].to_numpy(dtype=float), 1e-12, 1e12)),
        "best_path_length": [len(b[0]) if b else 0 for b in paths], "n_votes_up": n_up, "n_votes_down": n_down,
        "n_votes_unchanged": n_unch, "n_abstain": n_abstain, "first_path_sign": first_sign, "n_ambiguous_edges": n_ambiguous,
    }, index=items.index)
    return feats, paths, pd.Series(votes, index=items.index)


def _votes(signs: np.ndarray, kind: str, params: PathParams) -> bool:
    states, ambiguous = propagate_signs(signs, INITIAL_SIGN[kind.lower()])
    return ambiguous <= params.ambiguity_budget and len(states) == 1


def gene_priors(train: pd.DataFrame, query: pd.DataFrame | None = None, n_folds: int = 5, seed: int = 0) -> pd.DataFrame:
    """Label frequencies of each effect gene in training (target encoding).

    For the training items themselves (``query`` None) the frequencies are out-of-fold: folds are
    drawn by perturbation, so an item never sees its own perturbation's labels. Columns
    ``gene_frac_up``, ``gene_frac_down``, ``gene_n_train``; NaN for unseen genes.
    """
    def freq(rows: pd.DataFrame) -> pd.DataFrame:
        table = pd.crosstab(rows["gene"].astype(str), rows["label"].astype(str))
        n = table.sum(axis=1)
        return pd.DataFrame({"gene_frac_up": table.get("up", 0) / n, "gene_frac_down": table.get("down", 0) / n,
                             "gene_n_train": n.astype(float)})

    if query is not None:
        return freq(train).reindex(query["gene"].astype(str)).set_axis(query.index)
    perts = np.sort(train["perturbation"].astype(str).unique())
    fold_of = pd.Series(np.random.default_rng(seed).integers(0, n_folds, len(perts)), index=perts)
    folds = train["perturbation"].astype(str).map(fold_of).to_numpy()
    out = pd.DataFrame(np.nan, index=train.index, columns=["gene_frac_up", "gene_frac_down", "gene_n_train"])
    for k in range(n_folds):
        inside = folds == k
        if inside.any() and (~inside).any():
            out.loc[inside] = freq(train[~inside]).reindex(train.loc[inside, "gene"].astype(str)).to_numpy()
    return out
