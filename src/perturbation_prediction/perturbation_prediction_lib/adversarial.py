"""Adversarial predictions: simple answers built to game a metric without modelling the biology.

They run as control methods (``info.control: adversarial``), are never ranked, and measure how far
each metric can be gamed: the best scaled score of an adversarial control on a dataset is the
metric's gameability there. Each targets a property of the metrics of Szałata et al. 2024 (§3.4):

- the row-wise Pearson, Spearman and cosine similarity ignore the scale of a row, so the training
  mean blown up (:func:`scaled_training_mean`, factor > 1) scores exactly the mean's correlations
  with any error; shrunk (factor < 1) it keeps them and trades bias for variance on RMSE and MAE,
  whose truth is mostly near 0;
- correlations reward the direction of each gene more than its size: :func:`sign_of_compound_mean`
  predicts only the sign of the compound's mean response, at one magnitude;
- rows of OP3 share which genes respond: genes often differentially expressed dominate every row,
  and strong compounds change many genes. :func:`de_count_prior` predicts from counts alone (how
  often a gene is DE, its usual direction, how many genes the compound changes elsewhere).
"""

from __future__ import annotations

import numpy as np

from perturbation_prediction_lib.target_encoding import target_encode


def scaled_training_mean(values: np.ndarray, n_rows: int, factor: float) -> np.ndarray:
    """Every row: the mean training row times ``factor``.

    Parameters
    ----------
    values
        Training rows x genes.
    n_rows
        Rows to predict.
    factor
        The scale; > 1 leaves the row correlations of the mean unchanged and inflates its
        errors, < 1 shrinks it towards no effect.

    Returns
    -------
    numpy.ndarray
        ``n_rows`` x genes.
    """
    return np.tile(values.mean(axis=0) * factor, (n_rows, 1))


def sign_of_compound_mean(train_compounds: np.ndarray, values: np.ndarray, query_compounds: np.ndarray
                          ) -> np.ndarray:
    """The sign of each compound's mean training row, at the mean absolute training value.

    Parameters
    ----------
    train_compounds
        The compound of each training row.
    values
        Training rows x genes.
    query_compounds
        The compound of each row to predict (a compound without training rows takes the sign of
        the overall mean).

    Returns
    -------
    numpy.ndarray
        Query rows x genes, each value ``-a``, 0 or ``a`` with ``a = mean(|values|)``.
    """
    means = target_encode(train_compounds, values, query_compounds, values.mean(axis=0))
    return np.sign(means) * np.abs(values).mean()


def de_count_prior(train_compounds: np.ndarray, values: np.ndarray, is_de: np.ndarray, query_compounds: np.ndarray
                   ) -> np.ndarray:
    """A prediction from DE counts: how often a gene is DE, and how many genes the compound changes.

    ``pred[r, g] = c * s_k(r) * f_g * d_g`` with ``f_g`` the share of training rows in which gene
    ``g`` is DE, ``d_g`` the sign of its summed value over those rows, ``s_k`` the mean number of DE
    genes of compound ``k``'s training rows over the mean of all training rows (1 for a compound
    without training rows), and ``c`` matching the mean absolute prediction to the mean absolute
    training value.

    Parameters
    ----------
    train_compounds
        The compound of each training row.
    values
        Training rows x genes (the target layer).
    is_de
        Training rows x genes, whether the gene is DE in the row (``is_de`` layer: P.Value < 0.05).
    query_compounds
        The compound of each row to predict.

    Returns
    -------
    numpy.ndarray
        Query rows x genes.

    Raises
    ------
    ValueError
        When ``values`` and ``is_de`` differ in shape.
    """
    is_de = np.asarray(is_de, dtype=float)
    if is_de.shape != values.shape:
        raise ValueError(f"is_de has shape {is_de.shape}, the values {values.shape}")
    gene_prior = is_de.mean(axis=0) * np.sign((values * is_de).sum(axis=0))
    n_de = is_de.sum(axis=1)
    overall = n_de.mean()
    counts = target_encode(train_compounds, n_de[:, None], query_compounds, np.array([overall]))[:, 0]
    row_scale = counts / overall if overall > 0 else np.ones(len(query_compounds))
    raw = row_scale[:, None] * gene_prior[None, :]
    size = np.abs(raw).mean()
    return raw * (np.abs(values).mean() / size) if size > 0 else raw
