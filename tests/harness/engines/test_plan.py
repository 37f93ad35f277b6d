"""Tests of the benchmark plan: what a run without a language model leaves out, where one with a model runs its components."""

from __future__ import annotations

from pathlib import Path

import pytest

from openpert.config.task import Task
from openpert.config.viash import ConfigError
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


def _two_biome_datasets(tmp_path: Path) -> tuple[Task, list]:
    """biome_bench with its bundled dataset twice: as ``mmu_subset`` and as ``mmu_llm``."""
    task = Task(REPO / "src" / "biome_bench")
    bundled = REPO / "resources_test" / "biome_bench" / "mmu_subset"
    folder = tmp_path / "datasets"
    for name in ("mmu_subset", "mmu_llm"):
        (folder / name).mkdir(parents=True)
        for file in bundled.glob("*.h5ad"):
            (folder / name / file.name).symlink_to(file)
    return task, task.find_datasets(folder)


def test_llm_datasets_keep_the_language_model_components_to_the_datasets_they_name(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENPERT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENPERT_LLM_MODEL", "smollm2-135m")
    monkeypatch.setenv("OPENPERT_LLM_MAX_TOKENS", "32")
    task, datasets = _two_biome_datasets(tmp_path)
    plan = make_plan(task, datasets, tmp_path / "out", llm_datasets=["*llm*"])
    assert plan["llm"] == {"model": "smollm2-135m", "model_sha256": None, "max_tokens": 32, "datasets": ["*llm*"]}
    ran = {(j["dataset_id"], j["component"]) for j in plan["jobs"] if j["stage"] == "method"}
    scored = {(j["dataset_id"], j["component"]) for j in plan["jobs"] if j["stage"] == "metric"}
    llm_methods = {e["id"] for e in plan["methods"] if e["needs_llm"]}
    assert llm_methods >= {"llm_zero_shot", "llm_few_shot"}
    for method in llm_methods:
        assert ("mmu_llm", method) in ran and ("mmu_subset", method) not in ran
    assert ("mmu_subset", "mechanism_judge") not in scored and ("mmu_llm", "mechanism_judge") in scored
    # The components that need no model run on both.
    assert {("mmu_subset", "training_majority"), ("mmu_llm", "training_majority")} <= ran
    assert ("mmu_subset", "relation_accuracy") in scored
    # Without the option, they run everywhere.
    everywhere = make_plan(task, datasets, tmp_path / "out2")
    assert everywhere["llm"]["datasets"] is None
    assert ("mmu_subset", "llm_zero_shot") in {(j["dataset_id"], j["component"])
                                                for j in everywhere["jobs"] if j["stage"] == "method"}


def test_llm_datasets_matching_nothing_or_without_a_model_are_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENPERT_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("OPENPERT_LLM_MODEL", raising=False)
    monkeypatch.delenv("OPENPERT_LLM_BACKEND", raising=False)
    task, datasets = _two_biome_datasets(tmp_path)
    with pytest.raises(ConfigError, match="no model is configured"):
        make_plan(task, datasets, tmp_path / "out", llm_datasets=["*llm*"])
    monkeypatch.setenv("OPENPERT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match="no dataset matches --llm-datasets k562_"):
        make_plan(task, datasets, tmp_path / "out", llm_datasets=["k562_*"])
    monkeypatch.setenv("OPENPERT_LLM_MAX_TOKENS", "lots")
    with pytest.raises(ConfigError, match="OPENPERT_LLM_MAX_TOKENS"):
        make_plan(task, datasets, tmp_path / "out")
