"""Prevalence scores: answers that know how often a gene, or a perturbation, responds, and nothing else.

:func:`prevalence_scores` gives each pair item its downstream gene's training rate of positive
labels (the uninformed value the paper substitutes for LLM abstentions, appendix A.3, and a
fallback of several methods). :func:`perturbation_item_share` scores each pair by how many test
items its perturbation has, a property of the test file every method sees. Both are adversarial
controls: constant within a gene (or within a perturbation), they model no gene-specific biology,
yet a pooled AUROC rewards the first and any AUROC over perturbations the second.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perturbqa_lib.task_items import PAIR_SUBTASKS, training_pairs

__all__ = ["gene_prevalence", "prevalence_scores", "perturbation_item_share"]


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
