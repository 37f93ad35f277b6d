"""Tests of openpert.engines.dry_run: LLM components counted, not run, on the fixture task."""

from __future__ import annotations

import json
import math
import os

import anndata as ad
import pytest

from openpert.config.viash import ConfigError
from openpert.engines.dry_run import (
    DRY_RUN_DIR,
    PLAN_MARK,
    dry_run_benchmark,
    dry_run_environment,
    format_plan_table,
    llm_component_names,
    read_plan_lines,
    summarise_plans,
)
from pertsci import llm_plan
from pertsci.llm_plan import plan_line

PROMPT = "user\nGive one number for {rows} rows.\n"


def test_llm_components_are_found_by_their_argument(tiny_task):
    methods, metrics = llm_component_names(tiny_task)
    assert methods == ["llm_constant"] and metrics == []


def test_dry_run_counts_the_prompt_and_sends_nothing(tiny_task, tiny_project, tmp_path, monkeypatch):
    # A configured server must not be asked: port 9 (discard) would make a real request fail.
    monkeypatch.setenv("OPENPERT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("OPENPERT_LLM_BACKEND", raising=False)
    monkeypatch.delenv("OPENPERT_LLM_TOKENIZER", raising=False)
    out = tmp_path / "tiny"
    plan = dry_run_benchmark(tiny_task, out, input_dir=tiny_project / "resources_test" / "tiny", progress=False,
                             sandbox=False)
    assert json.loads((out / "llm_plan.json").read_text()) == plan
    assert (out / DRY_RUN_DIR / "results.json").is_file() and not (out / "results.json").exists()
    (row,) = plan["rows"]
    rows = int(ad.read_h5ad(tiny_project / "resources_test" / "tiny" / "syn" / "test.h5ad").n_obs)
    assert (row["component"], row["dataset_id"], row["method_id"], row["jobs"]) == ("llm_constant", "syn", None, 1)
    assert (row["requests"], row["samples"], row["max_completion_tokens"]) == (1, 1, 1024)
    assert row["prompt_tokens"] == math.ceil(len(PROMPT.format(rows=rows)) / 4)
    assert "characters / 4" in plan["token_count"]
    # The method cannot read a number in the placeholder: it fails after its one call, and says so.
    assert row["status"] == ["failed"] and plan["failures"][0]["job_id"] == "syn/llm_constant"
    assert "+ a job stopped before its last call" in format_plan_table(plan["rows"])
    # The environment is the caller's again.
    assert os.environ["OPENPERT_LLM_BASE_URL"] == "http://127.0.0.1:9/v1" and "OPENPERT_LLM_BACKEND" not in os.environ


def test_a_task_without_llm_components_is_refused(tiny_task, tmp_path, monkeypatch):
    monkeypatch.setattr("openpert.engines.dry_run.llm_component_names", lambda task: ([], []))
    with pytest.raises(ConfigError, match="no component takes --llm_base_url"):
        dry_run_benchmark(tiny_task, tmp_path)


def test_the_harness_reads_the_lines_the_science_library_writes():
    record = {"requests": 2, "samples": 6}
    assert PLAN_MARK == llm_plan.PLAN_MARK
    assert read_plan_lines(["other output", plan_line(record), "more"]) == [record]
    with pytest.raises(ValueError, match="job.log:1: a dry-run plan line that is not JSON"):
        read_plan_lines([PLAN_MARK + "{oops"], where="job.log")
    with pytest.raises(ValueError, match="must hold a JSON object"):
        read_plan_lines([PLAN_MARK + json.dumps([1])])


def test_environment_with_a_bad_tokenizer_fails_before_any_job(tmp_path):
    with pytest.raises(FileNotFoundError, match="no tokenizer file"), dry_run_environment(tmp_path / "none.json"):
        pass


def test_plans_sum_over_calls_and_seeds_per_judged_method(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    call = {"requests": 3, "repeated": 1, "samples": 9, "prompt_tokens": 300, "max_completion_tokens": 900,
            "shared_prefix_tokens_caller_order": 10, "shared_prefix_tokens_prefix_order": 40, "token_count": "x"}
    longer = {**call, "max_prompt_tokens": 250}
    for job in ("d/m@seed1", "d/m@seed2", "d/a/judge", "d/b/judge"):
        (logs / f"{job}.log").parent.mkdir(parents=True, exist_ok=True)
        (logs / f"{job}.log").write_text(f"noise\n{plan_line({**call, 'max_prompt_tokens': 120})}\n{plan_line(longer)}\n")
    results = {"resources": [
        {"job_id": "d/m@seed1", "stage": "method", "component": "m", "dataset_id": "d", "method_id": "m", "status": "succeeded"},
        {"job_id": "d/m@seed2", "stage": "method", "component": "m", "dataset_id": "d", "method_id": "m", "status": "succeeded"},
        {"job_id": "d/a/judge", "stage": "metric", "component": "judge", "dataset_id": "d", "method_id": "a", "status": "succeeded"},
        {"job_id": "d/b/judge", "stage": "metric", "component": "judge", "dataset_id": "d", "method_id": "b", "status": "failed"},
    ]}
    rows = summarise_plans(results, tmp_path)
    assert [(r["component"], r["method_id"], r["jobs"]) for r in rows] == [("judge", "a", 1), ("judge", "b", 1), ("m", None, 2)]
    method = rows[2]
    assert (method["requests"], method["samples"], method["prompt_tokens"]) == (12, 36, 1200)
    assert (method["shared_prefix_tokens_caller_order"], method["shared_prefix_tokens_prefix_order"]) == (40, 160)
    # The longest prompt is the longest of any call, not a sum.
    assert [r["max_prompt_tokens"] for r in rows] == [250, 250, 250]
    table = format_plan_table(rows)
    assert "longest prompt" in table.splitlines()[0]
    assert "1,200" in table and table.count("+") == 5  # the failed judge's four summed counts, and the note


def test_the_command_takes_the_sandbox_from_the_environment(tiny_project, tmp_path, capsys, monkeypatch):
    from openpert.cli import main

    # Without --sandbox the setting comes from $OPENPERT_SANDBOX, as for a benchmark.
    monkeypatch.chdir(tiny_project)
    monkeypatch.setenv("OPENPERT_SANDBOX", "off")
    monkeypatch.delenv("OPENPERT_LLM_TOKENIZER", raising=False)
    seen = {}

    def fake_dry_run(task, out, **kwargs):
        seen.update(kwargs)
        return {"token_count": "characters / 4", "rows": [], "failures": []}

    monkeypatch.setattr("openpert.engines.dry_run.dry_run_benchmark", fake_dry_run)
    assert main(["benchmark", "--task", "tiny", "--dry-run", "--input", "resources_test/tiny",
                 "-o", str(tmp_path / "out")]) == 0
    assert seen["sandbox"] is False
    monkeypatch.setenv("OPENPERT_SANDBOX", "bogus")
    assert main(["benchmark", "--task", "tiny", "--dry-run", "-o", str(tmp_path / "out")]) != 0
    assert "$OPENPERT_SANDBOX is 'bogus'" in capsys.readouterr().err


def test_gpu_hours_count_the_uncached_prefill_and_the_generated_tokens():
    from openpert.engines.dry_run import Throughput, gpu_hours

    row = {"prompt_tokens": 9_000_000, "shared_prefix_tokens_prefix_order": 1_800_000, "samples": 3_000,
           "max_completion_tokens": 3_000 * 1024}
    # 7.2 M uncached prompt tokens at 2,000/s, and 3.07 M generated tokens at 1,024/s: 1 + 5/6 hours.
    assert gpu_hours(row, Throughput(2_000, 1_024)) == pytest.approx((3_600 + 3_000) / 3_600)
    # With a measured mean completion of 100 tokens a sample instead of the max_tokens bound.
    assert gpu_hours(row, Throughput(2_000, 1_000, completion_tokens=100)) == pytest.approx((3_600 + 300) / 3_600)
    with pytest.raises(ConfigError, match="must be positive"):
        Throughput(0, 10)
    table = format_plan_table([{"component": "c", "dataset_id": "d", "method_id": None, "jobs": 1, "requests": 3_000,
                                "samples": 3_000, "prompt_tokens": 9_000_000, "max_prompt_tokens": 4_000,
                                "shared_prefix_tokens_caller_order": 0,
                                "shared_prefix_tokens_prefix_order": 1_800_000, "max_completion_tokens": 3_072_000,
                                "status": ["succeeded"], "gpu_hours": 1.8333}])
    assert table.splitlines()[0].endswith("GPU-hours") and table.splitlines()[1].endswith("1.8")


def test_the_command_passes_the_throughput_and_refuses_it_without_a_dry_run(tiny_project, tmp_path, capsys,
                                                                           monkeypatch):
    from openpert.cli import main
    from openpert.engines.dry_run import Throughput

    monkeypatch.chdir(tiny_project)
    seen = {}

    def fake_dry_run(task, out, **kwargs):
        seen.update(kwargs)
        return {"token_count": "characters / 4", "rows": [], "failures": []}

    monkeypatch.setattr("openpert.engines.dry_run.dry_run_benchmark", fake_dry_run)
    base = ["benchmark", "--task", "tiny", "--input", "resources_test/tiny", "-o", str(tmp_path / "out")]
    assert main([*base, "--dry-run", "--throughput", "5000", "800", "--completion-tokens", "64"]) == 0
    assert seen["throughput"] == Throughput(5000.0, 800.0, 64.0)
    assert main([*base, "--throughput", "5000", "800"]) != 0
    assert "--throughput only count a --dry-run" in capsys.readouterr().err
    assert main([*base, "--dry-run", "--completion-tokens", "64"]) != 0
    assert "add it" in capsys.readouterr().err
