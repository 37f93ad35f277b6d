"""Tests of the benchmark plan: what a run without a language model leaves out, and what it says of it."""

from __future__ import annotations

from pathlib import Path

from openpert.config.task import Task
from openpert.engines.plan import make_plan

REPO = Path(__file__).resolve().parents[3]


def test_a_skipped_metric_component_lists_the_metrics_it_would_compute(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENPERT_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("OPENPERT_LLM_MODEL", raising=False)
    task = Task(REPO / "src" / "biome_bench")
    datasets = task.find_datasets(REPO / "resources_test" / "biome_bench")
    assert datasets, "resources_test/biome_bench holds no dataset"
    plan = make_plan(task, datasets, tmp_path)
    skipped = {s["id"]: s for s in plan["skipped"]}
    judge = skipped["mechanism_judge"]
    assert judge["type"] == "metric" and "OPENPERT_LLM_BASE_URL" in judge["reason"]
    config = next(c for c in task.of_type("metric") if c.name == "mechanism_judge")
    assert judge["metrics"] == [{"id": m["name"], "label": m.get("label") or m["name"]} for m in config.metrics]
    assert {"phenotype_coverage", "kg_coverage"} <= {m["id"] for m in judge["metrics"]}
    # A skipped method computes no metric, and says so by leaving the key out.
    assert all("metrics" not in s for s in plan["skipped"] if s["type"] != "metric")


def test_the_folds_of_a_source_are_cut_from_one_build_job(tmp_path):
    from openpert.engines.plan import Output, dataset_jobs, label_resources

    task = Task(REPO / "src" / "pertreasonqa")
    jobs = dataset_jobs(task, tmp_path, label_resources(REPO))
    builds = [j for j in jobs if j.stage == "build"]
    assert [j.job_id for j in builds] == ["builds/op3_chemical", "builds/perturbqa_genetic"]
    assert builds[0].publish_dir == tmp_path / "builds" / "op3_chemical" and builds[0].after is None
    folds = [j for j in jobs if j.stage == "dataset"]
    assert len(folds) == 8 and jobs.index(builds[-1]) < jobs.index(folds[0])
    chemical = next(j for j in folds if j.job_id == "datasets/chemical_ood_cell_id_pert")
    assert chemical.after == "builds/op3_chemical"
    assert {k: v for k, v in chemical.inputs.items() if isinstance(v, Output)} == {
        "input_items": Output("builds/op3_chemical", "output_items"),
        "input_network": Output("builds/op3_chemical", "output_network"),
        "input_cells": Output("builds/op3_chemical", "output_cells")}
    # the entry's build names the build, it is no argument of the split
    assert chemical.params == {"fold": "ood_cell_id_pert", "dataset_id": "chemical_ood_cell_id_pert"}
    assert {j.after for j in folds if j.dataset_id.startswith("genetic_")} == {"builds/perturbqa_genetic"}


def test_a_dataset_naming_an_unknown_build_is_an_error(tmp_path):
    import pytest

    from openpert.config.viash import ConfigError
    from openpert.engines.plan import dataset_jobs, label_resources

    task = Task(REPO / "src" / "pertreasonqa")
    split = task.component("fold_split")
    split.info["datasets"] = [{"id": "chemical_x", "build": "nowhere", "fold": "all"}]
    with pytest.raises(ConfigError, match="build 'nowhere' is no info.builds id of the task; known: op3_chemical, perturbqa_genetic"):
        dataset_jobs(task, tmp_path, label_resources(REPO))
