"""Per-perturbation scores of a predicted change: the paper's Pearson delta and its perturbation-specific form.

* :func:`rowwise_pearson`: the Pearson correlation of each row of two matrices, undefined (NaN)
  where a row is constant. With rows the predicted and observed change from control it is Pearson
  delta, as in Ahlmann-Eltze, Huber & Anders (2025, Methods "Evaluation").
* :func:`perturbation_specific_pearson`: the same correlation of the changes from the mean
  training profile instead of control. Viñas Torné et al. (2025, "Systema", Nature
  Biotechnology) show that Pearson delta rewards the systematic variation every perturbation
  shares (the average difference between perturbed and control cells), so that predicting the
  average perturbation scores well; measured from the average perturbation, only what is specific
  to each perturbation can correlate, and the mean baseline (a zero change from the reference)
  has no value at all. Systema takes the centroid of the perturbed training cells as the
  reference; here it is the mean of the training pseudobulk profiles, which is exactly the
  ``mean`` baseline's prediction.
* :func:`top_expressed_genes`: the columns of the paper's headline gene set (the genes most
  expressed in control cells).
"""

from __future__ import annotations

import numpy as np

__all__ = ["N_TOP", "rowwise_pearson", "perturbation_specific_pearson", "top_expressed_genes"]

#: Genes of the paper's headline gene set (most expressed in control cells).
N_TOP = 1000


def rowwise_pearson(a: np.ndarray, b: np.ndarray, *, atol: float = 0.0) -> np.ndarray:
    """Pearson correlation of each row of ``a`` with the same row of ``b``.

    Parameters
    ----------
    a, b
        Matrices of the same shape (items x genes).
    atol
        A row of ``a`` whose centred norm is at most ``atol`` counts as constant (a difference of
        two equal profiles computed in two ways can leave rounding noise instead of zeros).

    Returns
    -------
    numpy.ndarray
        One value per row; NaN where either row is constant (a correlation with a constant is
        undefined, and counting it as 0 would give a trivial answer a score).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"rowwise_pearson needs two matrices of the same shape, got {a.shape} and {b.shape}")
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    norm_a = np.sqrt((a**2).sum(axis=1))
    denom = norm_a * np.sqrt((b**2).sum(axis=1))
    defined = (denom > 0) & (norm_a > atol)
    return np.divide((a * b).sum(axis=1), denom, out=np.full(len(a), np.nan), where=defined)


def perturbation_specific_pearson(predicted: np.ndarray, observed: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Pearson correlation of ``predicted - reference`` with ``observed - reference``, per row.

    Parameters
    ----------
    predicted, observed
        Predicted and observed profiles, items x genes.
    reference
        The mean training profile (genes): the systematic part every perturbation shares.

    Returns
    -------
    numpy.ndarray
        One value per row; NaN where the prediction's change from the reference is constant
        (the mean baseline itself, or the mean shifted by a constant).
    """
    reference = np.asarray(reference, dtype=np.float64)
    predicted = np.asarray(predicted, dtype=np.float64)
    if reference.ndim != 1 or predicted.ndim != 2 or predicted.shape[1] != reference.shape[0]:
        raise ValueError(f"reference of shape {reference.shape} does not match profiles of shape {predicted.shape}")
    # Rounding tolerance: the mean baseline and the reference are the same mean computed twice.
    atol = 1e-10 * float(np.linalg.norm(reference))
    return rowwise_pearson(predicted - reference, np.asarray(observed, dtype=np.float64) - reference, atol=atol)


def top_expressed_genes(control: np.ndarray, n_top: int = N_TOP) -> np.ndarray:
    """Column indices of the ``n_top`` genes with the highest control mean (all genes when fewer).

    Ties keep the file's gene order (a stable sort), so the set does not depend on the platform.
    """
    control = np.asarray(control, dtype=np.float64)
    if control.ndim != 1 or control.size == 0:
        raise ValueError(f"control mean must be a non-empty vector, got shape {control.shape}")
    return np.argsort(-control, kind="stable")[:n_top]
