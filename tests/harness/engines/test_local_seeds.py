"""The local engine runs seed replicates, and results average them and carry each row's provenance."""

from __future__ import annotations

import json

import pytest

from openpert.config.task import Task
from openpert.engines.benchmark import run_benchmark


def test_seed_replicates_run_and_are_averaged(project_copy, tmp_path):
    config = project_copy / "src/tiny/control_methods/zeros/config.vsh.yaml"
    text = config.read_text()
    assert "\narguments:" not in text
    config.write_text(text.replace("  control: negative\n", "  control: negative\n  seeds: 3\n")
                      + "arguments:\n  - {name: --seed, type: integer, default: 0, description: Seed of the replicate.}\n")
    task = Task(project_copy / "src" / "tiny")
    out = tmp_path / "out"
    results = run_benchmark(task, out, input_dir=project_copy / "resources_test" / "tiny", methods=["group_mean"],
                            controls=["truth", "zeros"], metrics=["errors"], jobs=1, progress=False)
    assert not results["failures"]
    jobs = sorted(r["job_id"] for r in results["resources"] if r["method_id"] == "zeros")
    assert jobs == ["syn/zeros@seed0", "syn/zeros@seed0/errors", "syn/zeros@seed1", "syn/zeros@seed1/errors",
                    "syn/zeros@seed2", "syn/zeros@seed2/errors"]
    assert sorted(r["seed"] for r in results["resources"] if r["method_id"] == "zeros") == [0, 0, 1, 1, 2, 2]
    for k in range(3):
        assert (out / "outputs" / "syn" / f"zeros@seed{k}" / "errors").is_dir()
    zeros = {s["metric_id"]: s for s in results["scores"] if s["method_id"] == "zeros"}
    # the fixture's zeros control ignores its seed: every replicate scores the same
    assert zeros["rmse"]["n_seeds"] == 3 and len(zeros["rmse"]["raw_seeds"]) == 3
    assert zeros["rmse"]["raw"] == pytest.approx(zeros["rmse"]["raw_seeds"][0]) and zeros["rmse"]["raw_sd"] == 0.0
    assert zeros["rmse"]["scaled"] == pytest.approx(0.0)
    method = {s["metric_id"]: s for s in results["scores"] if s["method_id"] == "group_mean"}
    assert method["rmse"]["n_seeds"] == 1 and method["rmse"]["raw_sd"] is None and method["rmse"]["raw_seeds"] == []
    assert [m["seeds"] for m in results["methods"] if m["id"] == "zeros"] == [[0, 1, 2]]
    # provenance of a row: its replicate jobs, with digests, parameters, engine and environment
    prov = zeros["rmse"]["provenance"]
    assert prov["seeds"] == [0, 1, 2]
    assert [j["job_id"] for j in prov["method_jobs"]] == ["syn/zeros@seed0", "syn/zeros@seed1", "syn/zeros@seed2"]
    assert [j["params"]["seed"] for j in prov["method_jobs"]] == [0, 1, 2]
    job = prov["method_jobs"][0]
    assert job["component_digest"].startswith("sha256:") and job["dataset_digest"] == results["provenance"]["dataset_digests"]["syn"]
    assert job["engine"] == "local" and job["sandbox"] in ("bubblewrap", "none")
    assert job["code_version"] == results["provenance"]["code_version"] and "numpy" in job["packages"]
    assert job["host"]["cpu_count"] >= 1 and job["duration_s"] > 0 and job["peak_memory_mb"] > 0
    # the limits it ran under; its CPU count (capped by machine_share) is also its threads
    assert job["limits"]["cpus"] >= 1 and job["limits"]["processes"] and job["limits"]["disk_mb"]
    assert job["host"]["blas"] and "openblas_coretype" in job["host"]
    assert len(prov["metric_jobs"]) == 3 and prov["wall_time_s"] > 0
    # the job records on disk carry the same
    record_files = list((out / "work").rglob("record.json"))
    records = [json.loads(p.read_text()) for p in record_files]
    seeded = [r for r in records if r["method_id"] == "zeros" and r["stage"] == "method"]
    assert sorted(r["seed"] for r in seeded) == [0, 1, 2]
    assert all(r["provenance"]["packages"]["python"] and r["dataset_digest"] for r in seeded)
    # the scale, the headline split and Open Problems' convention are in results.json
    assert results["scale"]["description"].startswith("On each dataset and metric, 1 is the positive control")
    assert {b["lo_method_id"] for b in results["scale"]["bounds"]} == {"zeros"}
    assert any(q["flag"] == "headline_metrics_undeclared" for q in results["qc"])
    assert all("scaled_openproblems" in s for s in results["scores"])
