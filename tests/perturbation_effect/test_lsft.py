"""LSFT's batched refits and the prediction of test perturbations (perturbation_effect_lib.lsft)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from perturbation_effect_lib import hardness as hardness_lib
from perturbation_effect_lib import linear_model as lm
from perturbation_effect_lib import lsft


@pytest.mark.parametrize("gene_fixed", [False, True])
@pytest.mark.parametrize("pert_fixed", [False, True])
def test_batched_lsft_equals_refitting_each_model(toy, gene_fixed, pert_fixed):
    table = toy["table"]
    kwargs = dict(gene_embedding=table if gene_fixed else "pca", pert_embedding=table if pert_fixed else "pca",
                  fractions=(0.01, 0.1, 0.5))
    fast = lsft.lsft_predict(toy["Y"], toy["train"], toy["test"], toy["genes"], batch_size=7, **kwargs)
    slow = lsft.lsft_predict_reference(toy["Y"], toy["train"], toy["test"], toy["genes"], **kwargs)
    for f in kwargs["fractions"]:
        np.testing.assert_allclose(fast.predictions[f], slow[f], rtol=1e-7, atol=1e-8)
        assert fast.neighbours[f].shape == (len(toy["test"]), math.ceil(len(toy["train"]) * f))


def test_lsft_on_all_training_perturbations_is_the_full_model(toy):
    fast = lsft.lsft_predict(toy["Y"], toy["train"], toy["test"], toy["genes"], fractions=(1.0,))
    full = lm.fit_linear_model(toy["Y"], toy["train"], toy["genes"]).predict(toy["test"])
    np.testing.assert_allclose(fast.predictions[1.0], full, atol=1e-8)


def test_lsft_with_one_neighbour_predicts_that_neighbour(toy):
    res = lsft.lsft_predict(toy["Y"], toy["train"], toy["test"], toy["genes"], fractions=(0.01,))
    assert res.neighbours[0.01].shape[1] == 1
    rows = np.flatnonzero(res.has_embedding)
    np.testing.assert_allclose(res.predictions[0.01][rows], toy["Y"][res.neighbours[0.01][rows, 0]], atol=1e-10)
    # A test perturbation without an embedding keeps the full model's prediction (the mean profile).
    assert not res.has_embedding[toy["test"].index("x999")]
    np.testing.assert_allclose(res.predictions[0.01][toy["test"].index("x999")], toy["Y"].mean(axis=0), atol=1e-10)


@pytest.mark.parametrize("fraction", [0.0, 0.1])
def test_predict_test_perturbations_is_the_full_model_or_lsft(toy, fraction):
    table = toy["table"]
    out = lsft.predict_test_perturbations(toy["Y"], toy["train"], toy["test"], toy["genes"],
                                          gene_embedding="pca", pert_embedding=table, lsft_fraction=fraction)
    pred, hard = out.predictions, out.hardness
    model = lm.fit_linear_model(toy["Y"], toy["train"], toy["genes"], pert_embedding=table)
    if fraction:
        expected = lsft.lsft_predict(toy["Y"], toy["train"], toy["test"], toy["genes"], fractions=[fraction],
                                     pert_embedding=table).predictions[fraction]
        assert not np.allclose(pred, model.predict(toy["test"]))
    else:
        expected = model.predict(toy["test"])
    np.testing.assert_array_equal(pred, expected)
    # Hardness is measured in the full model's embedding space, whether LSFT is on or not.
    assert list(hard.columns) == ["hardness_top1pct", "hardness_top5pct", "hardness_top10pct"]
    assert list(hard.index) == toy["test"]
    np.testing.assert_array_equal(hard.to_numpy(), hardness_lib.hardness(model.embed(toy["test"]), model.embed(toy["train"])))


def test_authors_lsft_on_every_fitted_perturbation_is_the_full_model(toy):
    """With singles only and the whole fit set as neighbours, each refit is the full authors' model."""
    Y, train, control = toy["Y"][:60], toy["train"][:60], np.zeros(len(toy["genes"]))
    full = lm.fit_linear_model(Y, train, toy["genes"], pca_convention="authors", control=control)
    local = lsft.lsft_predict_authors(Y, train, toy["test"], toy["genes"], control, fraction=1.0)
    np.testing.assert_allclose(local, full.predict(toy["test"]), atol=1e-9)


def test_authors_lsft_refits_on_the_nearest_fitted_perturbations(toy):
    Y, train, test, genes = toy["Y"], toy["train"], toy["test"], toy["genes"]
    control = np.full(len(genes), 0.5)
    out = lsft.predict_test_perturbations(Y, train, test, genes, gene_embedding="pca", pert_embedding="pca",
                                          lsft_fraction=0.1, pca_convention="authors", control=control)
    full = lm.fit_linear_model(Y, train, genes, pca_convention="authors", control=control)
    pool = np.flatnonzero(full.fitted)  # the combinations of the training set are no neighbours
    sim = hardness_lib.cosine_similarity(full.embed(test[:1]), full.embed([train[j] for j in pool]))[0]
    k = math.ceil(0.1 * len(pool))
    S = pool[np.argsort(-sim, kind="stable")[:k]]
    expected = lm.fit_linear_model(Y[S], [train[j] for j in S], genes, pca_convention="authors",
                                   control=control).predict(test[:1])[0]
    np.testing.assert_allclose(out.predictions[0], expected, atol=1e-10)
    assert out.excluded["combination"] == ["g1+g2", "g3+x400"]
    assert not np.allclose(out.predictions, full.predict(test))
