"""perturbation_prediction_lib.target_encoding: group means, leave-one-out and out-of-fold encodings, features."""

from __future__ import annotations

from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from perturbation_prediction_lib.de_files import row_keys
from perturbation_prediction_lib.target_encoding import (
    common_cell_types,
    loo_encoding_features,
    loo_target_encode,
    one_hot,
    oof_encoding_features,
    out_of_fold_encode,
    profile_slots,
    target_encode,
)

DATA = Path(__file__).resolve().parents[2] / "resources_test" / "perturbation_prediction" / "op3_synthetic"


@pytest.fixture(scope="module")
def data():
    de_train = ad.read_h5ad(DATA / "de_train.h5ad")
    id_map = pd.read_csv(DATA / "id_map.csv")
    return de_train, id_map


def test_baseline_encodings(data):
    de_train, id_map = data
    y = pd.DataFrame(de_train.layers["clipped_sign_log10_pval"], columns=de_train.var_names)
    keys = row_keys(de_train.obs)
    for col in ("cell_type", "sm_name"):
        expected = y.groupby(keys[col].to_numpy()).mean().loc[id_map[col]].to_numpy()
        got = target_encode(keys[col].to_numpy(), y.to_numpy(), id_map[col].astype(str).to_numpy(), y.mean().to_numpy())
        np.testing.assert_allclose(got, expected)
    # Leave-one-out: a row's encoding excludes the row itself.
    loo = loo_target_encode(keys["sm_name"].to_numpy(), y.to_numpy(), np.zeros(y.shape[1]))
    same = (keys["sm_name"] == keys["sm_name"].iloc[0]).to_numpy()
    same[0] = False
    np.testing.assert_allclose(loo[0], y.to_numpy()[same].mean(axis=0))


def test_unseen_keys_smoothing_and_lonely_rows():
    keys = np.array(["a", "a", "b"])
    values = np.array([[1.0], [3.0], [10.0]])
    prior = np.array([0.0])
    np.testing.assert_allclose(target_encode(keys, values, np.array(["a", "z"]), prior), [[2.0], [0.0]])
    np.testing.assert_allclose(target_encode(keys, values, np.array(["a"]), prior, smoothing=2.0), [[1.0]])  # (4 + 0) / (2 + 2)
    np.testing.assert_allclose(loo_target_encode(keys, values, prior), [[3.0], [1.0], [0.0]])  # b is alone: the prior


def test_out_of_fold_rows_are_encoded_from_other_folds():
    rng = np.random.default_rng(0)
    keys = rng.choice(list("abc"), 60)
    values = rng.normal(size=(60, 2))
    prior = np.zeros(2)
    enc = out_of_fold_encode(keys, values, prior, n_folds=3, seed=4)
    fold = np.random.default_rng(4).integers(0, 3, 60)  # the folds the function draws
    for i in (0, 17, 42):
        others = (fold != fold[i]) & (keys == keys[i])
        np.testing.assert_allclose(enc[i], values[others].mean(axis=0))


def test_one_hot_and_common_cell_types():
    np.testing.assert_array_equal(one_hot(np.array(["b", "z", "a"]), ["a", "b"]), [[0, 1], [0, 0], [1, 0]])
    train = pd.DataFrame({"cell_type": ["T", "T", "NK", "B"], "sm_name": ["x", "y", "x", "y"]})
    query = pd.DataFrame({"cell_type": ["B"], "sm_name": ["x"]})
    assert common_cell_types(train, query) == ["NK", "T"]
    query2 = pd.DataFrame({"cell_type": ["B", "B"], "sm_name": ["x", "y"]})
    assert common_cell_types(train, query2) == ["T"]


def test_profile_slots_hide_a_training_row_of_its_own_cell_type():
    train = pd.DataFrame({"cell_type": ["T", "NK", "T"], "sm_name": ["x", "x", "y"]})
    scores = np.array([[1.0], [2.0], [3.0]])
    slots = profile_slots(train, scores, train, ["NK", "T"], own_row_masked=True)
    # Row 0 (T, x): NK slot holds (NK, x) = 2; its own T slot is hidden.
    np.testing.assert_array_equal(slots[0], [2.0, 1.0, 0.0, 0.0])
    query = pd.DataFrame({"cell_type": ["B"], "sm_name": ["x"]})
    np.testing.assert_array_equal(profile_slots(train, scores, query, ["NK", "T"], own_row_masked=False)[0], [2.0, 1.0, 1.0, 1.0])


@pytest.mark.parametrize("encode", ["loo", "oof"])
def test_training_features_never_hold_the_row_itself(data, encode):
    """Changing one training row's value leaves that row's features unchanged."""
    de_train, id_map = data
    train, query = row_keys(de_train.obs), row_keys(id_map)
    scores = np.asarray(de_train.layers["clipped_sign_log10_pval"])[:, :5].copy()

    def features(s):
        if encode == "loo":
            return loo_encoding_features(train, query, s)
        return oof_encoding_features(train, query, s, n_folds=5, seed=0)

    x_tr, x_q = features(scores)
    n_cell_types = len(set(train["cell_type"]) | set(query["cell_type"]))
    slots = common_cell_types(train, query)
    assert x_tr.shape == (len(train), n_cell_types + 2 * 5 + len(slots) * 6)
    assert x_q.shape == (len(query), x_tr.shape[1])
    changed = scores.copy()
    changed[0] += 100.0
    x_tr2, x_q2 = features(changed)
    np.testing.assert_allclose(x_tr2[0], x_tr[0])
    assert not np.allclose(x_tr2, x_tr)  # other rows do see it
