"""Components on the test datasets their component test does not use (it runs on the first, k562)."""

from __future__ import annotations

import functools
from pathlib import Path

import anndata as ad
import numpy as np
import pytest

from openpert.config.viash import find_project_root, read_config
from openpert.run.component import run_component

ROOT = find_project_root(Path(__file__).resolve())
RESOURCES = ROOT / "resources_test" / "perturbqa"


def run_method(name: str, dataset: str, tmp_path: Path, kind: str = "methods", **params) -> ad.AnnData:
    d = RESOURCES / dataset
    args = {"input_train": d / "train.h5ad", "input_test": d / "test.h5ad", "input_kg_edges": d / "kg_edges.parquet",
            "input_gene_descriptions": d / "gene_descriptions.parquet", "output": tmp_path / f"{name}.h5ad", **params}
    if kind == "control_methods":
        args["input_solution"] = d / "solution.h5ad"
    config = read_config(ROOT / "src" / "perturbqa" / kind / name / "config.vsh.yaml")
    result = run_component(config, args, work_dir=tmp_path / f"work_{name}", context={"file_test": d / "test.h5ad"})
    assert result.succeeded, result.log.read_text()[-2000:]
    return ad.read_h5ad(tmp_path / f"{name}.h5ad")


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory):
    """:func:`run_method` for predictions no test changes: each component runs once per dataset and parameters."""

    @functools.cache
    def run(name: str, dataset: str, kind: str = "methods", **params) -> ad.AnnData:
        return run_method(name, dataset, tmp_path_factory.mktemp(name), kind=kind, **params)

    return run


def test_physical_answers_de_only(tmp_path):
    pred = run_method("physical", "k562_dir", tmp_path)
    assert np.isnan(pred.obs["score"]).all()  # direction of change is not addressed (as in the paper)
    pred = run_method("physical", "k562_set_de", tmp_path / "set")
    scores = pred.obs["score"].to_numpy()
    assert np.isfinite(scores).all() and ((scores >= 0) & (scores <= 1)).all()


@pytest.mark.parametrize("dataset", ["k562_dir", "k562_set_de", "perturbseq_de"])
def test_retrieval_on_other_datasets(shared_run, dataset):
    pred = shared_run("retrieval", dataset, n_runs=1)
    scores = pred.obs["score"].to_numpy()
    assert np.isfinite(scores).all() and ((scores >= 0) & (scores <= 1)).all()
    assert (pred.obs["text"] == "").all()


def test_controls_on_clusters(shared_run):
    truth = shared_run("ground_truth", "k562", kind="control_methods")
    rand = shared_run("random_scores", "k562", kind="control_methods")
    solution = ad.read_h5ad(RESOURCES / "k562" / "solution.h5ad").obs
    clusters = solution.index[solution["subtask"].str.startswith("gse")]
    assert (truth.obs.loc[clusters, "text"] == solution.loc[clusters, "annotation"]).all()
    # The negative control describes every cluster with another cluster's annotation.
    assert (rand.obs.loc[clusters, "text"] != "").all()
    for subtask in ("gse_gene", "gse_pert"):
        rows = solution.index[solution["subtask"] == subtask]
        assert sorted(rand.obs.loc[rows, "text"]) == sorted(solution.loc[rows, "annotation"])
        assert (rand.obs.loc[rows, "text"] != solution.loc[rows, "annotation"]).sum() >= len(rows) - 1


def test_controls_score_the_decoy_pairs(shared_run):
    test = ad.read_h5ad(RESOURCES / "k562" / "test.h5ad")
    solution = ad.read_h5ad(RESOURCES / "k562" / "solution.h5ad").obs
    pairs = test.obs.index[test.obs["subtask"] == "de"]
    decoys = pairs.difference(solution.index)
    assert len(decoys) == test.uns["n_decoy_items"] > 0
    truth = shared_run("ground_truth", "k562", kind="control_methods")
    labelled = pairs.intersection(solution.index)
    assert (truth.obs.loc[labelled, "score"] == solution.loc[labelled, "label"]).all()
    assert (truth.obs.loc[decoys, "score"] == 0).all()
    rand = shared_run("random_scores", "k562", kind="control_methods")
    assert np.isfinite(rand.obs.loc[pairs, "score"]).all()


def test_ora_describes_clusters_only(tmp_path):
    pred = run_method("ora", "k562", tmp_path, top_k=3)
    test = ad.read_h5ad(RESOURCES / "k562" / "test.h5ad").obs
    clusters = test["subtask"].str.startswith("gse").to_numpy()
    assert np.isnan(pred.obs["score"]).all()
    texts = pred.obs["text"].astype(str)
    assert (texts[~clusters] == "").all() and (texts[clusters] != "").sum() >= 2
    assert all(len(t.split("; ")) <= 3 for t in texts[clusters] if t)


def test_retrieval_dir_rule(tmp_path, shared_run):
    paper = run_method("retrieval", "k562_dir", tmp_path / "paper", n_runs=1, dir_rule="paper")
    assert (paper.obs["score"] == 0.5).all()  # the paper's row: one tied score, AUROC 0.5
    mean = shared_run("retrieval", "k562_dir", n_runs=1)  # the default rule
    assert mean.obs["score"].nunique() > 1


def test_adversarial_controls(tmp_path):
    test = ad.read_h5ad(RESOURCES / "k562" / "test.h5ad").obs
    pairs = test["subtask"] == "de"
    prevalence = run_method("gene_prevalence", "k562", tmp_path, kind="control_methods")
    # Constant within a downstream gene: it knows nothing of the perturbation.
    assert (prevalence.obs.loc[pairs, "score"].groupby(test.loc[pairs, "gene"].astype(str)).nunique() == 1).all()
    share = run_method("perturbation_prevalence", "k562", tmp_path, kind="control_methods")
    # The test file crosses every test perturbation with the same genes: the count carries nothing ...
    assert (share.obs.loc[pairs, "score"] == 1.0).all()
    composition = run_method("item_composition", "k562", tmp_path, kind="control_methods")
    # ... nor which genes a perturbation's items name: one value for every pair.
    scores = composition.obs.loc[pairs, "score"]
    assert np.isfinite(scores).all() and scores.nunique() == 1
    assert np.isnan(composition.obs.loc[~pairs, "score"]).all()
    assert np.isnan(share.obs.loc[~pairs, "score"]).all()
    members = run_method("member_list", "k562", tmp_path, kind="control_methods")
    clusters = ~pairs
    assert (members.obs.loc[clusters, "text"] == test.loc[clusters, "members"].str.replace(";", " ")).all()
    assert np.isnan(members.obs["score"]).all()


def test_random_scores_differ_by_seed(tmp_path, shared_run):
    first = shared_run("random_scores", "k562", kind="control_methods")  # the default seed, 0
    second = run_method("random_scores", "k562", tmp_path / "b", kind="control_methods", seed=1)
    pairs = ad.read_h5ad(RESOURCES / "k562" / "test.h5ad").obs["subtask"] == "de"
    assert not np.allclose(first.obs.loc[pairs, "score"], second.obs.loc[pairs, "score"])
    config = read_config(ROOT / "src" / "perturbqa" / "control_methods" / "random_scores" / "config.vsh.yaml")
    assert config.info["seeds"] == 5


def test_perturbseq_names_ensembl_var_names_through_hgnc(tmp_path):
    raw = RESOURCES / "raw"
    screen = ad.read_h5ad(raw / "synthetic_perturbseq.h5ad")
    assert screen.var_names.str.startswith("ENSG").all()
    outputs = {f"output_{k}": tmp_path / f"{k}.{'parquet' if k in ('kg_edges', 'gene_descriptions') else 'h5ad'}"
               for k in ("train", "test", "solution", "kg_edges", "gene_descriptions")}
    config = read_config(ROOT / "src" / "perturbqa" / "datasets" / "perturbseq" / "config.vsh.yaml")
    # The screen's own map names the genes HGNC has renamed since (NCL, now NUCLEOLIN; WDR61, now SKIC8).
    args = {"input": raw / "synthetic_perturbseq.h5ad", "kg_dir": raw / "knowledge_graphs", "gene_symbol_column": "",
            "ensembl_map": raw / "perturbqa" / "k562_gw_mapping_full.json",
            "n_negative_perturbations": 3, "n_negatives": 30, "dataset_id": "ensembl_named", **outputs}
    result = run_component(config, args, work_dir=tmp_path / "work")
    assert result.succeeded, result.log.read_text()[-2000:]
    genes = set(ad.read_h5ad(outputs["output_train"]).obs["gene"])
    assert len(genes) > 10 and genes <= set(screen.var["gene_name"])  # symbols, as the screen names them
