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
