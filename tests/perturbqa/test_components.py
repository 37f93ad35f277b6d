"""Components on the test datasets their component test does not use (it runs on the first, k562)."""

from __future__ import annotations

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


def test_physical_answers_de_only(tmp_path):
    pred = run_method("physical", "k562_dir", tmp_path)
    assert np.isnan(pred.obs["score"]).all()  # direction of change is not addressed (as in the paper)
    pred = run_method("physical", "k562_set_de", tmp_path / "set")
    scores = pred.obs["score"].to_numpy()
    assert np.isfinite(scores).all() and ((scores >= 0) & (scores <= 1)).all()


@pytest.mark.parametrize("dataset", ["k562_dir", "k562_set_de", "perturbseq_de"])
def test_retrieval_on_other_datasets(tmp_path, dataset):
    pred = run_method("retrieval", dataset, tmp_path, n_runs=1)
    scores = pred.obs["score"].to_numpy()
    assert np.isfinite(scores).all() and ((scores >= 0) & (scores <= 1)).all()
    assert (pred.obs["text"] == "").all()


def test_controls_on_clusters(tmp_path):
    truth = run_method("ground_truth", "k562", tmp_path, kind="control_methods")
    rand = run_method("random_scores", "k562", tmp_path, kind="control_methods")
    solution = ad.read_h5ad(RESOURCES / "k562" / "solution.h5ad").obs
    clusters = solution["subtask"].str.startswith("gse")
    assert (truth.obs.loc[clusters, "text"] == solution.loc[clusters, "annotation"]).all()
    # The negative control describes every cluster with another cluster's annotation.
    assert (rand.obs.loc[clusters, "text"] != "").all()
    for subtask in ("gse_gene", "gse_pert"):
        rows = solution["subtask"] == subtask
        assert sorted(rand.obs.loc[rows, "text"]) == sorted(solution.loc[rows, "annotation"])
        assert (rand.obs.loc[rows, "text"] != solution.loc[rows, "annotation"]).sum() >= rows.sum() - 1


def test_ora_describes_clusters_only(tmp_path):
    pred = run_method("ora", "k562", tmp_path, top_k=3)
    test = ad.read_h5ad(RESOURCES / "k562" / "test.h5ad").obs
    clusters = test["subtask"].str.startswith("gse").to_numpy()
    assert np.isnan(pred.obs["score"]).all()
    texts = pred.obs["text"].astype(str)
    assert (texts[~clusters] == "").all() and (texts[clusters] != "").sum() >= 2
    assert all(len(t.split("; ")) <= 3 for t in texts[clusters] if t)
