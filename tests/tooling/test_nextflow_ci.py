"""Tests for tests/tooling/nextflow_ci.py: the pull-request checks of real Nextflow runs, on trace fixtures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from nextflow_plans import component_entry, job_entry
from project_paths import ROOT
from tooling.nextflow_ci import (
    affected_jobs,
    failed_task_logs,
    images_to_build,
    main,
    plan_jobs,
    rerun_problems,
    resume_problems,
    score_problems,
    tasks_to_run,
    trace_outcomes,
)

from openpert.engines.nextflow import TRACE_FILE_NAME
from openpert.engines.nextflow_trace import parse_trace

#: The fields nextflow.config asks Nextflow to write, in its order.
FIELDS = ["task_id", "hash", "native_id", "name", "tag", "status", "exit", "attempt", "submit", "duration",
          "realtime", "%cpu", "peak_rss", "peak_vmem", "workdir"]  # fmt: skip


def write_trace(path: Path, rows: list[tuple], workdir: Path | None = None) -> Path:
    """A trace in Nextflow's format: one ``(tag, status[, exit[, attempt]])`` per row."""
    lines = ["\t".join(FIELDS)]
    for i, (tag, status, *rest) in enumerate(rows, start=1):
        exit_code = rest[0] if rest else ("0" if status in ("COMPLETED", "CACHED") else "1")
        attempt = rest[1] if len(rest) > 1 else "1"
        work = str((workdir or path.parent / "work") / f"{i:02d}")
        lines.append("\t".join([str(i), f"ab/{i:06x}", str(100 + i), f"run_method ({tag})", tag, status, exit_code,
                                attempt, "2026-11-28 03:00:00.000", "2.1s", "1.5s", "98.0%", "120 MB", "300 MB", work]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _plan(tmp_path: Path, seeds: tuple[int, ...] = ()) -> dict:
    """A plan of three methods and two metrics on a ready-made dataset and on one a loader makes."""
    outdir = tmp_path / "results"
    loader = component_entry("loader", "dataset", [], "data.h5ad")
    methods = [component_entry(m, "control_method" if m == "mlp" else "method", [], "prediction.h5ad")
               for m in ("mlp", "hog", "crash")]
    metrics = [component_entry(m, "metric", [], "score.h5ad") for m in ("auroc", "mae")]
    jobs = [job_entry("datasets/made", "dataset", loader, dataset_id="made", method_id=None, after=None,
                      publish_dir=outdir / "datasets" / "made", limits={})]
    for dataset, after in (("k562", None), ("made", "datasets/made")):
        for method in methods:
            for seed in (seeds if method["id"] == "mlp" and seeds else (None,)):
                name = method["id"] if seed is None else f"{method['id']}@seed{seed}"
                folder = outdir / "outputs" / dataset / name
                jobs.append(job_entry(f"{dataset}/{name}", "method", method, dataset_id=dataset, method_id=method["id"],
                                      after=after, publish_dir=folder, limits={}, seed=seed))
                jobs += [job_entry(f"{dataset}/{name}/{m['id']}", "metric", m, dataset_id=dataset, method_id=method["id"],
                                   after=f"{dataset}/{name}", publish_dir=folder / m["id"], limits={}, seed=seed)
                         for m in metrics]
    return {"outdir": str(outdir), "jobs": jobs}


FIRST_RUN = [("datasets/made", "COMPLETED")] + [
    (f"{d}/{m}{suffix}", status)
    for d in ("k562", "made")
    for m, status in (("mlp", "COMPLETED"), ("hog", "COMPLETED"), ("crash", "FAILED"))
    for suffix in ["", "/auroc", "/mae"]
    if not (m == "crash" and suffix)  # a failed method has no metric jobs
]


def _resumed(first: list[tuple], ran: set[str]) -> list[tuple]:
    """The rows of a resumed run: ``ran`` ran again (as before), every other succeeded job CACHED."""
    return [(tag, status if tag in ran or status not in ("COMPLETED", "CACHED") else "CACHED") for tag, status in first]


# --------------------------------------------------------------------------------------------------
# what the job runs


def test_tasks_are_the_touched_ones_and_the_fixed_ones():
    changed = ["src/perturbqa/methods/ora", "src/perturbqa/metrics/auroc", "", "src/pertreasonqa/methods/x\n"]
    assert tasks_to_run(changed, ["perturbation_effect"]) == ["pertreasonqa", "perturbation_effect", "perturbqa"]
    assert tasks_to_run([], ["perturbation_effect"]) == ["perturbation_effect"]
    with pytest.raises(ValueError, match="not a component folder below src/<task>/: 'common/pertsci'"):
        tasks_to_run(["common/pertsci"], [])


def test_images_are_those_of_the_tasks_and_the_bases_they_build_on():
    def entry(image, kind, source, builds_on):
        return {"image": image, "dockerfile": f"/d/{image}/Dockerfile", "context": "/repo", "kind": kind,
                "source": source, "builds_on": builds_on}

    order = [
        entry("core", "base", "/repo/docker/core/Dockerfile", "python:3.11"),
        entry("ml", "base", "/repo/docker/ml/Dockerfile", "core"),
        entry("text", "base", "/repo/docker/text/Dockerfile", "ml"),
        entry("a/mean", "component", "/repo/src/a/methods/mean/config.vsh.yaml", "core"),
        entry("b/llm", "component", "/repo/src/b/methods/llm/config.vsh.yaml", "text"),
        entry("c/gnn", "component", "/repo/src/c/methods/gnn/config.vsh.yaml", "ml"),
    ]
    assert [e["image"] for e in images_to_build(order, ["a"])] == ["core", "a/mean"]
    # a base two levels up is built too, and before what builds on it
    assert [e["image"] for e in images_to_build(order, ["b"])] == ["core", "ml", "text", "b/llm"]
    assert [e["image"] for e in images_to_build(order, ["a", "c"])] == ["core", "ml", "a/mean", "c/gnn"]
    assert images_to_build(order, ["unknown"]) == []
    # a checkout below a folder named src: the task is read from the config's place in the project
    nested = [dict(e, source=e["source"].replace("/repo/", "/home/src/repo/"), context="/home/src/repo") for e in order]
    assert [e["image"] for e in images_to_build(nested, ["a"])] == ["core", "a/mean"]
    assert images_to_build(nested, ["repo"]) == []


# --------------------------------------------------------------------------------------------------
# what the trace must show


def test_outcome_of_a_retried_job_is_its_success_or_its_last_attempt():
    rows = [
        {"tag": "d/m", "status": "FAILED"}, {"tag": "d/m", "status": "COMPLETED"}, {"tag": "d/m", "status": "FAILED"},
        {"tag": "d/x", "status": "FAILED"}, {"tag": "d/x", "status": "ABORTED"}, {"tag": None, "status": "COMPLETED"},
    ]
    assert trace_outcomes(rows) == {"d/m": "COMPLETED", "d/x": "ABORTED"}


def test_a_resumed_run_that_reused_everything_passes(tmp_path):
    before = parse_trace(write_trace(tmp_path / "1.tsv", FIRST_RUN))
    # the failed method runs again (Nextflow never caches a failure), everything else is reused
    after = parse_trace(write_trace(tmp_path / "2.tsv", _resumed(FIRST_RUN, set())))
    assert [r["status"] for r in after if r["tag"] == "k562/crash"] == ["FAILED"]
    assert resume_problems(before, after) == []


def test_a_resumed_run_that_ran_a_task_again_fails(tmp_path):
    before = parse_trace(write_trace(tmp_path / "1.tsv", FIRST_RUN))
    after = parse_trace(write_trace(tmp_path / "2.tsv", _resumed(FIRST_RUN, {"k562/hog/auroc"})))
    assert resume_problems(before, after) == [
        "k562/hog/auroc: COMPLETED on -resume, expected CACHED (it succeeded before)"]
    fewer = parse_trace(write_trace(tmp_path / "3.tsv", _resumed(FIRST_RUN, set())[1:] + [("k562/new", "CACHED")]))
    assert resume_problems(before, fewer) == ["datasets/made: in the first run only", "k562/new: in the resumed run only"]
    assert resume_problems([], after) == ["the first run's trace has no task"]


def test_plan_jobs_know_what_each_job_runs_on(tmp_path):
    plan = _plan(tmp_path)
    jobs = plan_jobs(plan)
    loader, mlp, auroc = (Path(f"/repo/src/t/{kind}/{name}") for kind, name in
                          (("datasets", "loader"), ("control_methods", "mlp"), ("metrics", "auroc")))
    assert jobs["datasets/made"] == {loader}
    assert jobs["k562/mlp"] == {mlp} and jobs["made/mlp"] == {loader, mlp}
    assert jobs["made/mlp/auroc"] == {loader, mlp, auroc}
    assert len(jobs) == 1 + 2 * 3 * 3  # the loader; 2 datasets x 3 methods x (method + 2 metrics)
    seeded = plan_jobs(_plan(tmp_path, seeds=(0, 1)))  # the plan's job ids, as they are
    assert {"k562/mlp@seed0", "k562/mlp@seed1/mae"} <= set(seeded) and "k562/mlp" not in seeded
    assert seeded["made/mlp@seed1/mae"] == {loader, mlp, Path("/repo/src/t/metrics/mae")}


def test_affected_jobs_follow_the_edited_component_downstream(tmp_path):
    plan = _plan(tmp_path)
    assert affected_jobs(plan, "/repo/src/t/metrics/mae") == {f"{d}/{m}/mae" for d in ("k562", "made")
                                                               for m in ("mlp", "hog", "crash")}
    assert affected_jobs(plan, "/repo/src/t/methods/hog") == {f"{d}/hog{s}" for d in ("k562", "made")
                                                              for s in ("", "/auroc", "/mae")}
    assert affected_jobs(plan, "/repo/src/t/datasets/loader") == {j for j in plan_jobs(plan) if j.startswith(("made/", "datasets/"))}
    with pytest.raises(ValueError, match="no job of the plan runs the component in /repo/src/t/methods/none"):
        affected_jobs(plan, "/repo/src/t/methods/none")


def test_an_edit_that_reran_exactly_its_jobs_passes(tmp_path):
    plan = _plan(tmp_path)
    before = parse_trace(write_trace(tmp_path / "1.tsv", FIRST_RUN))
    hog = affected_jobs(plan, "/repo/src/t/methods/hog")
    after = parse_trace(write_trace(tmp_path / "2.tsv", _resumed(FIRST_RUN, hog)))
    assert rerun_problems(plan, before, after, "/repo/src/t/methods/hog") == []


def test_an_edit_that_reran_too_little_or_too_much_fails(tmp_path):
    plan = _plan(tmp_path)
    before = parse_trace(write_trace(tmp_path / "1.tsv", FIRST_RUN))
    hog = affected_jobs(plan, "/repo/src/t/methods/hog")
    # the metrics on the new prediction were taken from the cache: the prediction's path did not count
    too_little = parse_trace(write_trace(tmp_path / "2.tsv", _resumed(FIRST_RUN, {"k562/hog", "made/hog"})))
    problems = rerun_problems(plan, before, too_little, "/repo/src/t/methods/hog")
    assert problems == [f"{d}/hog/{m}: of the edited component, but CACHED (its code digest did not reach the task hash)"
                        for d in ("k562", "made") for m in ("auroc", "mae")]
    # everything ran again: the edit changed the hash of every task (e.g. a shared folder's mtime)
    too_much = parse_trace(write_trace(tmp_path / "3.tsv", FIRST_RUN))
    problems = rerun_problems(plan, before, too_much, "/repo/src/t/methods/hog")
    assert len(problems) == len([j for j, s in FIRST_RUN if s == "COMPLETED" and j not in hog])
    assert "k562/mlp: not of the edited component, but COMPLETED on -resume, expected CACHED" in problems
    # nothing of the component ran at all: the check proves nothing and says so
    only_mlp = [(j, s) for j, s in FIRST_RUN if "hog" not in j]
    assert rerun_problems(plan, parse_trace(write_trace(tmp_path / "4.tsv", only_mlp)),
                          parse_trace(write_trace(tmp_path / "5.tsv", _resumed(only_mlp, set()))),
                          "/repo/src/t/methods/hog") == ["no job of /repo/src/t/methods/hog ran in the first run"]
    missing = [row for row in _resumed(FIRST_RUN, hog) if row[0] != "made/hog/mae"]
    assert rerun_problems(plan, before, parse_trace(write_trace(tmp_path / "6.tsv", missing)), "/repo/src/t/methods/hog") == [
        "made/hog/mae: of the edited component, but absent from the resumed run"]


# --------------------------------------------------------------------------------------------------
# the job summary


def _task_dir(root: Path, index: int, log: str | None, err: str | None) -> None:
    folder = root / "work" / f"{index:02d}"
    folder.mkdir(parents=True, exist_ok=True)
    if log is not None:
        (folder / ".command.log").write_text(log)
    if err is not None:
        (folder / ".command.err").write_text(err)


def test_failed_task_logs_show_each_failed_task_and_its_logs(tmp_path):
    results = tmp_path / "results" / "task_a"
    write_trace(results / TRACE_FILE_NAME, [("d/ok", "COMPLETED"), ("d/bad", "FAILED", "1"),
                                            ("d/retried", "FAILED", "137", "1"), ("d/retried", "COMPLETED", "0", "2")])
    _task_dir(results, 2, "Traceback (most recent call last):\nValueError: fails on purpose\n", "```fence``` inside\n")
    _task_dir(results, 3, "killed\n", "")
    text = failed_task_logs([tmp_path / "results"])
    assert text.startswith("### Failed Nextflow tasks\n")
    assert "#### `d/bad` (FAILED, exit 1, attempt 1)" in text
    assert "ValueError: fails on purpose" in text
    assert "d/ok" not in text and "d/retried" not in text  # it succeeded on its second attempt
    # the err log's backticks cannot close the fence that holds it
    assert "````\n```fence``` inside\n````" in text


def test_failed_task_logs_are_bounded(tmp_path):
    results = tmp_path / "results"
    write_trace(results / TRACE_FILE_NAME, [(f"d/m{i}", "FAILED") for i in range(1, 6)])
    for i in range(1, 6):
        _task_dir(results, i, "start of the log\n" + "x" * 10_000 + "\nlast line\n", None)
    text = failed_task_logs([results], tail_bytes=500, max_bytes=3000)
    assert "start of the log" not in text and "last line" in text
    assert "first 9528 bytes left out" in text  # 10028 bytes, the last 500 kept
    assert "(.command.err is missing)" in text
    assert len(text.encode()) < 3000 + 200
    shown = text.count("#### ")
    assert 0 < shown < 5 and f"{5 - shown} more failed task(s) left out" in text


def test_failed_task_logs_say_when_nothing_failed_and_name_a_bad_trace(tmp_path):
    assert failed_task_logs([tmp_path]) == "### Failed Nextflow tasks\n\nNo task failed.\n"
    bad = tmp_path / "x" / TRACE_FILE_NAME
    bad.parent.mkdir()
    bad.write_text("task_id\ttag\n1\n2\ta\tb\n")
    assert f"#### {bad}\n\nunreadable trace: {bad}, line 2: 1 fields, the header has 2" in failed_task_logs([tmp_path])


# --------------------------------------------------------------------------------------------------
# command line


def test_command_line_checks_exit_1_on_a_problem(tmp_path, capsys):
    plan = _plan(tmp_path)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    before = write_trace(tmp_path / "1.tsv", FIRST_RUN)
    reused = write_trace(tmp_path / "2.tsv", _resumed(FIRST_RUN, set()))
    hog = write_trace(tmp_path / "3.tsv", _resumed(FIRST_RUN, affected_jobs(plan, "/repo/src/t/methods/hog")))
    assert main(["resumed", str(before), str(reused)]) == 0
    assert main(["resumed", str(before), str(hog)]) == 1
    assert "k562/hog: COMPLETED on -resume, expected CACHED" in capsys.readouterr().err
    rerun = ["rerun", "--plan", str(tmp_path / "plan.json"), "--component", "/repo/src/t/methods/hog", str(before)]
    assert main([*rerun, str(hog)]) == 0
    assert main([*rerun, str(reused)]) == 1
    (tmp_path / "changed.txt").write_text("src/b/methods/x\n")
    capsys.readouterr()
    assert main(["tasks", "--changed", str(tmp_path / "changed.txt"), "--always", "a"]) == 0
    assert capsys.readouterr().out == "a\nb\n"


def test_scores_must_match_row_for_row(tmp_path, capsys):
    same = {"figures": {"rows": 12, "changed_rows": 0, "unmatched_rows": 0},
            "per_task": {"a": {"rows": 12, "changed": 0, "only_before": 0, "only_after": 0}}}
    assert score_problems(same) == []
    drift = {"figures": {"rows": 12, "changed_rows": 1, "unmatched_rows": 2},
             "per_task": {"a": {"rows": 12, "changed": 1, "only_before": 2, "only_after": 0}}}
    assert score_problems(drift) == ["a: 1 of 12 score rows changed",
                                     "a: 2 score rows in the first run only, 0 in the second only (a job failed in one of them)"]
    assert score_problems({"figures": {"rows": 0}, "per_task": {}}) == ["the two runs share no score row"]
    (tmp_path / "same.json").write_text(json.dumps(same))
    (tmp_path / "drift.json").write_text(json.dumps(drift))
    assert main(["scores", str(tmp_path / "same.json")]) == 0
    assert "all 12 score rows are the same" in capsys.readouterr().out
    assert main(["scores", str(tmp_path / "drift.json")]) == 1


def test_scores_read_what_compare_results_writes(tmp_path):
    """The figures come from benchmarks/compare_results.py itself, run on two results folders."""
    def results(folder: Path, raw: float) -> Path:
        path = folder / "t" / "results.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"scores": [{"dataset_id": "d", "method_id": "m", "metric_id": "x", "raw": raw},
                                               {"dataset_id": "d", "method_id": "n", "metric_id": "x", "raw": None}]}))
        return folder

    before, after, changed = results(tmp_path / "a", 0.5), results(tmp_path / "b", 0.5), results(tmp_path / "c", 0.5000001)

    def compare(other: Path) -> dict:
        out = tmp_path / f"{other.name}.json"
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compare_results.py"), str(before), str(other), "--json", str(out)],
                       check=True, capture_output=True)
        return json.loads(out.read_text())

    assert score_problems(compare(after)) == []
    assert score_problems(compare(changed)) == ["t: 1 of 2 score rows changed"]
