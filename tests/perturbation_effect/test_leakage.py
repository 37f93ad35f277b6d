"""A test perturbation's own outcome cannot change its embedding or its prediction.

The whole path from single cells to predictions is run twice: once on a simulated screen, and once
after the cells of one held-out perturbation were replaced by different expression. Everything a
method sees (training file, test file) and everything it computes for that perturbation (its
embedding, neighbours, hardness and prediction, with and without LSFT) must be identical. The
counter-check perturbs a *training* perturbation the same way and shows the same comparison does
notice a change, so the test is not vacuous.
"""

from __future__ import annotations

import anndata as ad
import numpy as np
import pytest
import scipy.sparse as sp
from perturbation_effect_lib import embeddings, linear_model, lsft, prediction_files, pseudobulk
from perturbation_effect_lib import holdout_splits as splits
from perturbation_effect_lib import perturbseq_simulation as perturb_sim
from project_paths import ROOT

from openpert.config.viash import read_config
from openpert.run.component import run_component

EMBEDDINGS = [("pca", "pca"), ("pca", "random"), ("random", "pca")]


@pytest.fixture(scope="module")
def screen():
    sim = perturb_sim.simulate_screen(n_genes=300, n_perturbations=40, n_combinations=6, n_programs=4,
                                      program_size=(10, 14), cells_per_perturbation=15, n_control_cells=100, seed=11)
    return sim


def task_files(cells: ad.AnnData, functional_class) -> tuple[ad.AnnData, ad.AnnData, ad.AnnData]:
    profiles, control = pseudobulk.pseudobulk(cells)
    profiles.obs["functional_class"] = functional_class.reindex(profiles.obs_names).to_numpy()
    return splits.split_profiles(profiles, control, split="simulation", seed=1, uns={"dataset_id": "leak"})


def tamper(cells: ad.AnnData, perturbation: str, seed: int) -> ad.AnnData:
    """Replace the expression of one perturbation's cells by random log-expression."""
    out = cells.copy()
    mask = (out.obs["condition"] == pseudobulk.condition_name(perturbation.split("+"))).to_numpy()
    assert mask.sum() > 0
    X = out.X.toarray()
    X[mask] = np.random.default_rng(seed).gamma(1.0, 1.0, size=(mask.sum(), X.shape[1]))
    out.X = sp.csr_matrix(X)
    return out


def predictions(train, test, gene_emb, pert_emb, lsft_fraction):
    # As the linear method scripts do: random tables for the measured genes and every target.
    wanted = embeddings.genes_to_embed(train.var_names, [*train.obs_names, *test.obs_names])

    def table(source):
        return source if source == "pca" else embeddings.random_embedding(wanted, 10)

    out = lsft.predict_test_perturbations(
        prediction_files.training_profiles(train), train.obs_names, test.obs_names, train.var_names,
        gene_embedding=table(gene_emb), pert_embedding=table(pert_emb), lsft_fraction=lsft_fraction,
    )
    model = linear_model.fit_linear_model(train.X, list(train.obs_names), train.var_names,
                                          gene_embedding=gene_emb if gene_emb == "pca" else
                                          embeddings.random_embedding(train.var_names, 10),
                                          pert_embedding=pert_emb if pert_emb == "pca" else
                                          embeddings.random_embedding(
                                              list(train.var_names) + [t for p in test.obs_names for t in p.split("+")], 10))
    return out.predictions, out.hardness.to_numpy(), model.embed(list(test.obs_names))


@pytest.fixture(scope="module")
def runs(screen):
    cells = screen.cells
    train, test, solution = task_files(cells, screen.functional_class)
    singles = [p for p in test.obs_names if "+" not in p and p in train.var_names]
    held = singles[0]
    tampered_train, tampered_test, tampered_solution = task_files(tamper(cells, held, 1), screen.functional_class)
    trained = next(p for p in train.obs_names if "+" not in p)
    moved_train, moved_test, _ = task_files(tamper(cells, trained, 2), screen.functional_class)
    return dict(train=train, test=test, solution=solution, held=held,
                tampered=(tampered_train, tampered_test, tampered_solution), moved=(moved_train, moved_test))


def test_method_inputs_do_not_depend_on_the_held_out_outcome(runs):
    train, test, solution = runs["train"], runs["test"], runs["solution"]
    t_train, t_test, t_solution = runs["tampered"]
    held = runs["held"]
    # The tampering did change the held-out perturbation's observed profile...
    assert not np.allclose(solution[held].layers["expression"], t_solution[held].layers["expression"])
    # ...but nothing a method reads.
    np.testing.assert_array_equal(train.X, t_train.X)
    assert train.obs.equals(t_train.obs) and test.obs.equals(t_test.obs)
    np.testing.assert_array_equal(train.var["control_mean"], t_train.var["control_mean"])


@pytest.mark.parametrize("gene_emb,pert_emb", EMBEDDINGS)
@pytest.mark.parametrize("lsft", [0.0, 0.1])
def test_embedding_and_prediction_do_not_depend_on_own_outcome(runs, gene_emb, pert_emb, lsft):
    base = predictions(runs["train"], runs["test"], gene_emb, pert_emb, lsft)
    t_train, t_test, _ = runs["tampered"]
    again = predictions(t_train, t_test, gene_emb, pert_emb, lsft)
    for a, b in zip(base, again):
        np.testing.assert_array_equal(a, b)
    if lsft == 0:
        # Counter-check: changing a training perturbation's cells does change the predictions (with
        # LSFT it changes only those of test perturbations that have it among their neighbours).
        m_train, m_test = runs["moved"]
        moved = predictions(m_train, m_test, gene_emb, pert_emb, lsft)
        assert not np.allclose(base[0], moved[0])


def test_method_component_prediction_is_unchanged(runs, tmp_path):
    """The same through the harness: the linear_pca component run on both versions of the files."""
    config = read_config(ROOT / "src/perturbation_effect/methods/linear_pca/config.vsh.yaml")
    outputs = []
    for name, (train, test) in {"base": (runs["train"], runs["test"]), "tampered": runs["tampered"][:2]}.items():
        folder = tmp_path / name
        folder.mkdir()
        train.write_h5ad(folder / "train.h5ad")
        test.write_h5ad(folder / "test.h5ad")
        result = run_component(config, {"input_train": folder / "train.h5ad", "input_test": folder / "test.h5ad",
                                        "output": folder / "prediction.h5ad", "lsft_fraction": 0.1},
                               work_dir=tmp_path / f"work_{name}")
        assert result.succeeded, result.reason
        outputs.append(ad.read_h5ad(folder / "prediction.h5ad"))
    np.testing.assert_array_equal(outputs[0].layers["prediction"], outputs[1].layers["prediction"])
    np.testing.assert_array_equal(outputs[0].obs.to_numpy(), outputs[1].obs.to_numpy())
