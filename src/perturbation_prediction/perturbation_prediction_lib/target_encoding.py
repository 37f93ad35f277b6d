"""Target encodings of (cell type, compound) rows, as the competition's top solutions built them.

Szałata et al. 2024 (§4.1 and appendix E.1) report target encoding as one of the most effective
inputs: a row is described by the mean response of its compound (over its other cell types), of
its cell type (over the other compounds) and of its compound in each other cell type. Training
rows are encoded leave-one-out (:func:`loo_encoding_features`) or out of fold
(:func:`oof_encoding_features`), so that a row never encodes its own value.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _group_sums(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct key: (keys, each row's key index, sums of ``values`` (rows x features), counts)."""
    uniq, inverse = np.unique(keys, return_inverse=True)
    sums = np.zeros((uniq.size, values.shape[1]))
    np.add.at(sums, inverse, values)
    counts = np.bincount(inverse, minlength=uniq.size).astype(float)
    return uniq, inverse, sums, counts


def target_encode(train_keys: np.ndarray, values: np.ndarray, query_keys: np.ndarray, prior: np.ndarray,
                  smoothing: float = 0.0) -> np.ndarray:
    """Mean of ``values`` over the training rows sharing each query's key.

    Parameters
    ----------
    train_keys
        One key per training row (e.g. its compound).
    values
        Training rows x features.
    query_keys
        One key per row to encode.
    prior
        The encoding of keys unseen in training (one value per feature).
    smoothing
        Pulls the means of small groups towards ``prior``: ``(sum + smoothing * prior) / (count + smoothing)``.

    Returns
    -------
    numpy.ndarray
        Query rows x features.
    """
    uniq, _, sums, counts = _group_sums(train_keys, values)
    pos = {k: i for i, k in enumerate(uniq)}
    out = np.tile(prior, (len(query_keys), 1)).astype(float)
    for r, k in enumerate(query_keys):
        i = pos.get(k)
        if i is not None:
            out[r] = (sums[i] + smoothing * prior) / (counts[i] + smoothing)
    return out


def loo_target_encode(keys: np.ndarray, values: np.ndarray, prior: np.ndarray, smoothing: float = 0.0) -> np.ndarray:
    """Leave-one-out target encoding of training rows: the mean over the *other* rows of its key.

    Parameters
    ----------
    keys
        One key per row.
    values
        Rows x features.
    prior
        The encoding of a row alone in its key.
    smoothing
        As :func:`target_encode`.

    Returns
    -------
    numpy.ndarray
        Rows x features.
    """
    _, inverse, sums, counts = _group_sums(keys, values)
    other_sum = sums[inverse] - values
    other_n = (counts[inverse] - 1)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        enc = (other_sum + smoothing * prior) / (other_n + smoothing)
    alone = other_n[:, 0] + smoothing <= 0
    enc[alone] = prior
    return enc


def out_of_fold_encode(keys: np.ndarray, values: np.ndarray, prior: np.ndarray, n_folds: int, seed: int,
                       smoothing: float = 0.0) -> np.ndarray:
    """K-fold target encoding of training rows: each fold is encoded from the other folds.

    Parameters
    ----------
    keys, values, prior, smoothing
        As :func:`target_encode` (``keys`` and ``values`` of the training rows).
    n_folds
        Rows are assigned to folds at random.
    seed
        Seed of the fold assignment.

    Returns
    -------
    numpy.ndarray
        Rows x features.
    """
    rng = np.random.default_rng(seed)
    fold = rng.integers(0, n_folds, len(keys))
    out = np.empty_like(values, dtype=float)
    for f in range(n_folds):
        test = fold == f
        if test.any():
            out[test] = target_encode(keys[~test], values[~test], keys[test], prior, smoothing)
    return out


def one_hot(values: np.ndarray, levels: list[str]) -> np.ndarray:
    """Indicator columns of ``values`` over ``levels`` (unknown values: all zero).

    Parameters
    ----------
    values
        One value per row.
    levels
        The columns, in order.

    Returns
    -------
    numpy.ndarray
        Rows x levels of 0/1.
    """
    pos = {lv: i for i, lv in enumerate(levels)}
    out = np.zeros((len(values), len(levels)))
    for r, v in enumerate(values):
        if v in pos:
            out[r, pos[v]] = 1.0
    return out


def profile_slots(train: pd.DataFrame, scores: np.ndarray, query: pd.DataFrame, slot_cell_types: list[str],
                  own_row_masked: bool) -> np.ndarray:
    """Target encoding by (compound, cell type): a row's compound profile in each slot cell type.

    Parameters
    ----------
    train
        ``cell_type``, ``sm_name`` of the training rows.
    scores
        Training rows x features (the values encoded).
    query
        ``cell_type``, ``sm_name`` of the rows to encode.
    slot_cell_types
        The cell types whose values of the row's compound become features.
    own_row_masked
        Hide the slot of the row's own cell type (for training rows: the row's own value would
        otherwise be a feature).

    Returns
    -------
    numpy.ndarray
        Query rows x (slots x (features + 1)): per slot cell type c, the training value of
        (c, row's compound) and an indicator of whether it exists.
    """
    lookup = {(c, s): i for i, (c, s) in enumerate(zip(train["cell_type"], train["sm_name"]))}
    k = scores.shape[1]
    out = np.zeros((len(query), len(slot_cell_types) * (k + 1)))
    for r, (ct, sm) in enumerate(zip(query["cell_type"], query["sm_name"])):
        for j, c in enumerate(slot_cell_types):
            i = lookup.get((c, sm))
            if i is None or (own_row_masked and c == ct):
                continue
            out[r, j * (k + 1): j * (k + 1) + k] = scores[i]
            out[r, j * (k + 1) + k] = 1.0
    return out


def common_cell_types(train: pd.DataFrame, query: pd.DataFrame) -> list[str]:
    """Cell types in which every compound to predict has a training row (T and NK cells in OP3).

    Parameters
    ----------
    train, query
        ``cell_type``, ``sm_name`` of the training rows and of the rows to predict.

    Returns
    -------
    list of str
        Sorted cell type names.
    """
    compounds = set(query["sm_name"])
    have = train.groupby("cell_type")["sm_name"].agg(lambda s: compounds <= set(s))
    return sorted(have[have].index)


def _encoding_features(train: pd.DataFrame, query: pd.DataFrame, scores: np.ndarray, train_compound: np.ndarray,
                       train_cell_type: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Training and query features, given the encodings of the training rows by compound and cell type."""
    cell_types = sorted(set(train["cell_type"]) | set(query["cell_type"]))
    prior = np.zeros(scores.shape[1])
    tk_c, qk_c = train["sm_name"].to_numpy(), query["sm_name"].to_numpy()
    tk_t, qk_t = train["cell_type"].to_numpy(), query["cell_type"].to_numpy()
    q_c, q_t = target_encode(tk_c, scores, qk_c, prior), target_encode(tk_t, scores, qk_t, prior)
    slots = common_cell_types(train, query)
    x_train = np.hstack([one_hot(tk_t, cell_types), train_compound, train_cell_type,
                         profile_slots(train, scores, train, slots, True)])
    x_query = np.hstack([one_hot(qk_t, cell_types), q_c, q_t, profile_slots(train, scores, query, slots, False)])
    return x_train, x_query


def loo_encoding_features(train: pd.DataFrame, query: pd.DataFrame, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Features of the competition's target encoders, training rows encoded leave-one-out.

    Each row gets: one-hot cell type; the compound's mean response over its other rows; the cell
    type's mean response over its other rows; and the compound's response in each of the cell types
    observed for every query compound (:func:`profile_slots`, the slot of a training row's own cell
    type hidden). Query rows are encoded from all training rows.

    Parameters
    ----------
    train, query
        ``cell_type``, ``sm_name`` of the training rows and of the rows to predict.
    scores
        Training rows x features: the responses in a compressed space (e.g. SVD scores of the targets).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Training features and query features.
    """
    prior = np.zeros(scores.shape[1])
    by_compound = loo_target_encode(train["sm_name"].to_numpy(), scores, prior)
    by_cell_type = loo_target_encode(train["cell_type"].to_numpy(), scores, prior)
    return _encoding_features(train, query, scores, by_compound, by_cell_type)


def oof_encoding_features(train: pd.DataFrame, query: pd.DataFrame, scores: np.ndarray, *, n_folds: int, seed: int
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Features of the competition's target encoders, training rows encoded out of fold.

    As :func:`loo_encoding_features`, but a training row's compound and cell-type means come from
    the other folds (:func:`out_of_fold_encode`; folds drawn with ``seed`` for compounds and
    ``seed + 1`` for cell types).

    Parameters
    ----------
    train, query, scores
        As :func:`loo_encoding_features`.
    n_folds
        Folds of the encodings of training rows.
    seed
        Seed of the folds.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Training features and query features.
    """
    prior = np.zeros(scores.shape[1])
    by_compound = out_of_fold_encode(train["sm_name"].to_numpy(), scores, prior, n_folds, seed)
    by_cell_type = out_of_fold_encode(train["cell_type"].to_numpy(), scores, prior, n_folds, seed + 1)
    return _encoding_features(train, query, scores, by_compound, by_cell_type)
