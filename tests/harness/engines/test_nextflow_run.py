"""`openpert benchmark --engine nextflow` end to end, with a stand-in for the nextflow executable.

Nextflow cannot be installed here; tests/harness/engines/test_nextflow.py checks main.nf's command lines, trace
parsing and collection piece by piece, and runs the real pipeline where nextflow is on PATH. This
test drives the whole Python side through `run_benchmark(engine="nextflow")` and checks that it
publishes the same scores as the local engine.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from project_paths import FIXTURES, ROOT

from openpert.config.task import Task
from openpert.engines.local import run_benchmark

FAKE = FIXTURES / "fake_nextflow"


def test_nextflow_engine_matches_local_engine(project_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", os.pathsep.join([str(FAKE), str(Path(sys.executable).parent), os.environ["PATH"]]))
    # the project's pipeline is the repository's generic main.nf and its config
    for name in ("main.nf", "nextflow.config"):
        shutil.copy(ROOT / name, project_copy / name)
    task = Task(project_copy / "src" / "tiny")
    inputs = project_copy / "resources_test" / "tiny"
    methods = ["group_mean", "fail_raise"]
    via_nf = run_benchmark(task, tmp_path / "nf", input_dir=inputs, methods=methods, metrics=["errors"], engine="nextflow", progress=False)
    local = run_benchmark(task, tmp_path / "local", input_dir=inputs, methods=methods, metrics=["errors"], progress=False)
    assert (tmp_path / "nf" / "logs" / "nextflow.log").is_file()

    def key(r):
        return {(s["dataset_id"], s["method_id"], s["metric_id"]): s["raw"] for s in r["scores"]}

    assert key(via_nf) == key(local) and len(key(local)) == 8  # (3 controls + group_mean) x (rmse, mae)
    assert [(f["job_id"], f["exit_code"]) for f in via_nf["failures"]] == [("syn/fail_raise", 1)]
    assert [f["job_id"] for f in local["failures"]] == ["syn/fail_raise"]
    assert via_nf["engine"] == "nextflow"
    assert {r["job_id"] for r in via_nf["resources"]} == {r["job_id"] for r in local["resources"]}
