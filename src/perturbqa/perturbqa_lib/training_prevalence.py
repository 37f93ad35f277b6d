"""Prevalence scores: answers that know how often a gene, or a perturbation, responds, and nothing else.

:func:`prevalence_scores` gives each pair item its downstream gene's training rate of positive
labels (the uninformed value the paper substitutes for LLM abstentions, appendix A.3, and a
fallback of several methods). :func:`perturbation_item_share` scores each pair by how many test
items its perturbation has, a property of the test file every method sees, and
:func:`item_composition_scores` by which genes its items name. All are adversarial controls:
constant within a gene (or within a perturbation), they model no gene-specific biology, yet a
pooled AUROC rewards the first and any AUROC over perturbations the others.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perturbqa_lib.task_items import PAIR_SUBTASKS, training_pairs

__all__ = ["gene_prevalence", "prevalence_scores", "perturbation_item_share", "item_composition_scores", "macro_auroc"]


def gene_prevalence(train_obs: pd.DataFrame, subtask: str) -> tuple[pd.Series, float]:
    """Each downstream gene's training prevalence of a subtask's positive label.

    Returns
    -------
    per_gene, overall
        Mean label per gene over its training pairs, and over all training pairs (the value for
        genes never seen in training).
    """
    pairs = training_pairs(train_obs, subtask)
    overall = float(pairs["label"].mean()) if len(pairs) else 0.5
    return pairs.groupby("gene")["label"].mean(), overall


def prevalence_scores(train_obs: pd.DataFrame, test_obs: pd.DataFrame) -> pd.Series:
    """Training prevalence of each pair item's gene for its subtask (NaN for cluster items)."""
    scores = pd.Series(np.nan, index=test_obs.index)
    for subtask in PAIR_SUBTASKS:
        rows = test_obs["subtask"] == subtask
        if rows.any():
            per_gene, overall = gene_prevalence(train_obs, subtask)
            genes = test_obs.loc[rows, "gene"].astype(str)
            scores[rows] = genes.map(per_gene).astype(float).fillna(overall).to_numpy(dtype=float)
    return scores


def perturbation_item_share(test_obs: pd.DataFrame) -> pd.Series:
    """Each pair item's perturbation's number of test items of its subtask, over the largest such number.

    The published files sample, for each perturbation, its DE genes and a set of unchanged ones,
    so the number of items a perturbation has in the test file follows the number of genes it
    changes (for dir, the items *are* its DE genes). Scoring by it ranks strong knockdowns first
    without any knowledge of which genes respond. NaN for cluster items.
    """
    scores = pd.Series(np.nan, index=test_obs.index)
    for subtask in PAIR_SUBTASKS:
        rows = test_obs["subtask"] == subtask
        if rows.any():
            perts = test_obs.loc[rows, "pert"].astype(str)
            counts = perts.map(perts.value_counts()).astype(float)
            scores[rows] = (counts / counts.max()).to_numpy()
    return scores


def macro_auroc(labels: np.ndarray, scores: np.ndarray, groups: np.ndarray) -> float:
    """Mean over groups with both classes of the AUROC of ``scores`` (average ranks, ties count one half).

    The statistic of section 5.2 of the paper, here to learn an adversarial control's sign from
    training pairs (the task's metric component computes the scored value). NaN without any
    group holding both classes.
    """
    frame = pd.DataFrame({"y": np.asarray(labels, dtype=float), "s": np.asarray(scores, dtype=float),
                          "g": np.asarray(groups)})
    frame["r"] = frame.groupby("g")["s"].rank(method="average")
    per = frame.groupby("g").agg(n1=("y", "sum"), n=("y", "size"))
    per["rank_sum"] = frame[frame["y"] == 1].groupby("g")["r"].sum().reindex(per.index).fillna(0.0)
    per = per[(per["n1"] > 0) & (per["n1"] < per["n"])]
    if per.empty:
        return float("nan")
    n0 = per["n"] - per["n1"]
    return float(((per["rank_sum"] - per["n1"] * (per["n1"] + 1) / 2) / (per["n1"] * n0)).mean())


def _items_mean_prevalence(pert: pd.Series, gene: pd.Series, prevalence: pd.Series, overall: float) -> pd.Series:
    """Per perturbation, the mean prevalence of the genes its items name."""
    values = gene.map(prevalence).astype(float).fillna(overall)
    return values.groupby(pert.to_numpy()).mean()


def item_composition_scores(train_obs: pd.DataFrame, test_obs: pd.DataFrame) -> pd.Series:
    """Score each pair by which genes its perturbation's test items name, signed on the training pairs.

    The published files list, for each perturbation, its top DE genes and a sample of unchanged
    ones, so the genes a perturbation's items name reflect how strongly it acts, unless the test
    file crosses every perturbation with the same genes (as the datasets do, where this scores
    0.5 exactly). The statistic of a perturbation is the mean
    training prevalence (:func:`gene_prevalence`) of the genes of its items. Its sign is learnt
    from the training perturbations alone: the macro AUROC (per downstream gene, over the
    training perturbations) of the same statistic, with leave-one-perturbation-out prevalences so
    that a perturbation's own labels do not enter its statistic; below 0.5, the sign flips. The
    score of a test pair is that sign times its perturbation's statistic: constant within a
    perturbation, it knows nothing of the downstream gene. NaN for cluster items.
    """
    scores = pd.Series(np.nan, index=test_obs.index)
    for subtask in PAIR_SUBTASKS:
        rows = test_obs["subtask"] == subtask
        if not rows.any():
            continue
        pairs = training_pairs(train_obs, subtask)
        per_gene, overall = gene_prevalence(train_obs, subtask)
        sign = 1.0
        if len(pairs) and pairs["pert"].nunique() > 2:
            totals = pairs.groupby("gene")["label"].agg(["sum", "count"])
            own_sum = totals["sum"].reindex(pairs["gene"]).to_numpy() - pairs["label"].to_numpy()
            own_count = totals["count"].reindex(pairs["gene"]).to_numpy() - 1
            with np.errstate(invalid="ignore", divide="ignore"):
                loo = np.where(own_count > 0, own_sum / np.maximum(own_count, 1), overall)
            statistic = pd.Series(loo).groupby(pairs["pert"].to_numpy()).mean()
            on_training = macro_auroc(pairs["label"].to_numpy(), pairs["pert"].map(statistic).to_numpy(),
                                      pairs["gene"].to_numpy())
            sign = -1.0 if np.isfinite(on_training) and on_training < 0.5 else 1.0
        items = test_obs.loc[rows]
        statistic = _items_mean_prevalence(items["pert"].astype(str), items["gene"].astype(str), per_gene, overall)
        scores[rows] = sign * items["pert"].astype(str).map(statistic).to_numpy(dtype=float)
    return scores
