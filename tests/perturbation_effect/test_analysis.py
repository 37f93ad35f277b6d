"""The task-level statistics (src/perturbation_effect/analysis.py) on a results folder with known structure."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from project_paths import ROOT

spec = importlib.util.spec_from_file_location("perturbation_effect_analysis", ROOT / "src/perturbation_effect/analysis.py")
analysis = importlib.util.module_from_spec(spec)
spec.loader.exec_module(analysis)

N = 60
ITEMS = [f"P{i}" for i in range(N)]
SLOPE = 0.5
LSFT_GAIN = 0.1


def write_run(outdir: Path) -> None:
    """Two datasets (base and its LSFT twin), four methods, one metric; values with a known design."""
    rng = np.random.default_rng(0)
    hardness = rng.uniform(0.2, 0.9, size=N)
    noise = rng.normal(0, 0.02, size=N)
    values = {
        "ground_truth": np.ones(N),
        "no_change": np.zeros(N),
        "linear": SLOPE * hardness + noise,            # performance rises with hardness
        "mean": SLOPE * hardness + noise - 0.2,        # uniformly worse than linear
    }
    datasets = []
    for ds, lsft in (("base", 0.0), ("base_lsft", 0.05)):
        folder = outdir / "data" / ds
        folder.mkdir(parents=True)
        var = pd.DataFrame({"control_mean": [1.0, 2.0]}, index=["g1", "g2"])
        uns = {"dataset_id": ds, "split": "simulation", "lsft_fraction": lsft}
        ad.AnnData(X=np.ones((3, 2)), obs=pd.DataFrame(index=["T1", "T2", "T3"]), var=var, uns=uns).write_h5ad(folder / "train.h5ad")
        ad.AnnData(obs=pd.DataFrame(index=ITEMS), var=var, uns=uns).write_h5ad(folder / "test.h5ad")
        datasets.append({"id": ds, "files": {"file_train": str(folder / "train.h5ad"), "file_test": str(folder / "test.h5ad")}})
        for method, vals in values.items():
            base = outdir / "outputs" / ds / method
            (base / "pearson_delta").mkdir(parents=True)
            obs = pd.DataFrame(index=ITEMS)
            if method == "linear":
                obs["hardness_top1pct"] = hardness
                obs["hardness_top5pct"] = hardness
                obs["hardness_top10pct"] = np.r_[np.nan, hardness[1:]]
            ad.AnnData(obs=obs, var=pd.DataFrame(index=["g1", "g2"]), layers={"prediction": np.ones((N, 2))},
                       uns={"dataset_id": ds, "method_id": method}).write_h5ad(base / "prediction.h5ad")
            shift = LSFT_GAIN if (lsft and method == "linear") else 0.0
            score = pd.DataFrame({"pearson_delta": vals + shift}, index=ITEMS)
            ad.AnnData(obs=score, uns={"dataset_id": ds, "method_id": method, "metric_ids": ["pearson_delta"],
                                       "metric_values": [float(score["pearson_delta"].mean())]}).write_h5ad(base / "pearson_delta" / "score.h5ad")
    controls = {"ground_truth": "positive", "no_change": "negative", "linear": None, "mean": None}
    plan = {"datasets": datasets,
            "methods": [{"id": m, "control": c, "output_names": {"output": "prediction.h5ad"}} for m, c in controls.items()],
            "metrics": [{"id": "pearson_delta", "output_names": {"output": "score.h5ad"}}]}
    (outdir / "plan.json").write_text(json.dumps(plan))
    (outdir / "results.json").write_text(json.dumps({"schema_version": 1, "statistics": {}}))


@pytest.fixture(scope="module")
def stats(tmp_path_factory):
    outdir = tmp_path_factory.mktemp("run")
    write_run(outdir)
    assert analysis.main([str(outdir), "--write"]) == 0
    return outdir, json.loads((outdir / "statistics.json").read_text())


def test_summary_has_bootstrap_intervals(stats):
    _, result = stats
    rows = {(r["dataset_id"], r["method_id"]): r for r in result["summary"]["table"]}
    row = rows[("base", "linear")]
    assert row["ci_low"] < row["mean"] < row["ci_high"] and row["n_items"] == N
    assert rows[("base", "ground_truth")]["ci_low"] == rows[("base", "ground_truth")]["ci_high"] == 1.0


def test_pairwise_tests_cover_every_pair_of_baselines(stats):
    _, result = stats
    rows = [r for r in result["pairwise_tests"]["table"] if r["dataset_id"] == "base"]
    pairs = {(r["method_a"], r["method_b"]) for r in rows}
    assert pairs == {("linear", "mean"), ("linear", "no_change"), ("mean", "no_change")}  # ground truth excluded
    lin_mean = next(r for r in rows if (r["method_a"], r["method_b"]) == ("linear", "mean"))
    assert lin_mean["mean_difference"] == pytest.approx(0.2)
    assert lin_mean["p_value"] < 0.001 and lin_mean["significant"]


def test_hardness_regression_recovers_the_slope(stats):
    _, result = stats
    rows = [r for r in result["hardness_regression"]["table"] if r["dataset_id"] == "base"]
    assert {r["method_id"] for r in rows} == {"linear"}  # only methods that report hardness
    by_share = {r["top_pct"]: r for r in rows}
    assert set(by_share) == {0.01, 0.05, 0.10}
    one = by_share[0.01]
    assert one["slope_ci_low"] < SLOPE < one["slope_ci_high"]
    assert abs(one["slope"] - SLOPE) < 0.05 and one["correlation"] > 0.95
    assert by_share[0.10]["n_items"] == N - 1  # the perturbation without hardness is left out


def test_lsft_effect_is_paired_with_its_base_dataset(stats):
    _, result = stats
    rows = {r["method_id"]: r for r in result["lsft_effect"]["table"]}
    assert set(rows) == {"ground_truth", "no_change", "linear", "mean"}
    assert rows["linear"]["base_dataset_id"] == "base" and rows["linear"]["lsft_fraction"] == 0.05
    assert rows["linear"]["mean_difference"] == pytest.approx(LSFT_GAIN)
    assert rows["linear"]["p_value"] < 0.001
    assert rows["mean"]["mean_difference"] == 0.0


def test_write_merges_into_results_json(stats):
    outdir, result = stats
    merged = json.loads((outdir / "results.json").read_text())["statistics"]
    assert set(merged) == set(result) == {"summary", "pairwise_tests", "hardness_regression", "lsft_effect"}
    for entry in merged.values():
        assert {"label", "description", "table"} <= set(entry)
