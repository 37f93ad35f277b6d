"""A new screen is data plus a manifest: added from a folder, it runs end to end with no code change."""

from __future__ import annotations

from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import yaml

from openpert.config.viash import find_project_root, read_config
from openpert.run.component import run_component

ROOT = find_project_root(Path(__file__).resolve())
RAW = ROOT / "resources_test" / "perturbqa" / "raw"
TASK = ROOT / "src" / "perturbqa"
OUTPUTS = ("train", "test", "solution", "kg_edges", "gene_descriptions")


def run(path: Path, args: dict, work: Path) -> None:
    result = run_component(read_config(path), args, work_dir=work)
    assert result.succeeded, result.log.read_text()[-3000:]


def new_screen(folder: Path) -> Path:
    """A 'HepG2' screen: a sub-sample of the K562 test subset under new names, with its manifest."""
    folder.mkdir()
    de = pd.read_csv(RAW / "perturbqa" / "k562-de.csv")
    direction = pd.read_csv(RAW / "perturbqa" / "k562-dir.csv")
    keep = sorted(de["pert"].unique())[::2] + sorted(de.loc[de["split"] == "test", "pert"].unique())
    de[de["pert"].isin(keep)].to_csv(folder / "hepg2-de.csv", index=False)
    direction[direction["pert"].isin(keep)].to_csv(folder / "hepg2-dir.csv", index=False)
    manifest = {"label": "HepG2", "name": "HepG2 essential (test)", "cell_line": "HepG2",
                "cell_line_description": "HepG2 cells are a human liver cancer cell line.", "organism": "homo_sapiens",
                "downstream_type": "gene", "source": "Sub-sample of the K562 test files, renamed",
                "reference": ["10.48550/arXiv.2502.21290"], "url": "https://example.org/hepg2",
                "license": "Test data.", "files": {"de": "hepg2-de.csv", "dir": "hepg2-dir.csv"}}
    (folder / "hepg2.screen.yaml").write_text(yaml.safe_dump(manifest))
    return folder


@pytest.mark.slow
def test_a_new_screen_runs_end_to_end_from_its_folder(tmp_path):
    data = new_screen(tmp_path / "hepg2")
    out = {name: tmp_path / f"{name}.{'parquet' if name in ('kg_edges', 'gene_descriptions') else 'h5ad'}" for name in OUTPUTS}
    run(TASK / "datasets" / "perturbqa" / "config.vsh.yaml",
        {"data_dir": data, "kg_dir": RAW / "knowledge_graphs", "screen": "hepg2", "subtasks": "dir", "dataset_id": "hepg2_dir",
         **{f"output_{k}": v for k, v in out.items()}}, tmp_path / "work_dataset")
    train = ad.read_h5ad(out["train"])
    assert train.uns["cell_line"] == "HepG2" and train.uns["dataset_name"] == "HepG2 direction"
    assert train.uns["dataset_reference"] == "10.48550/arXiv.2502.21290" and train.uns["dataset_url"] == "https://example.org/hepg2"
    assert train.uns["cell_line_description"] == "HepG2 cells are a human liver cancer cell line."
    assert set(ad.read_h5ad(out["test"]).obs["subtask"]) == {"dir"}
    edges = pd.read_parquet(out["kg_edges"])
    assert (edges["database"] == "HuRI").sum() > 0  # named through HGNC: the screen has no gene map

    inputs = {"input_train": out["train"], "input_test": out["test"], "input_kg_edges": out["kg_edges"],
              "input_gene_descriptions": out["gene_descriptions"]}
    run(TASK / "methods" / "retrieval" / "config.vsh.yaml", {**inputs, "output": tmp_path / "prediction.h5ad", "n_runs": 1},
        tmp_path / "work_method")
    run(TASK / "metrics" / "auroc" / "config.vsh.yaml",
        {"input_solution": out["solution"], "input_prediction": tmp_path / "prediction.h5ad", "output": tmp_path / "score.h5ad"},
        tmp_path / "work_metric")
    score = ad.read_h5ad(tmp_path / "score.h5ad")
    values = dict(zip(score.uns["metric_ids"], score.uns["metric_values"]))
    assert score.uns["dataset_id"] == "hepg2_dir" and np.isfinite(values["macro_auroc"])


def test_a_subtask_the_new_screen_lacks_is_an_error_naming_its_manifest(tmp_path):
    data = new_screen(tmp_path / "hepg2")
    out = {name: tmp_path / f"{name}.{'parquet' if name in ('kg_edges', 'gene_descriptions') else 'h5ad'}" for name in OUTPUTS}
    config = read_config(TASK / "datasets" / "perturbqa" / "config.vsh.yaml")
    result = run_component(config, {"data_dir": data, "kg_dir": RAW / "knowledge_graphs", "screen": "hepg2",
                                    "subtasks": "gse_gene", "dataset_id": "x", **{f"output_{k}": v for k, v in out.items()}},
                           work_dir=tmp_path / "work")
    assert not result.succeeded
    assert "hepg2.screen.yaml: the screen declares no files.gse_gene" in result.log.read_text()
