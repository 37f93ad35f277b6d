"""Predictions of the control methods that are not models: trivial, adversarial and ceiling answers.

The shared contract of control roles (``info.control``) asks, for expression tasks, for answers
that need no model of the biology and yet may score well on a metric:

* :func:`random_training_profiles` (negative): each test perturbation gets the profile of a
  training perturbation drawn at random. Unlike "no change", its change from control is not
  constant, so its Pearson delta is defined and can set the scale's 0.
* :func:`loo_scaled_mean` (adversarial, games L2): the mean training change times the one
  factor that best predicts each training perturbation from the mean of the others (leave one
  out, closed form): a shrinkage any distance rewards, chosen from the training data alone, as a
  contestant could. Scaling cannot change a correlation, so on Pearson delta it is the ``mean``
  baseline.
* :func:`sign_only` (adversarial, games Pearson delta): only the direction of the mean training
  change, every gene moved by the same amount.
* :func:`de_count_prior` (adversarial, games Pearson delta): how often each gene is among the
  strongest changes of the training perturbations, in the direction it usually moves.

The ceiling (a random half of each test perturbation's cells) is written by the dataset loaders
(:func:`perturbation_effect_lib.pseudobulk.half_pseudobulk`) and copied by its control.
"""

from __future__ import annotations

import numpy as np

__all__ = ["random_training_profiles", "loo_scaled_mean", "sign_only", "de_count_prior", "DE_QUANTILE"]

#: A training change counts as differential expression when its size is in the top 5% of all
#: training changes (a rank rule: no test of significance is possible on pseudobulk means alone).
DE_QUANTILE = 0.95


def _changes(Y: np.ndarray, control: np.ndarray) -> np.ndarray:
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[0] == 0:
        raise ValueError(f"training profiles must be a non-empty perturbations x genes matrix, got shape {Y.shape}")
    return Y - np.asarray(control, dtype=np.float64)


def random_training_profiles(Y: np.ndarray, n_test: int, *, seed: int) -> np.ndarray:
    """The profile of a uniformly drawn training perturbation (with replacement) for each test row.

    Parameters
    ----------
    Y
        Training profiles, perturbations x genes.
    n_test
        Rows of the result.
    seed
        Seed of :func:`numpy.random.default_rng`.
    """
    Y = np.asarray(Y, dtype=np.float64)
    if Y.shape[0] == 0:
        raise ValueError("no training perturbation to draw from")
    return Y[np.random.default_rng(seed).integers(0, Y.shape[0], size=n_test)]


def loo_scaled_mean(Y: np.ndarray, control: np.ndarray, n_test: int) -> tuple[np.ndarray, float]:
    """Control plus the mean training change scaled by a factor chosen by leave-one-out on training data.

    With ``d_i`` the change of training perturbation ``i`` (of ``n``) and ``m_(-i)`` the mean
    change of the other ``n - 1``, the factor minimises the leave-one-out squared error
    ``sum_i ||a m_(-i) - d_i||^2``: ``a = sum_i <m_(-i), d_i> / sum_i ||m_(-i)||^2``. Since
    ``m_(-i) = (n m - d_i) / (n - 1)`` with ``m`` the mean of all, both sums need only ``m`` and
    the rows' norms and dot products with ``m``. Nothing of the test perturbations is read.

    Parameters
    ----------
    Y
        Training profiles, perturbations x genes (at least two rows).
    control
        Control profile (genes).
    n_test
        Rows of the result.

    Returns
    -------
    prediction, factor
        ``n_test`` x genes, and ``a`` (0 when every leave-one-out mean is zero).
    """
    control = np.asarray(control, dtype=np.float64)
    changes = _changes(Y, control)
    n = changes.shape[0]
    if n < 2:
        raise ValueError(f"leave-one-out needs at least two training perturbations, got {n}")
    mean_change = changes.mean(axis=0)
    row_dot_mean = changes @ mean_change
    row_norm2 = np.einsum("ij,ij->i", changes, changes)
    # <m_(-i), d_i> and ||m_(-i)||^2 expanded from m_(-i) = (n m - d_i) / (n - 1).
    cross = (n * row_dot_mean - row_norm2).sum() / (n - 1)
    norm2 = (n**2 * (mean_change @ mean_change) - 2 * n * row_dot_mean + row_norm2).sum() / (n - 1) ** 2
    factor = float(cross / norm2) if norm2 > 0 else 0.0
    return np.tile(control + factor * mean_change, (n_test, 1)), factor


def sign_only(Y: np.ndarray, control: np.ndarray, n_test: int) -> np.ndarray:
    """Control plus ``sign(m) * mean(|m|)``, ``m`` the mean training change: direction only.

    Parameters
    ----------
    Y
        Training profiles, perturbations x genes.
    control
        Control profile (genes).
    n_test
        Rows of the result.
    """
    control = np.asarray(control, dtype=np.float64)
    mean_change = _changes(Y, control).mean(axis=0)
    return np.tile(control + np.sign(mean_change) * np.abs(mean_change).mean(), (n_test, 1))


def de_count_prior(Y: np.ndarray, control: np.ndarray, n_test: int, *, quantile: float = DE_QUANTILE) -> np.ndarray:
    """Control plus each gene's share of training perturbations that change it strongly, signed.

    A change ``|Y_pg - c_g|`` counts as differential expression when it reaches the ``quantile``
    of all training changes. A gene's score is the share of training perturbations in which it
    does, times the sign of its mean change; the scores are scaled so that their mean size is the
    mean size of the mean training change (an L2 of the usual order).

    Parameters
    ----------
    Y
        Training profiles, perturbations x genes.
    control
        Control profile (genes).
    n_test
        Rows of the result.
    quantile
        Of the absolute training changes, above which a change counts.
    """
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    control = np.asarray(control, dtype=np.float64)
    changes = _changes(Y, control)
    size = np.abs(changes)
    share = (size >= np.quantile(size, quantile)).mean(axis=0)
    prior = np.sign(changes.mean(axis=0)) * share
    mean_size = np.abs(prior).mean()
    scale = np.abs(changes.mean(axis=0)).mean() / mean_size if mean_size > 0 else 0.0
    return np.tile(control + scale * prior, (n_test, 1))
