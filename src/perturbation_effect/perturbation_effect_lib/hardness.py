"""Similarity of test to training perturbations in an embedding space: neighbours and hardness.

**Hardness** (Ahlmann-Eltze, Huber & Anders 2025, methods appendix) is the mean cosine similarity
of a test perturbation to its top 1/5/10% most similar training perturbations in a model's
perturbation-embedding space: how close the training data comes to it. The same ranking chooses
the training perturbations LSFT refits on (:mod:`perturbation_effect_lib.lsft`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["LSFT_FRACTIONS", "cosine_similarity", "n_neighbours", "top_neighbours", "hardness", "hardness_table"]

#: Shares of training perturbations of the methods appendix (top 1%, 5% and 10%).
LSFT_FRACTIONS = (0.01, 0.05, 0.10)


def cosine_similarity(X: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``X`` with every row of ``Z``; 0 where a row is zero."""
    def unit(M):
        norms = np.linalg.norm(M, axis=1, keepdims=True)
        return np.divide(M, norms, out=np.zeros_like(M, dtype=np.float64), where=norms > 0)

    return unit(np.asarray(X, dtype=np.float64)) @ unit(np.asarray(Z, dtype=np.float64)).T


def n_neighbours(n_train: int, fraction: float) -> int:
    """How many training perturbations a share keeps: ``ceil(n_train * fraction)``, at least one.

    Raises
    ------
    ValueError
        When ``fraction`` is outside (0, 1].
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"an LSFT fraction must be in (0, 1], got {fraction}")
    return max(1, math.ceil(n_train * fraction))


def top_neighbours(similarity: np.ndarray) -> np.ndarray:
    """Training indices of each row sorted by decreasing similarity (ties: lower index first)."""
    return np.argsort(-similarity, axis=1, kind="stable")


def hardness(B_test: np.ndarray, B_train: np.ndarray, fractions: Sequence[float] = LSFT_FRACTIONS) -> np.ndarray:
    """Mean cosine similarity of each test perturbation to its top ``ceil(n_train * f)`` training ones.

    Parameters
    ----------
    B_test, B_train
        Perturbation embeddings of the test and training perturbations (rows).
    fractions
        The shares ``f``.

    Returns
    -------
    numpy.ndarray
        n_test x len(fractions); NaN for a test perturbation without an embedding (zero vector).
    """
    sim = cosine_similarity(B_test, B_train)
    ordered = -np.sort(-sim, axis=1)
    out = np.column_stack([ordered[:, :n_neighbours(B_train.shape[0], f)].mean(axis=1) for f in fractions])
    out[~np.any(np.asarray(B_test) != 0, axis=1)] = np.nan
    return out


def hardness_table(B_test: np.ndarray, B_train: np.ndarray, test: Sequence[str]) -> pd.DataFrame:
    """:func:`hardness` at the top 1/5/10% as the prediction file's columns.

    Returns
    -------
    pandas.DataFrame
        Indexed by the test perturbation ids, columns ``hardness_top1pct``, ``hardness_top5pct``
        and ``hardness_top10pct``.
    """
    columns = [f"hardness_top{round(100 * f)}pct" for f in LSFT_FRACTIONS]
    return pd.DataFrame(hardness(B_test, B_train, LSFT_FRACTIONS), index=pd.Index(list(test)), columns=columns)
