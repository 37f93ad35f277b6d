"""`openpert benchmark --engine nextflow` end to end, with a stand-in for the nextflow executable.

Nextflow cannot be installed here; tests/harness/engines/test_nextflow.py checks main.nf's command lines, trace
parsing and collection piece by piece, and runs the real pipeline where nextflow is on PATH. This
test drives the whole Python side through `run_benchmark(engine="nextflow")` and checks that it
publishes the same scores as the local engine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nextflow_plans import example_jobs
from project_paths import FIXTURES, ROOT

from openpert.config.task import Task
from openpert.engines.benchmark import run_benchmark

FAKE = FIXTURES / "fake_nextflow"


def test_nextflow_engine_matches_local_engine_and_retries_a_job_killed_for_memory_bigger_then_ignores_it(
        project_copy, tmp_path, monkeypatch):
    """One run of each engine: the scores and failures agree, and Nextflow retried the job killed for memory.

    (Both halves need the controls and the metric run in Nextflow; one run serves them.)
    """
    monkeypatch.setenv("PATH", os.pathsep.join([str(FAKE), str(Path(sys.executable).parent), os.environ["PATH"]]))
    # the project's pipeline is the repository's generic main.nf and its config
    for name in ("main.nf", "nextflow.config"):
        shutil.copy(ROOT / name, project_copy / name)
    task = Task(project_copy / "src" / "tiny")
    inputs = project_copy / "resources_test" / "tiny"
    # The positive and the negative control, which scaling needs; the baseline would add jobs, not ways to differ.
    kwargs = dict(input_dir=inputs, methods=["group_mean", "fail_raise", "fail_memory"], controls=["truth", "zeros"],
                  metrics=["errors"], progress=False)
    via_nf = run_benchmark(task, tmp_path / "nf", engine="nextflow", **kwargs)
    local = run_benchmark(task, tmp_path / "local", **kwargs)
    assert (tmp_path / "nf" / "logs" / "nextflow.log").is_file()

    def key(r):
        return {(s["dataset_id"], s["method_id"], s["metric_id"]): s["raw"] for s in r["scores"]}

    assert key(via_nf) == key(local) and len(key(local)) == 6  # (2 controls + group_mean) x (rmse, mae)
    assert [(f["job_id"], f["exit_code"]) for f in via_nf["failures"]] == [("syn/fail_memory", 137), ("syn/fail_raise", 1)]
    assert [f["job_id"] for f in local["failures"]] == ["syn/fail_memory", "syn/fail_raise"]
    assert via_nf["engine"] == "nextflow"
    assert {r["job_id"] for r in via_nf["resources"]} == {r["job_id"] for r in local["resources"]}

    # The job killed for memory was retried bigger, then ignored; the others were scored all the same.
    (failure,) = [f for f in via_nf["failures"] if f["job_id"] == "syn/fail_memory"]
    assert failure["exit_code"] == 137
    assert failure["reason"].startswith("memory limit exceeded") and "limit 900 MB) on attempt 3" in failure["reason"]
    trace = (tmp_path / "nf" / "nextflow_trace.tsv").read_text().splitlines()
    attempts = [line.split("\t")[4] for line in trace if "\tsyn/fail_memory\t" in line]
    assert attempts == ["1", "2", "3"]  # nextflow.config's max_retries = 2, then the job is ignored
    scripts = sorted((tmp_path / "nf" / "nextflow_work").glob("*/task*/.command.sh"))
    asked = [re.search(r"'--limit-memory-mb' '(\d+)'", s.read_text()).group(1) for s in scripts if "fail_memory" in s.read_text()]
    assert asked == ["300", "600", "900"]
    assert {s["method_id"] for s in via_nf["scores"]} == {"truth", "zeros", "group_mean"}


def _seeded_zeros(project: Path) -> None:
    """Make the fixture's zeros control a seeded one (two replicates, each given --seed)."""
    config = project / "src" / "tiny" / "control_methods" / "zeros" / "config.vsh.yaml"
    text = config.read_text().replace("  control: negative\n", "  control: negative\n  seeds: 2\n")
    text = text.replace("resources:\n", "arguments:\n  - name: --seed\n    type: integer\n    default: 0\n"
                        "    description: The replicate's seed.\nresources:\n", 1)
    config.write_text(text)


def test_whole_benchmark_in_nextflow_with_loaders_and_seeds(project_copy, tmp_path, monkeypatch):
    """Dataset loaders run as Nextflow tasks, a seeded control once per seed: as the local engine."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(FAKE), str(Path(sys.executable).parent), os.environ["PATH"]]))
    for name in ("main.nf", "nextflow.config"):
        shutil.copy(ROOT / name, project_copy / name)
    _seeded_zeros(project_copy)
    task = Task(project_copy / "src" / "tiny")
    # The seeded control alone, and no method: a method's job is staged as a control's (the test above runs
    # both), so the others would add jobs, not ways to differ.
    kwargs = dict(datasets=["syn_a"], methods=[], controls=["zeros"], metrics=["errors"], progress=False)
    via_nf = run_benchmark(task, tmp_path / "nf", engine="nextflow", **kwargs)
    local = run_benchmark(task, tmp_path / "local", **kwargs)

    jobs = {r["job_id"]: r for r in via_nf["resources"]}
    assert set(jobs) == {r["job_id"] for r in local["resources"]}
    assert jobs["datasets/syn_a"]["stage"] == "dataset" and jobs["datasets/syn_a"]["status"] == "succeeded"
    assert {"syn_a/zeros@seed0", "syn_a/zeros@seed1", "syn_a/zeros@seed1/errors"} <= set(jobs)
    assert (tmp_path / "nf" / "datasets" / "syn_a" / "train.h5ad").is_file()  # published by its task
    assert (tmp_path / "nf" / "outputs" / "syn_a" / "zeros@seed1" / "errors").is_dir()

    def key(r):
        return {(s["dataset_id"], s["method_id"], s["metric_id"]): s["raw"] for s in r["scores"]}

    assert key(via_nf) == key(local) and key(local)
    assert via_nf["failures"] == [] and local["failures"] == []
    # each task kept its temporary files in its own folder, and removed them when it succeeded
    work = tmp_path / "nf" / "nextflow_work"
    assert list(work.glob("*/task1/out")) and not list(work.glob("*/task1/tmp")) and not list(work.glob("*/task1/run"))


def test_benchmark_passes_nextflow_options_through(project_copy, tmp_path, monkeypatch):
    from openpert.cli import main
    from openpert.engines import nextflow

    seen: dict = {}

    class Launched(Exception):
        pass

    def launched(plan, plan_path, **kwargs):
        seen.update(kwargs, plan=plan)
        raise Launched

    monkeypatch.setattr(nextflow, "run_nextflow", launched)
    monkeypatch.chdir(project_copy)
    mine = project_copy / "aws.config"
    mine.write_text("params { aws_region = 'eu-west-1' }\n")
    with pytest.raises(Launched):
        main(["benchmark", "--task", "tiny", "--engine", "nextflow", "--profile", "awsbatch", "--work-dir", "s3://bucket/work",
              "-c", str(mine), "--nextflow-args=--aws_queue my-queue -with-report 'r 1.html'", "--methods", "group_mean",
              "--sandbox", "off", "-o", str(tmp_path / "results")])  # fmt: skip
    assert seen["profile"] == "awsbatch" and seen["work_dir"] == "s3://bucket/work"
    assert seen["user_configs"] == [str(mine)]
    assert seen["extra_args"] == ["--aws_queue", "my-queue", "-with-report", "r 1.html"]
    jobs = seen["plan"]["jobs"]
    # no --input: the dataset loaders are jobs of the Nextflow run, not of the launcher
    assert [j["id"] for j in jobs if j["stage"] == "dataset"] == ["datasets/syn_a", "datasets/syn_b"]
    assert not (tmp_path / "results" / "tiny" / "datasets").exists()
    assert all("'--sandbox' 'off'" in a["script"] for j in jobs for a in j["attempts"])
    assert all(j["container"] and j["digest"] and Path(j["bundle"]).is_dir() for j in jobs)


@pytest.mark.parametrize("profile", ["local", "docker"])
def test_the_stand_in_stops_at_a_task_bigger_than_the_machine_as_nextflow_does(tmp_path, profile):
    """Nextflow's local executor (under docker too) refuses such a task and stops the run: hence the caps."""
    plan = {"outdir": str(tmp_path / "results"), "jobs": example_jobs(tmp_path / "results")}
    for attempt in plan["jobs"][0]["attempts"]:
        attempt["memory"] = f"{10**9} MB"  # a petabyte
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    done = subprocess.run([str(FAKE / "nextflow"), "run", str(ROOT / "main.nf"), "-params-file", str(tmp_path / "plan.json"),
                           "-profile", profile, "-work-dir", str(tmp_path / "work"), "-ansi-log", "false"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 1
    assert "Process requirement exceeds available memory -- req: 1000000000;" in done.stderr
    assert (tmp_path / "results" / "nextflow_trace.tsv").read_text().count("\n") == 1  # the header: nothing ran
