"""The local engine end to end on the fixture task: scores, failure isolation, caching and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from conftest import FAILING, GOOD  # noqa: E402

from openpert.config.task import Task
from openpert.config.viash import ConfigError
from openpert.engines.local import run_benchmark
from openpert.engines.plan import make_plan


def raw_scores(results: dict) -> dict:
    return {(s["dataset_id"], s["method_id"], s["metric_id"]): s["raw"] for s in results["scores"]}


@pytest.fixture(scope="module")
def runs(fixture_runs):
    return fixture_runs


def test_failures_are_isolated_and_recorded(runs):
    clean, mixed, out, _ = runs
    failures = {f["method_id"]: f for f in mixed["failures"]}
    assert set(failures) == set(FAILING)
    assert failures["fail_raise"]["exit_code"] == 1 and "RuntimeError: this method fails on purpose" in failures["fail_raise"]["reason"]
    assert failures["fail_timeout"]["exit_code"] == 143 and "time limit" in failures["fail_timeout"]["reason"]
    assert failures["fail_memory"]["exit_code"] == 137 and "memory limit" in failures["fail_memory"]["reason"]
    assert failures["fail_invalid"]["exit_code"] == -1 and "non-finite" in failures["fail_invalid"]["reason"]
    assert "may not read" in failures["reads_solution"]["reason"]
    for fail in failures.values():
        assert (out / fail["log"]).is_file()
    # every other job's scores are exactly what they are without the failing methods
    assert raw_scores(mixed) == raw_scores(clean)
    scores = {(d["method_id"]): d for d in mixed["dataset_scores"]}
    for method in FAILING:
        assert scores[method]["status"] == "failed" and scores[method]["score"] == 0.0
    assert not any(s["method_id"] in FAILING for s in mixed["scores"])


def test_scaling_matches_hand_computation(runs):
    clean, _, _, _ = runs
    raw = raw_scores(clean)
    scaled = {(s["dataset_id"], s["method_id"], s["metric_id"]): s["scaled"] for s in clean["scores"]}
    for metric in ("rmse", "mae", "pearson"):
        hi, lo = raw[("syn", "truth", metric)], raw[("syn", "zeros", metric)]
        for method in ["truth", "zeros", "train_mean", *GOOD]:
            assert scaled[("syn", method, metric)] == pytest.approx((raw[("syn", method, metric)] - lo) / (hi - lo))
        assert scaled[("syn", "truth", metric)] == pytest.approx(1.0)
        assert scaled[("syn", "zeros", metric)] == pytest.approx(0.0)
    assert raw[("syn", "truth", "rmse")] == 0.0  # the positive control is exact
    # the dataset score is the mean of scaled values clipped to [0, 1]
    for row in clean["dataset_scores"]:
        values = [min(1.0, max(0.0, scaled[("syn", row["method_id"], m)])) for m in ("rmse", "mae", "pearson")]
        assert row["score"] == pytest.approx(sum(values) / 3)
    overall = {o["method_id"]: o for o in clean["overall"]}
    assert overall["truth"]["score"] == pytest.approx(1.0) and overall["zeros"]["score"] == pytest.approx(0.0)
    # ranks order methods only; controls are references
    assert overall["truth"]["rank"] is None
    ranks = sorted((o["rank"], o["method_id"]) for o in clean["overall"] if o["rank"] is not None)
    assert [m for _, m in ranks] == sorted(GOOD, key=lambda m: -overall[m]["score"]) and ranks[0][0] == 1


def test_results_files(runs):
    _, mixed, out, _ = runs
    for name in ("score_uns.yaml", "method_configs.yaml", "metric_configs.yaml", "dataset_uns.yaml", "task_info.yaml",
                 "trace.tsv", "results.json", "plan.json"):
        assert (out / name).is_file(), name
    trace = pd.read_csv(out / "trace.tsv", sep="\t")
    assert len(trace) == len(mixed["resources"])
    assert set(trace.loc[trace["status"] == "failed", "method_id"]) == set(FAILING)
    assert json.loads((out / "results.json").read_text())["task"]["name"] == "tiny"
    # per-item values give CIs, and methods are compared to the best one
    ci = [s for s in mixed["scores"] if s["method_id"] == "group_mean" and s["metric_id"] == "rmse"][0]
    assert ci["ci_low"] <= ci["raw"] <= ci["ci_high"] and ci["n_items"] == 12
    assert {c["metric_id"] for c in mixed["comparisons"]} == {"rmse", "mae", "pearson"}


def test_dataset_stage_and_filters(tiny_task, tmp_path):
    results = run_benchmark(tiny_task, tmp_path, methods=["group_mean"], controls=["truth", "zeros"], metrics=["errors"], progress=False)
    assert [d["dataset_id"] for d in results["datasets"]] == ["syn_a", "syn_b"]
    assert {r["method_id"] for r in results["dataset_scores"]} == {"group_mean", "truth", "zeros"}
    assert {m["id"] for m in results["metrics"]} == {"rmse", "mae"}
    assert (tmp_path / "datasets" / "syn_a" / "train.h5ad").is_file()
    with pytest.raises(ConfigError, match="unknown methods: nope"):
        make_plan(tiny_task, tiny_task.find_datasets(tmp_path / "datasets"), tmp_path, methods=["nope"])


def test_resume_after_kill_redoes_only_unfinished_jobs(project_copy, tmp_path):
    """Kill a running benchmark, resume it: finished jobs are reused, the rest run."""
    out = tmp_path / "results"
    # a slow method makes the kill land while jobs are still pending
    slow = project_copy / "src/tiny/methods/group_mean/script.py"
    slow.write_text(slow.read_text().replace("import anndata as ad\n", "import time\n\nimport anndata as ad\ntime.sleep(1.5)\n", 1))
    cmd = [sys.executable, "-m", "openpert.cli", "benchmark", "--task", "tiny", "--input", "resources_test/tiny", "-o", str(out),
           "--methods", "group_mean", "shrunk_mean", "-j", "1"]
    proc = subprocess.Popen(cmd, cwd=project_copy, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    work = out / "tiny" / "work"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(work.glob("*/*/record.json"))) < 3:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {json.loads(p.read_text())["job_id"] for p in work.glob("*/*/record.json")}
    assert len(finished) >= 3
    results = run_benchmark(Task(project_copy / "src" / "tiny"), out / "tiny", input_dir=project_copy / "resources_test" / "tiny",
                            methods=["group_mean", "shrunk_mean"], resume=True, progress=False)
    assert not results["failures"]
    cached = {r["job_id"] for r in results["resources"] if r["cached"]}
    assert cached == finished, "exactly the jobs finished before the kill are reused"
    assert len(results["resources"]) == 15 and len(cached) < 15
    # a second resume reuses everything and gives the same scores
    again = run_benchmark(Task(project_copy / "src" / "tiny"), out / "tiny", input_dir=project_copy / "resources_test" / "tiny",
                          methods=["group_mean", "shrunk_mean"], resume=True, progress=False)
    assert all(r["cached"] for r in again["resources"])
    assert raw_scores(again) == raw_scores(results)


def test_regression_against_item_covariates(runs):
    """task_info's regressions: per-item metric values against a per-item covariate, with CIs."""
    import anndata as ad

    from openpert.results.collect import BOOTSTRAP_SEED, N_BOOT
    from openpert.results.resampling import regression_with_ci

    clean, _, _, clean_out = runs
    table = clean["statistics"]["regressions"]["table"]
    assert {r["method_id"] for r in table} == {"group_mean", "shrunk_mean", "train_mean"}
    row = next(r for r in table if r["method_id"] == "group_mean")
    assert row["metric_id"] == "rmse" and row["covariate"] == "truth_spread" and row["n_items"] == 12
    obs = ad.read_h5ad(clean_out / "outputs" / "syn" / "group_mean" / "errors" / "score.h5ad").obs
    fit = regression_with_ci(obs["truth_spread"].to_numpy(), obs["rmse"].to_numpy(), n_boot=N_BOOT, seed=BOOTSTRAP_SEED)
    assert row["slope"] == pytest.approx(fit.slope.estimate) and row["slope_low"] == pytest.approx(fit.slope.low)
    assert row["correlation_high"] == pytest.approx(fit.correlation.high)
    assert row["slope_low"] <= row["slope"] <= row["slope_high"]


def test_llm_components_are_skipped_without_a_model(tiny_task, tiny_project, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENPERT_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("OPENPERT_LLM_MODEL", raising=False)
    datasets = tiny_task.find_datasets(tiny_project / "resources_test" / "tiny")
    plan = make_plan(tiny_task, datasets, tmp_path, methods=["group_mean", "llm_constant"])
    assert [m["id"] for m in plan["methods"] if m["type"] == "method"] == ["group_mean"]
    assert plan["skipped"][0]["id"] == "llm_constant" and "OPENPERT_LLM_BASE_URL" in plan["skipped"][0]["reason"]
    monkeypatch.setenv("OPENPERT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    plan = make_plan(tiny_task, datasets, tmp_path, methods=["group_mean", "llm_constant"])
    assert "llm_constant" in [m["id"] for m in plan["methods"]] and plan["skipped"] == []


def test_task_analysis_is_merged_and_its_failure_is_a_flag(runs, project_copy):
    from openpert.results.collect import run_task_analysis

    clean, mixed, _, _ = runs
    counts = {r["dataset_id"]: r["n_predictions"] for r in clean["statistics"]["prediction_counts"]["table"]}
    assert counts == {"syn": 5}  # 3 controls + 2 methods
    (project_copy / "src/tiny/analysis.py").write_text("def task_statistics(outdir):\n    raise ValueError('no such column')\n")
    extra = run_task_analysis(Task(project_copy / "src" / "tiny"), project_copy)
    assert extra["qc"][0]["flag"] == "analysis_failed" and "ValueError: no such column" in extra["qc"][0]["message"]


def test_progress_is_one_line_per_job_start_and_end_when_not_a_terminal(tiny_task, tmp_path, capsys):
    inputs = tiny_task.root / "resources_test" / "tiny"
    run_benchmark(tiny_task, tmp_path / "out", input_dir=inputs, methods=["group_mean", "fail_raise"], metrics=["errors"])
    lines = capsys.readouterr().err.splitlines()
    assert "start    syn/group_mean" in lines
    ended = {line.split()[1]: line.split()[2] for line in lines if line.startswith("end ")}
    assert ended["syn/group_mean"] == "succeeded" and ended["syn/fail_raise"] == "failed"
    assert ended["syn/group_mean/errors"] == "succeeded"
    run_benchmark(tiny_task, tmp_path / "out", input_dir=inputs, methods=["group_mean"], metrics=["errors"], resume=True, progress=False)
    assert capsys.readouterr().err == ""
