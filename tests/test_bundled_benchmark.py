"""The benchmark of every task on its bundled resources: its scores must mean what they say.

CI runs README's first command (``scripts/run_benchmark.sh``) and hands its ``results/`` folder to
the suite as ``$OPENPERT_REPORT_RESULTS``; elsewhere these tests skip with that reason.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from project_paths import ROOT

from openpert.config.task import discover_tasks
from openpert.config.viash import read_config
from openpert.run.sandbox import needs_llm

pytestmark = pytest.mark.skipif(not os.environ.get("OPENPERT_REPORT_RESULTS"),
                                reason="set OPENPERT_REPORT_RESULTS to the results/ of scripts/run_benchmark.sh")

TASKS = sorted(t.name for t in discover_tasks(ROOT))
#: The tasks whose methods or metrics ask a language model (the papers': PerturbQA, PertReasonQA, BIOME-Bench).
LANGUAGE_MODEL_TASKS = {"perturbqa", "pertreasonqa", "biome_bench"}


def _results(task: str) -> dict:
    path = Path(os.environ["OPENPERT_REPORT_RESULTS"]) / task / "results.json"
    assert path.is_file(), f"{path}: the bundled run wrote no results for {task}"
    return json.loads(path.read_text())


@pytest.mark.parametrize("task", TASKS)
def test_no_headline_metric_is_gameable(task):
    results = _results(task)
    assert results["headline_metrics"], f"{task} declares no headline metric"
    # Every task ships adversarial controls, so the gameability table has rows to judge by.
    assert results["gameability"], f"{task}: no adversarial control scored"
    flagged = sorted((r["dataset_id"], r["metric_id"]) for r in results["gameability"] if r["headline"] and r["gameable"])
    detail = {(r["dataset_id"], r["metric_id"]): (r["adversarial_method_id"], r["gameability"], r["method_median"])
              for r in results["gameability"]}
    assert flagged == [], "\n".join(f"{task} {d}/{m}: {detail[d, m][0]} scores {detail[d, m][1]:.3f} scaled, "
                                    f"above the median method ({detail[d, m][2]:.3f})" for d, m in flagged)


@pytest.mark.parametrize("task", TASKS)
def test_no_job_failed(task):
    # The bundled resources are small and every component's test passes on them: a failure here is a bug.
    failures = [f"{f['job_id']}: {f['reason'][:200]}" for f in _results(task)["failures"]]
    assert failures == [], f"{task}:\n" + "\n".join(failures)


@pytest.mark.parametrize("task", TASKS)
def test_every_language_model_component_answered_by_the_model_ran(task):
    # scripts/run_benchmark_with_llm.sh: a real model answers every language-model method and judge.
    results = _results(task)
    needs_model = sorted(s["id"] for s in results["skipped"] if "language model" in str(s.get("reason")))
    llm = (results.get("provenance") or {}).get("llm")
    if llm is None:
        if os.environ.get("OPENPERT_REQUIRE_REAL_LLM") and needs_model:
            pytest.fail(f"{task}: the bundled run had no model, so {', '.join(needs_model)} did not run "
                        "(run scripts/run_benchmark_with_llm.sh)")
        pytest.skip(f"{task}: the bundled run had no language model")
    assert needs_model == [], f"{task}: skipped with a model configured: {needs_model}"
    usage = {row["component"] for row in results["llm_usage"]}
    task_dir = ROOT / "src" / task
    expected = {p.parent.name for p in task_dir.glob("*/*/config.vsh.yaml") if needs_llm(read_config(p))}
    assert bool(expected) == (task in LANGUAGE_MODEL_TASKS), f"{task}: language-model components {sorted(expected)}"
    assert expected <= usage, f"{task}: no language-model use recorded for {sorted(expected - usage)}"
    assert all(row["requests"] > 0 or row["cache_hits"] > 0 for row in results["llm_usage"]), results["llm_usage"]
    if os.environ.get("OPENPERT_REQUIRE_REAL_LLM"):
        # The model itself answered (run_benchmark_with_llm.sh starts with an empty generation cache),
        # not a cache an earlier run left on this machine.
        asked = {row["component"] for row in results["llm_usage"] if row["requests"] > 0}
        assert expected <= asked, f"{task}: answered only from the cache: {sorted(expected - asked)}"
