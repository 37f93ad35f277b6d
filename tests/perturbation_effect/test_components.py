"""The components on the test resources: prior knowledge comes from the dataset's file, never the shared data."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from perturbation_effect_lib import control_predictions, embeddings, gene_knowledge, lsft, prediction_files
from project_paths import ROOT, SHARED_DATA

from openpert.config.formats import FileFormat
from openpert.config.task import Task
from openpert.config.viash import read_config
from openpert.run.component import run_component
from pertsci import knowledge_graphs as kg

KG_DIR = SHARED_DATA / "knowledge_graphs"
needs_data = pytest.mark.skipif(not KG_DIR.is_dir(), reason=f"shared data not found at {SHARED_DATA} (set OPENPERT_SHARED_DATA)")
TASK = ROOT / "src/perturbation_effect"
DATASET = ROOT / "resources_test/perturbation_effect/synthetic_simulation"


def run_method(name: str, tmp_path, **extra) -> ad.AnnData:
    config = read_config(TASK / f"methods/{name}/config.vsh.yaml")
    args = {"input_train": DATASET / "train.h5ad", "input_test": DATASET / "test.h5ad",
            "input_gene_knowledge": DATASET / "gene_knowledge.parquet", "output": tmp_path / "prediction.h5ad", **extra}
    result = run_component(config, args, work_dir=tmp_path / "work", allowed_input_formats=Task(TASK).method_formats)
    assert result.succeeded, result.reason + "\n" + result.log.read_text()[-2000:]
    return ad.read_h5ad(tmp_path / "prediction.h5ad")


@needs_data
@pytest.mark.parametrize("name", ["linear_huri", "linear_omnipath", "linear_go"])
def test_knowledge_methods_equal_the_model_on_the_knowledge_graphs(name, tmp_path):
    """The prediction from the dataset's gene-knowledge file is the one from the knowledge graphs themselves."""
    train, test = ad.read_h5ad(DATASET / "train.h5ad"), ad.read_h5ad(DATASET / "test.h5ad")
    genes = embeddings.genes_to_embed(train.var_names, [*train.obs_names, *test.obs_names])
    table = {
        "linear_huri": lambda: embeddings.spectral_embedding(kg.huri_edges(KG_DIR, kg.ensembl_to_symbol(KG_DIR.parent / "perturbqa" / "k562_gw_mapping_full.json"))),
        "linear_omnipath": lambda: embeddings.spectral_embedding(kg.omnipath_edges(KG_DIR)),
        "linear_go": lambda: embeddings.go_membership_embedding(genes, kg.gene_sets("go_bp", KG_DIR)),
    }[name]()
    expected = lsft.predict_test_perturbations(
        prediction_files.training_profiles(train), train.obs_names, test.obs_names, train.var_names,
        gene_embedding="pca", pert_embedding=table, lsft_fraction=0.0, pca_convention="authors",
        control=train.var["control_mean"].to_numpy(),
    )
    out = run_method(name, tmp_path)
    # Up to rounding: ARPACK keeps state between calls, and this process may have called it before.
    np.testing.assert_allclose(out.layers["prediction"], expected.predictions, rtol=1e-9, atol=1e-12)
    pd.testing.assert_frame_equal(out.obs, expected.hardness, rtol=1e-9, atol=1e-12)
    assert out.uns["method_id"] == name
    # The training perturbations outside the paper's model are counted, not dropped silently.
    assert out.uns["pca_convention"] == "authors"
    assert out.uns["n_train_combination"] == len(expected.excluded["combination"]) == int((train.obs["n_targets"] > 1).sum())
    assert out.uns["n_train_target_without_embedding"] == len(expected.excluded["target_without_embedding"])


def test_a_knowledge_method_without_the_file_says_what_it_needs(tmp_path):
    config = read_config(TASK / "methods/linear_huri/config.vsh.yaml")
    args = {"input_train": DATASET / "train.h5ad", "input_test": DATASET / "test.h5ad", "output": tmp_path / "prediction.h5ad"}
    result = run_component(config, args, work_dir=tmp_path / "work")
    assert not result.succeeded
    assert "--input_gene_knowledge is required" in result.log.read_text()


def test_every_method_may_read_the_gene_knowledge():
    """The file is part of the method API, so the engine hands it to every method of a dataset."""
    task = Task(TASK)
    assert "file_gene_knowledge" in task.method_formats
    assert "file_gene_knowledge" in task.dataset_formats
    assert (DATASET / task.format_filename("file_gene_knowledge")).is_file()


def test_synthetic_genes_without_the_shared_data_get_an_empty_gene_knowledge(tmp_path):
    config = read_config(TASK / "datasets/synthetic/config.vsh.yaml")
    out = {name: tmp_path / name for name in ("train.h5ad", "test.h5ad", "solution.h5ad", "gene_knowledge.parquet")}
    args = {**config.test_defaults(), "gene_source": "synthetic", "output_train": out["train.h5ad"],
            "output_test": out["test.h5ad"], "output_solution": out["solution.h5ad"],
            "output_gene_knowledge": out["gene_knowledge.parquet"]}
    result = run_component(config, args, work_dir=tmp_path / "work")
    assert result.succeeded, result.reason + "\n" + result.log.read_text()[-2000:]
    knowledge = gene_knowledge.read_gene_knowledge(out["gene_knowledge.parquet"])
    assert knowledge.empty and list(knowledge.columns) == gene_knowledge.COLUMNS
    assert ad.read_h5ad(out["train.h5ad"]).var_names[0].startswith("GENE")
    # and it is still a valid gene-knowledge file
    Task(TASK).file_formats["file_gene_knowledge"].validate(out["gene_knowledge.parquet"])
    assert isinstance(Task(TASK).file_formats["file_gene_knowledge"], FileFormat)


def test_k562_genes_need_the_shared_data(tmp_path):
    config = read_config(TASK / "datasets/synthetic/config.vsh.yaml")
    args = {**config.test_defaults(), **{f"output_{n}": tmp_path / f"{n}.out" for n in ("train", "test", "solution", "gene_knowledge")}}
    result = run_component(config, args, work_dir=tmp_path / "work")
    assert not result.succeeded
    assert "--shared_data (the shared data folder) is required" in result.log.read_text()


def run_metric(name: str, prediction, tmp_path) -> ad.AnnData:
    config = read_config(TASK / f"metrics/{name}/config.vsh.yaml")
    args = {"input_solution": DATASET / "solution.h5ad", "input_prediction": prediction, "output": tmp_path / "score.h5ad"}
    result = run_component(config, args, work_dir=tmp_path / "work")
    assert result.succeeded, result.reason + "\n" + result.log.read_text()[-2000:]
    return ad.read_h5ad(tmp_path / "score.h5ad")


def test_an_undefined_pearson_delta_stays_undefined_and_subsets_split_singles_from_combinations(tmp_path):
    solution = ad.read_h5ad(DATASET / "solution.h5ad")
    prediction = np.tile(solution.var["control_mean"].to_numpy(), (solution.n_obs, 1))
    prediction[0] += np.linspace(0, 1, solution.n_vars)  # one perturbation with a non-constant change
    path = tmp_path / "prediction.h5ad"
    ad.AnnData(obs=solution.obs[[]], var=solution.var[[]], layers={"prediction": prediction},
               uns={"dataset_id": "synthetic_simulation", "method_id": "x"}).write_h5ad(path)
    score = run_metric("pearson_delta", path, tmp_path / "p")
    single = (solution.obs["n_targets"] == 1).to_numpy()
    values = dict(zip(score.uns["metric_ids"], score.uns["metric_values"]))
    undefined = dict(zip(score.uns["metric_ids"], score.uns["n_undefined"]))
    assert np.isnan(score.obs["pearson_delta"].to_numpy()[1:]).all() and np.isfinite(score.obs["pearson_delta"].iloc[0])
    assert values["pearson_delta"] == score.obs["pearson_delta"].iloc[0]  # the mean of the one defined value
    assert undefined["pearson_delta"] == solution.n_obs - 1
    assert undefined["pearson_delta_top1000_single"] + undefined["pearson_delta_top1000_combo"] == solution.n_obs - 1
    assert score.obs["pearson_delta_top1000_single"][~single].isna().all()
    assert score.obs["pearson_delta_top1000_combo"][single].isna().all()
    l2 = run_metric("l2", path, tmp_path / "l")
    np.testing.assert_array_equal(l2.obs["l2_top1000_single"].notna().to_numpy(), single)
    np.testing.assert_allclose(l2.obs["l2_top1000"], l2.obs["l2_top1000_single"].fillna(l2.obs["l2_top1000_combo"]))


@pytest.mark.parametrize("name", ["ceiling", "random_training_perturbation", "mean_best_scale", "sign_only", "de_count_prior"])
def test_reference_controls_declare_their_role_and_predict_every_test_row(name, tmp_path):
    config = read_config(TASK / f"control_methods/{name}/config.vsh.yaml")
    expected_role = {"ceiling": "ceiling", "random_training_perturbation": "negative"}.get(name, "adversarial")
    assert config.control == expected_role
    declared = {a.name.lstrip("-") for a in config.file_inputs}
    # An adversarial answer is one a contestant could submit: it is never handed the solution.
    assert ("input_solution" in declared) == (expected_role != "adversarial")
    args = {"input_train": DATASET / "train.h5ad", "input_test": DATASET / "test.h5ad", "output": tmp_path / "prediction.h5ad",
            **({"input_solution": DATASET / "solution.h5ad"} if "input_solution" in declared else {})}
    result = run_component(config, args, work_dir=tmp_path / "work")
    assert result.succeeded, result.reason + "\n" + result.log.read_text()[-2000:]
    out = ad.read_h5ad(tmp_path / "prediction.h5ad")
    solution = ad.read_h5ad(DATASET / "solution.h5ad")
    assert list(out.obs_names) == list(solution.obs_names)
    if name == "ceiling":  # the half of the cells, not the answer itself
        np.testing.assert_array_equal(out.layers["prediction"], solution.layers["expression_half"])
        assert not np.allclose(out.layers["prediction"], solution.layers["expression"])
    if name == "mean_best_scale":  # the scale is the leave-one-out factor of the training data alone
        train = ad.read_h5ad(DATASET / "train.h5ad")
        _, factor = control_predictions.loo_scaled_mean(prediction_files.training_profiles(train),
                                                        train.var["control_mean"].to_numpy(), 1)
        assert out.uns["scale"] == pytest.approx(factor, rel=1e-12) and 0 < factor < 1


def test_perturbation_specific_correlation_leaves_the_mean_undefined_and_scores_the_truth_1(tmp_path):
    solution = ad.read_h5ad(DATASET / "solution.h5ad")
    mean = run_method("mean", tmp_path / "m")
    score = run_metric("pearson_specific", tmp_path / "m" / "prediction.h5ad", tmp_path / "s")
    undefined = dict(zip(score.uns["metric_ids"], score.uns["n_undefined"]))
    single = (solution.obs["n_targets"] == 1).to_numpy()
    # The mean baseline is the reference itself: no perturbation-specific correlation, every item counted.
    assert score.obs.isna().all().all()
    assert undefined == {"pearson_specific_top1000_single": int(single.sum()), "pearson_specific_top1000_combo": int((~single).sum()),
                         "pearson_specific_top1000": solution.n_obs, "pearson_specific": solution.n_obs}
    # Pearson delta of the same prediction is defined and high: it sees the change all perturbations share.
    delta = run_metric("pearson_delta", tmp_path / "m" / "prediction.h5ad", tmp_path / "d")
    assert delta.obs["pearson_delta_top1000"].mean() > 0.3
    truth = tmp_path / "truth.h5ad"
    ad.AnnData(obs=solution.obs[[]], var=solution.var[[]], layers={"prediction": solution.layers["expression"]},
               uns={"dataset_id": "synthetic_simulation", "method_id": "truth"}).write_h5ad(truth)
    perfect = run_metric("pearson_specific", truth, tmp_path / "t")
    np.testing.assert_allclose(perfect.uns["metric_values"], 1.0)
    np.testing.assert_array_equal(perfect.obs["pearson_specific_top1000_single"].notna().to_numpy(), single)
    assert mean.n_obs == solution.n_obs


def test_perturbation_specific_correlation_needs_the_training_mean(tmp_path):
    solution = ad.read_h5ad(DATASET / "solution.h5ad")
    del solution.var["training_mean"]
    old = tmp_path / "solution.h5ad"
    solution.write_h5ad(old)
    config = read_config(TASK / "metrics/pearson_specific/config.vsh.yaml")
    args = {"input_solution": old, "input_prediction": DATASET / "prediction.h5ad", "output": tmp_path / "score.h5ad"}
    result = run_component(config, args, work_dir=tmp_path / "work")
    # A solution written before the reference existed fails with one message naming the column.
    assert not result.succeeded
    assert "var['training_mean']" in result.log.read_text()
