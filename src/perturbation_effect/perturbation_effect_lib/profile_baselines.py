"""Baselines without an embedding: no change, the mean training profile and the additive model of combinations.

All three are baselines of Ahlmann-Eltze, Huber & Anders (2025): ``no_change`` predicts the
control profile, ``mean`` is the term ``b`` of the linear model alone, ``additive`` predicts a
combination from its genes' single perturbations.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from perturbation_effect_lib.perturbation_targets import perturbation_targets

__all__ = ["no_change_prediction", "mean_prediction", "additive_prediction"]


def no_change_prediction(control: np.ndarray, n_test: int) -> np.ndarray:
    """The control profile for every test perturbation (the ``no_change`` baseline).

    Its predicted change is zero, so its Pearson delta is undefined; its L2 is the size of the
    observed change.

    Parameters
    ----------
    control
        The control profile (mean of the control cells per gene).
    n_test
        Number of test perturbations (rows of the result).
    """
    return np.tile(np.asarray(control, dtype=np.float64), (n_test, 1))


def mean_prediction(Y: np.ndarray, n_test: int) -> np.ndarray:
    """The mean training profile for every test perturbation (the ``mean`` baseline).

    Parameters
    ----------
    Y
        Training profiles, perturbations x genes.
    n_test
        Number of test perturbations (rows of the result).
    """
    return np.tile(np.asarray(Y, dtype=np.float64).mean(axis=0), (n_test, 1))


def additive_prediction(Y: np.ndarray, train: Sequence[str], test: Sequence[str], control: np.ndarray) -> np.ndarray:
    """Additive baseline: control plus the sum of the targets' single-perturbation changes.

    A target's change is its training single perturbation's profile minus control. A target
    without a training single perturbation (an unseen gene) contributes the mean change of the
    training single perturbations, so an unseen single perturbation is predicted by that mean.

    Parameters
    ----------
    Y
        Training profiles, perturbations x genes.
    train, test
        Training and test perturbation ids (targets joined by ``+``).
    control
        The control profile (mean of the control cells per gene).

    Returns
    -------
    numpy.ndarray
        Test x genes.

    Raises
    ------
    ValueError
        When the training data has no single perturbation.
    """
    Y = np.asarray(Y, dtype=np.float64)
    control = np.asarray(control, dtype=np.float64)
    singles = {t[0]: i for i, t in enumerate(perturbation_targets(p) for p in train) if len(t) == 1}
    if not singles:
        raise ValueError("the additive baseline needs single perturbations in the training data")
    changes = Y[list(singles.values())] - control
    single_index = {g: j for j, g in enumerate(singles)}
    fallback = changes.mean(axis=0)
    out = np.empty((len(test), Y.shape[1]))
    for i, pert in enumerate(test):
        delta = np.zeros(Y.shape[1])
        for t in perturbation_targets(pert):
            delta += changes[single_index[t]] if t in single_index else fallback
        out[i] = control + delta
    return out
