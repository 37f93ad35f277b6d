"""Each downstream gene's training prevalence of a subtask's positive label (a control, and a fallback score)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from perturbqa_lib.task_items import PAIR_SUBTASKS, training_pairs

__all__ = ["gene_prevalence", "prevalence_scores"]


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
