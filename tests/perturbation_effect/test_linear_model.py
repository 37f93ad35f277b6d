"""The linear model Y ~ A K B^T + b and its training-data PCA (perturbation_effect_lib.linear_model)."""

from __future__ import annotations

import numpy as np
import pytest
from perturbation_effect_lib import holdout_splits as splits
from perturbation_effect_lib import linear_model as lm
from perturbation_effect_lib import perturbseq_simulation as perturb_sim
from perturbation_effect_lib import profile_baselines, pseudobulk


def test_fit_matches_the_closed_form(toy):
    Y, train, genes = toy["Y"], toy["train"], toy["genes"]
    model = lm.fit_linear_model(Y, train, genes, n_components=10, ridge=0.1)
    b = Y.mean(axis=0)
    Yc = (Y - b).T  # genes x perturbations
    A = model.A
    P = model.embed(train)
    K = np.linalg.inv(A.T @ A + 0.1 * np.eye(10)) @ A.T @ Yc @ P @ np.linalg.inv(P.T @ P + 0.1 * np.eye(10))
    np.testing.assert_allclose(model.K, K, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(model.predict(toy["test"]), (A @ K @ model.embed(toy["test"]).T).T + b, atol=1e-10)
    # The PCA gene scores: orthogonal columns, and with every component they rebuild the data.
    gram = A.T @ A
    np.testing.assert_allclose(gram, np.diag(np.diag(gram)), atol=1e-8 * gram.max())
    # ... and they are the SVD's top components V S (up to sign), for either orientation.
    _, s, vt = np.linalg.svd(Y - b, full_matrices=False)
    expected = vt[:10].T * s[:10]
    signs = np.sign((A * expected).sum(axis=0))
    np.testing.assert_allclose(A * signs, expected, atol=1e-8)
    wide = Y[:, :50] - Y[:, :50].mean(axis=0)  # more perturbations than genes: the gene-side Gram
    _, s2, vt2 = np.linalg.svd(wide, full_matrices=False)
    scores = lm.pca_gene_scores(wide, 10)
    np.testing.assert_allclose(np.abs(scores), np.abs(vt2[:10].T * s2[:10]), atol=1e-8)


def test_fixed_tables_are_used_as_given(toy):
    """With fixed tables, A is the table's rows of the measured genes and B sums the targets' rows."""
    table = toy["table"]
    model = lm.fit_linear_model(toy["Y"], toy["train"], toy["genes"], gene_embedding=table, pert_embedding=table)
    np.testing.assert_array_equal(model.A, table.loc[toy["genes"]].to_numpy())
    np.testing.assert_allclose(model.embed(["g3+x400"])[0], table.loc["g3"] + table.loc["x400"])
    with pytest.raises(ValueError, match="'pca' or a table"):
        lm.fit_linear_model(toy["Y"], toy["train"], toy["genes"], gene_embedding="random")
    with pytest.raises(ValueError, match="expected"):
        lm.fit_linear_model(toy["Y"][:-1], toy["train"], toy["genes"])


def test_perturbation_embedding_is_the_target_row(toy):
    model = lm.fit_linear_model(toy["Y"], toy["train"], toy["genes"])
    emb = model.embed(["g65", "g5+g70", "x999"])
    np.testing.assert_array_equal(emb[0], model.A[65])
    np.testing.assert_allclose(emb[1], model.A[5] + model.A[70])
    assert not emb[2].any()  # a target that is not measured has no PCA vector: prediction = mean
    np.testing.assert_allclose(model.predict(["x999"])[0], toy["Y"].mean(axis=0))


def test_ridge_core_solves_both_sides():
    rng = np.random.default_rng(3)
    A, Y, P = rng.normal(size=(30, 4)), rng.normal(size=(30, 12)), rng.normal(size=(12, 3))
    K = lm.ridge_core(A.T @ A, A.T @ Y, P, 0.5)
    expected = np.linalg.inv(A.T @ A + 0.5 * np.eye(4)) @ A.T @ Y @ P @ np.linalg.inv(P.T @ P + 0.5 * np.eye(3))
    np.testing.assert_allclose(K, expected, atol=1e-10)
    stacked = lm.ridge_core(np.stack([A.T @ A] * 2), np.stack([A.T @ Y] * 2), np.stack([P] * 2), 0.5)
    np.testing.assert_allclose(stacked[1], expected, atol=1e-10)


def test_the_pca_model_learns_functional_structure():
    """On a simulated screen with gene programs, the training-PCA model beats the mean baseline."""
    sim = perturb_sim.simulate_screen(n_genes=400, n_perturbations=90, n_combinations=0, n_programs=6,
                                      program_size=(14, 18), cells_per_perturbation=40, n_control_cells=200, seed=5)
    profiles, control = pseudobulk.pseudobulk(sim.cells)
    profiles.obs["functional_class"] = sim.functional_class.reindex(profiles.obs_names).to_numpy()
    train, test, solution = splits.split_profiles(profiles, control, uns={"dataset_id": "s"})
    observed = solution.layers["expression"] - control.to_numpy()

    def pearson(pred):
        a = pred - control.to_numpy()
        return np.mean([np.corrcoef(x, y)[0, 1] for x, y in zip(a, observed)])

    linear = lm.fit_linear_model(train.X, list(train.obs_names), train.var_names).predict(list(test.obs_names))
    mean = profile_baselines.mean_prediction(train.X, test.n_obs)
    assert pearson(linear) > pearson(mean) + 0.05


def test_pca_scores_of_a_large_matrix_use_lanczos_and_agree_with_the_svd():
    rng = np.random.default_rng(1)
    n = lm._DENSE_EIGH_MAX + 50  # past the dense solver's range
    centred = (rng.normal(size=(n, 3)) * [5.0, 3.0, 2.0]) @ rng.normal(size=(3, 600)) + rng.normal(size=(n, 600))
    centred -= centred.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    scores = lm.pca_gene_scores(centred, 10)
    np.testing.assert_allclose(np.abs(scores), np.abs(vt[:10].T * s[:10]), atol=1e-7)


def test_authors_convention_follows_their_recipe(toy):
    """PCA of the conditions with the control (centred per condition), fitted to single perturbations and the control."""
    rng = np.random.default_rng(4)
    Y, genes, train = toy["Y"] + 3.0 * rng.random(len(toy["genes"])), toy["genes"], toy["train"]
    control = 3.0 * rng.random(len(genes))
    model = lm.fit_linear_model(Y, train, genes, pca_convention="authors", control=control)
    # train holds a combination (g1+g2) and one with an unmeasured target (g3+x400): both are
    # combinations, left out of the fit and counted.
    assert model.excluded == {"combination": ["g1+g2", "g3+x400"], "target_without_embedding": []}
    assert model.fitted.sum() == 60
    conditions = np.vstack([Y, control]).T  # genes x conditions, genes the observations
    u, s, _ = np.linalg.svd(conditions - conditions.mean(axis=0), full_matrices=False)
    A = u[:, :10] * s[:10]
    change = np.hstack([(Y[:60] - control).T, np.zeros((len(genes), 1))])  # the control: change 0
    centre = change.mean(axis=1, keepdims=True)
    B = np.hstack([A[:60].T, np.zeros((10, 1))])  # the control: embedding 0
    K = np.linalg.solve(A.T @ A + 0.1 * np.eye(10), A.T @ (change - centre) @ B.T) @ np.linalg.inv(B @ B.T + 0.1 * np.eye(10))
    expected = (A @ K @ A[[61, 65]].T + centre + control[:, None]).T
    np.testing.assert_allclose(model.predict(["g61", "g65"]), expected, atol=1e-9)
    with pytest.raises(ValueError, match="control profile"):
        lm.fit_linear_model(Y, train, genes, pca_convention="authors")
    with pytest.raises(ValueError, match="pca_convention"):
        lm.fit_linear_model(Y, train, genes, pca_convention="other", control=control)


def test_single_perturbations_without_an_embedded_target_are_left_out_and_counted(toy):
    table = toy["table"].drop(index=["g7", "g8"])
    control = np.zeros(len(toy["genes"]))
    model = lm.fit_linear_model(toy["Y"], toy["train"], toy["genes"], gene_embedding=table, pert_embedding=table,
                                pca_convention="authors", control=control)
    assert model.excluded["target_without_embedding"] == ["g7", "g8"]
    assert not model.fitted[[7, 8]].any() and model.fitted.sum() == 58
    # The variant keeps them in the fit (with a zero embedding) but still counts them.
    variant = lm.fit_linear_model(toy["Y"], toy["train"], toy["genes"], gene_embedding=table, pert_embedding=table)
    assert variant.fitted.all() and variant.excluded["target_without_embedding"] == ["g7", "g8"]
    with pytest.raises(ValueError, match="no training perturbation can be fitted"):
        lm.fit_linear_model(toy["Y"][60:], toy["train"][60:], toy["genes"], pca_convention="authors", control=control)
