"""Language-model use collected from the jobs' outputs, and the abstention QC flags."""

from __future__ import annotations

import anndata as ad
import pandas as pd
import pytest

from openpert.results.llm_accounting import ABSTENTION_THRESHOLD, abstention_flags, prompt_too_long_flags, usage_table
from openpert.run.records import JobRecord


def usage(**changes) -> dict:
    base = {"questions": 10, "samples": 30, "abstentions": 0, "fallbacks": 0, "prompts": 20, "generated": 20,
            "cache_hits": 0, "requests": 20, "retries": 0, "prompt_tokens": 5000, "completion_tokens": 300, "unmetered": 0,
            "failed": 0, "context_window": 0}
    return base | changes


def job(tmp_path, job_id: str, stage: str, uns: dict | None, *, status: str = "succeeded", method: str = "summer") -> JobRecord:
    path = tmp_path / f"{job_id.replace('/', '_')}.h5ad"
    ad.AnnData(obs=pd.DataFrame(index=["a"]), uns=uns or {}).write_h5ad(path)
    component = job_id.split("/")[-1].split("@")[0] if stage == "metric" else method
    return JobRecord(job_id=job_id, stage=stage, component=component, component_type=stage, dataset_id="k562",
                     method_id=method, status=status, exit_code=0 if status == "succeeded" else 1,
                     outputs={"output": str(path)})


def test_usage_is_summed_over_seeds_and_kept_apart_per_component(tmp_path):
    records = [
        job(tmp_path, "k562/summer@seed0", "method", {"llm_usage": usage(abstentions=3, fallbacks=1)}),
        job(tmp_path, "k562/summer@seed1", "method", {"llm_usage": usage(abstentions=6)}),
        job(tmp_path, "k562/summer/judge", "metric", {"llm_usage": usage(questions=5, samples=5, abstentions=1)}),
        job(tmp_path, "k562/summer/auroc", "metric", {"metric_ids": ["x"]}),  # no model: no row
        job(tmp_path, "k562/summer@seed2", "method", {"llm_usage": usage()}, status="failed"),  # failed: not counted
    ]
    rows, problems = usage_table(records)
    assert problems == []
    method, judge = sorted(rows, key=lambda r: r["stage"] != "method")
    assert (method["stage"], method["component"], method["n_jobs"]) == ("method", "summer", 2)
    assert (method["samples"], method["abstentions"], method["fallbacks"], method["prompt_tokens"]) == (60, 9, 1, 10000)
    assert method["abstention_rate"] == pytest.approx(9 / 60) and method["fallback_rate"] == pytest.approx(1 / 20)
    assert (judge["stage"], judge["component"], judge["abstention_rate"]) == ("metric", "judge", pytest.approx(0.2))


def test_a_malformed_record_is_a_qc_row_naming_the_file(tmp_path):
    records = [job(tmp_path, "k562/summer", "method", {"llm_usage": usage(fallbacks=50)})]
    rows, problems = usage_table(records)
    assert rows == []
    (flag,) = problems
    assert flag.flag == "llm_usage_unreadable" and "k562_summer.h5ad" in flag.message and "fallbacks (50) exceeds" in flag.message


def row(stage="method", **counts) -> dict:
    values = usage(**counts)
    return {"dataset_id": "k562_dir", "method_id": "summer", "component": "summer" if stage == "method" else "judge",
            "stage": stage, **values, "abstention_rate": values["abstentions"] / values["samples"],
            "fallback_rate": values["fallbacks"] / values["questions"]}


def test_flags_above_the_threshold_only_and_say_when_the_score_is_the_fallbacks():
    at = round(ABSTENTION_THRESHOLD * 30)
    assert abstention_flags([row(abstentions=at)]) == []
    (some,) = abstention_flags([row(abstentions=at + 1, fallbacks=2)])
    assert (some.flag, some.dataset_id, some.method_id) == ("llm_abstentions", "k562_dir", "summer")
    assert some.message.startswith("summer on k562_dir: 4 of 30 answers (13.3%) abstained or could not be parsed")
    assert "2 of 10 questions (20.0%) were scored by the task's fallback" in some.message
    assert "mostly" not in some.message
    (most,) = abstention_flags([row(abstentions=30, fallbacks=10)])
    assert "its score is mostly the fallback's" in most.message
    (judge,) = abstention_flags([row("metric", abstentions=20, fallbacks=20, questions=30)])
    assert judge.message.startswith("The judge judge on summer's outputs, dataset k562_dir: 20 of 30 answers")
    assert judge.flag == "llm_judge_abstentions" and judge.method_id == "summer"
    assert abstention_flags([{**row(), "samples": 0, "abstention_rate": None}]) == []


def test_prompts_longer_than_the_context_window_are_flagged_with_the_count_and_the_window(tmp_path):
    records = [
        job(tmp_path, "k562/summer@seed0", "method", {"llm_usage": usage(failed=2, context_window=4096)}),
        job(tmp_path, "k562/summer@seed1", "method", {"llm_usage": usage(failed=1, context_window=8192)}),
        job(tmp_path, "k562/summer/judge", "metric", {"llm_usage": usage(failed=3, context_window=4096)}),
        job(tmp_path, "k562/other", "method", {"llm_usage": usage()}, method="other"),
    ]
    rows, problems = usage_table(records)
    assert problems == []
    summed = {(r["method_id"], r["stage"]): r for r in rows}
    # Counted over seeds; the window is a size, not a count: the largest.
    assert (summed["summer", "method"]["failed"], summed["summer", "method"]["context_window"]) == (3, 8192)
    judge, method = prompt_too_long_flags(rows)  # rows in (dataset, method, component) order
    assert (method.flag, method.method_id, method.dataset_id) == ("llm_prompt_too_long", "summer", "k562")
    assert method.message == ("summer on k562: 3 of 40 prompts were longer than the model's context window of 8,192 "
                              "tokens and were answered as abstentions (the job's log names their items); those items "
                              "took the task's default")
    assert (judge.flag, judge.method_id) == ("llm_judge_prompt_too_long", "summer")
    assert judge.message.startswith("The judge judge on summer's outputs, dataset k562: 3 of 20 prompts were longer "
                                    "than the model's context window of 4,096 tokens")
    assert prompt_too_long_flags([{**summed["summer", "method"], "context_window": 0}])[0].message.startswith(
        "summer on k562: 3 of 40 prompts were longer than the model's context window and")


def test_a_judge_that_counted_text_addressed_to_it_flags_the_method(tmp_path):
    records = [
        job(tmp_path, "k562/injector/judge", "metric", {"n_instruction_like": 13}, method="injector"),
        job(tmp_path, "k562/honest/judge", "metric", {"n_instruction_like": 0}, method="honest"),
        job(tmp_path, "k562/other/judge", "metric", {"metric_ids": ["x"]}, method="other"),
        job(tmp_path, "k562/bomb/judge", "metric", {"n_instruction_like": [1, 2, 3]}, method="bomb"),  # not a count: ignored
    ]
    _, problems = usage_table(records)
    (flag,) = problems
    assert (flag.flag, flag.method_id, flag.dataset_id) == ("graded_text_instruction_like", "injector", "k562")
    assert "13 outputs of injector" in flag.message


def test_a_claim_that_differs_from_the_proxys_count_is_flagged(tmp_path):
    spoofer = job(tmp_path, "k562/summer", "method", {"llm_usage": usage(prompt_tokens=123_456_789)})
    spoofer.llm_usage_counted = {"requests": 20, "prompt_tokens": 5000, "completion_tokens": 300, "unmetered": 0}
    honest = job(tmp_path, "k562/nocot", "method", {"llm_usage": usage()}, method="nocot")
    honest.llm_usage_counted = {"requests": 20, "prompt_tokens": 5000, "completion_tokens": 300, "unmetered": 0}
    unproxied = job(tmp_path, "k562/other", "method", {"llm_usage": usage(prompt_tokens=1)}, method="other")
    rows, problems = usage_table([spoofer, honest, unproxied])
    (flag,) = problems
    assert (flag.flag, flag.method_id) == ("llm_usage_mismatch", "summer")
    assert "prompt_tokens 123,456,789 claimed, 5,000 counted" in flag.message and "requests" not in flag.message
    # the table shows what the harness counted where it counted, the claim elsewhere
    assert {r["method_id"]: r["prompt_tokens"] for r in rows} == {"summer": 5000, "nocot": 5000, "other": 1}
