"""The linear model, its embeddings, LSFT and hardness (perturbation_effect_lib.linear_model)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from perturbation_effect_lib import holdout_splits as splits
from perturbation_effect_lib import linear_model as lm
from perturbation_effect_lib import perturbseq_simulation as perturb_sim
from perturbation_effect_lib import pseudobulk
from project_paths import SHARED_DATA

HAS_DATA = (SHARED_DATA / "knowledge_graphs").is_dir()
needs_data = pytest.mark.skipif(not HAS_DATA, reason=f"shared data not found at {SHARED_DATA} (set OPENPERT_SHARED_DATA)")


@pytest.fixture(scope="module")
def toy():
    """Profiles with low-rank structure; a combination; targets outside the measured genes."""
    rng = np.random.default_rng(0)
    g = 120
    genes = [f"g{i}" for i in range(g)]
    train = [f"g{i}" for i in range(60)] + ["g1+g2", "g3+x400"]
    test = [f"g{i}" for i in range(60, 72)] + ["g5+g70", "x999"]
    Y = rng.normal(size=(len(train), g)) + rng.normal(size=(len(train), 3)) @ rng.normal(size=(3, g))
    table = lm.random_embedding(genes + ["x400", "x999"], 10, seed=1)
    return dict(Y=Y, genes=genes, train=train, test=test, table=table)


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


def test_perturbation_embedding_is_the_target_row(toy):
    model = lm.fit_linear_model(toy["Y"], toy["train"], toy["genes"])
    emb = model.embed(["g65", "g5+g70", "x999"])
    np.testing.assert_array_equal(emb[0], model.A[65])
    np.testing.assert_allclose(emb[1], model.A[5] + model.A[70])
    assert not emb[2].any()  # a target that is not measured has no PCA vector: prediction = mean
    np.testing.assert_allclose(model.predict(["x999"])[0], toy["Y"].mean(axis=0))


@pytest.mark.parametrize("gene_fixed", [False, True])
@pytest.mark.parametrize("pert_fixed", [False, True])
def test_batched_lsft_equals_refitting_each_model(toy, gene_fixed, pert_fixed):
    table = toy["table"]
    kwargs = dict(gene_embedding=table if gene_fixed else "pca", pert_embedding=table if pert_fixed else "pca",
                  fractions=(0.01, 0.1, 0.5))
    fast = lm.lsft_predict(toy["Y"], toy["train"], toy["test"], toy["genes"], batch_size=7, **kwargs)
    slow = lm.lsft_predict_reference(toy["Y"], toy["train"], toy["test"], toy["genes"], **kwargs)
    for f in kwargs["fractions"]:
        np.testing.assert_allclose(fast.predictions[f], slow[f], rtol=1e-7, atol=1e-8)
        assert fast.neighbours[f].shape == (len(toy["test"]), math.ceil(len(toy["train"]) * f))


def test_lsft_on_all_training_perturbations_is_the_full_model(toy):
    fast = lm.lsft_predict(toy["Y"], toy["train"], toy["test"], toy["genes"], fractions=(1.0,))
    full = lm.fit_linear_model(toy["Y"], toy["train"], toy["genes"]).predict(toy["test"])
    np.testing.assert_allclose(fast.predictions[1.0], full, atol=1e-8)


def test_lsft_with_one_neighbour_predicts_that_neighbour(toy):
    res = lm.lsft_predict(toy["Y"], toy["train"], toy["test"], toy["genes"], fractions=(0.01,))
    assert res.neighbours[0.01].shape[1] == 1
    rows = np.flatnonzero(res.has_embedding)
    np.testing.assert_allclose(res.predictions[0.01][rows], toy["Y"][res.neighbours[0.01][rows, 0]], atol=1e-10)


def test_hardness_is_mean_cosine_similarity_of_the_top_k():
    B_train = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.0]])
    B_test = np.array([[2.0, 0.0], [0.0, 0.0]])
    hard = lm.hardness(B_test, B_train, fractions=(0.25, 0.5, 1.0))
    # similarities of [2, 0]: 1, 0, 1/sqrt(2), -1 -> top 1: 1; top 2: (1 + .7071) / 2; all: mean
    np.testing.assert_allclose(hard[0], [1.0, (1 + 1 / math.sqrt(2)) / 2, (1 + 0 + 1 / math.sqrt(2) - 1) / 4])
    assert np.isnan(hard[1]).all()  # no embedding, no hardness


def test_random_embedding_of_a_gene_does_not_depend_on_the_others():
    a = lm.random_embedding(["A", "B", "C"], 5, seed=3)
    b = lm.random_embedding(["C", "Z"], 5, seed=3)
    np.testing.assert_array_equal(a.loc["C"], b.loc["C"])
    assert not np.allclose(a.loc["A"], a.loc["B"])
    assert not np.allclose(lm.random_embedding(["C"], 5, seed=4).loc["C"], b.loc["C"])


def test_spectral_embedding_separates_two_communities():
    left = [f"L{i}" for i in range(6)]
    right = [f"R{i}" for i in range(6)]
    pairs = [(a, b) for group in (left, right) for i, a in enumerate(group) for b in group[i + 1:]]
    pairs += [("L0", "R0"), ("X1", "X2")]  # a bridge, and a separate component that is dropped
    edges = pd.DataFrame(pairs, columns=["source", "target"])
    edges["relation"], edges["sign"], edges["directed"], edges["database"] = "physical", 0, False, "toy"
    emb = lm.spectral_embedding(edges, n_components=2)
    assert set(emb.index) == set(left) | set(right)
    first = emb[0]
    assert (np.sign(first[left]) != np.sign(first[right].mean())).all() or (np.sign(first[right]) != np.sign(first[left].mean())).all()
    assert np.sign(first[left].mean()) != np.sign(first[right].mean())


def test_go_membership_embedding_groups_genes_of_one_term():
    sets = {f"T{k}": [f"T{k}_{i}" for i in range(6)] for k in range(12)}
    sets["shared"] = ["T0_0", "T1_0"]
    genes = [g for members in sets.values() for g in members] + ["nowhere"]
    emb = lm.go_membership_embedding(genes, sets, n_components=11)
    sim = lm.cosine_similarity(emb.to_numpy(), emb.to_numpy())
    idx = {g: i for i, g in enumerate(emb.index)}
    assert sim[idx["T3_1"], idx["T3_2"]] > 0.99
    assert abs(sim[idx["T3_1"], idx["T4_1"]]) < 0.5
    assert not emb.loc["nowhere"].any()


def test_mean_and_additive_baselines():
    control = np.array([1.0, 1.0, 1.0])
    Y = np.array([[2.0, 1.0, 1.0], [1.0, 3.0, 1.0], [2.0, 2.0, 2.0]])
    train = ["A", "B", "A+C"]
    np.testing.assert_array_equal(lm.mean_prediction(Y, 2), np.tile(Y.mean(axis=0), (2, 1)))
    pred = lm.additive_prediction(Y, train, ["A+B", "C", "B+D"], control)
    np.testing.assert_array_equal(pred[0], [2.0, 3.0, 1.0])  # control + (1, 0, 0) + (0, 2, 0)
    mean_single = np.array([0.5, 1.0, 0.0])
    np.testing.assert_array_equal(pred[1], control + mean_single)  # C has no single perturbation
    np.testing.assert_array_equal(pred[2], control + np.array([0.0, 2.0, 0.0]) + mean_single)


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

    linear, _ = lm.predict_task(train, test)
    mean = lm.mean_prediction(train.X, test.n_obs)
    assert pearson(linear) > pearson(mean) + 0.05


@needs_data
@pytest.mark.parametrize("source", ["huri", "omnipath", "go_bp"])
def test_knowledge_graph_embeddings(source):
    from pertsci import knowledge_graphs as kg

    edges = {"huri": kg.huri_edges, "omnipath": kg.omnipath_edges}.get(source)
    known = sorted(set(edges()["source"]))[:20] if edges else ["TP53", "MDM2", "CDK1", "CCNB1", "RPL3", "RPS6"]
    genes = known + ["NOT_A_GENE"]
    table = lm.embedding_table(source, genes)
    assert table.shape[1] == lm.N_COMPONENTS
    assert np.isfinite(table.to_numpy()).all()
    rows = table.reindex(genes).fillna(0.0).to_numpy()
    assert (np.abs(rows[:-1]).sum(axis=1) > 0).mean() > 0.5  # most known genes have a vector
    assert not rows[-1].any()
    nonzero = (table.to_numpy() ** 2).sum(axis=1) > 0
    np.testing.assert_allclose((table.to_numpy()[nonzero] ** 2).sum(axis=1).mean(), lm.N_COMPONENTS)


def test_pca_scores_of_a_large_matrix_use_lanczos_and_agree_with_the_svd():
    rng = np.random.default_rng(1)
    n = lm._DENSE_EIGH_MAX + 50  # past the dense solver's range
    centred = (rng.normal(size=(n, 3)) * [5.0, 3.0, 2.0]) @ rng.normal(size=(3, 600)) + rng.normal(size=(n, 600))
    centred -= centred.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    scores = lm.pca_gene_scores(centred, 10)
    np.testing.assert_allclose(np.abs(scores), np.abs(vt[:10].T * s[:10]), atol=1e-7)
