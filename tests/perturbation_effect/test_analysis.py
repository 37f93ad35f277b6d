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
COMBOS = ["A+B", "C+D"]  # held-out combinations: outside the single-perturbation metric
METRIC = "pearson_delta_top1000_single"
SLOPE = 0.5
LSFT_GAIN = 0.1


def write_run(outdir: Path) -> None:
    """Two datasets (base and its LSFT twin), five methods, one metric; values with a known design."""
    rng = np.random.default_rng(0)
    hardness = rng.uniform(0.2, 0.9, size=N)
    noise = rng.normal(0, 0.02, size=N)
    values = {
        "ground_truth": np.ones(N),
        "no_change": np.full(N, np.nan),               # a constant change: undefined correlation
        "best_scale": np.full(N, 0.9),                 # an adversarial control: never compared
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
        test_obs = pd.DataFrame({"n_targets": [1] * N + [2] * len(COMBOS)}, index=ITEMS + COMBOS)
        ad.AnnData(obs=test_obs, var=var, uns=uns).write_h5ad(folder / "test.h5ad")
        datasets.append({"id": ds, "files": {"file_train": str(folder / "train.h5ad"), "file_test": str(folder / "test.h5ad")}})
        for method, vals in values.items():
            base = outdir / "outputs" / ds / method
            (base / METRIC).mkdir(parents=True)
            obs = pd.DataFrame(index=ITEMS)
            if method == "linear":
                obs["hardness_top1pct"] = hardness
                obs["hardness_top5pct"] = hardness
                obs["hardness_top10pct"] = np.r_[np.nan, hardness[1:]]
            ad.AnnData(obs=obs, var=pd.DataFrame(index=["g1", "g2"]), layers={"prediction": np.ones((N, 2))},
                       uns={"dataset_id": ds, "method_id": method}).write_h5ad(base / "prediction.h5ad")
            shift = LSFT_GAIN if (lsft and method == "linear") else 0.0
            # The combinations are outside a single-perturbation metric: NaN, but not undefined.
            score = pd.DataFrame({METRIC: np.r_[vals + shift, [np.nan] * len(COMBOS)]}, index=ITEMS + COMBOS)
            ad.AnnData(obs=score, uns={"dataset_id": ds, "method_id": method, "metric_ids": [METRIC],
                                       "metric_values": [float(score[METRIC].mean())]}).write_h5ad(base / METRIC / "score.h5ad")
    controls = {"ground_truth": "positive", "no_change": "negative", "best_scale": "adversarial", "linear": None, "mean": None}
    plan = {"datasets": datasets,
            "methods": [{"id": m, "control": c, "output_names": {"output": "prediction.h5ad"}} for m, c in controls.items()],
            "metrics": [{"id": METRIC, "output_names": {"output": "score.h5ad"}}]}
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
    assert row["role"] == "headline" and row["n_undefined"] == 0  # the combinations are not undefined
    assert rows[("base", "ground_truth")]["ci_low"] == rows[("base", "ground_truth")]["ci_high"] == 1.0
    # An undefined correlation stays undefined: no mean, every value counted.
    undefined = rows[("base", "no_change")]
    assert undefined["mean"] is None and undefined["n_items"] == 0 and undefined["n_undefined"] == N


def test_pairwise_tests_cover_every_pair_of_baselines(stats):
    _, result = stats
    rows = [r for r in result["pairwise_tests"]["table"] if r["dataset_id"] == "base"]
    pairs = {(r["method_a"], r["method_b"]) for r in rows}
    # ground truth (positive) and best_scale (adversarial) never rank, so they are not compared
    assert pairs == {("linear", "mean"), ("linear", "no_change"), ("mean", "no_change")}
    lin_mean = next(r for r in rows if (r["method_a"], r["method_b"]) == ("linear", "mean"))
    assert lin_mean["mean_difference"] == pytest.approx(0.2)
    assert lin_mean["ci_low"] == pytest.approx(0.2) == lin_mean["ci_high"]  # a constant difference
    assert lin_mean["p_value"] < 0.001 and lin_mean["significant"]
    # Against an undefined correlation there is nothing to test, and nothing is reported as a result.
    with_none = next(r for r in rows if (r["method_a"], r["method_b"]) == ("linear", "no_change"))
    assert with_none["n_items"] == 0 and with_none["n_undefined"] == N
    assert with_none["mean_difference"] is None and with_none["p_value"] is None and not with_none["significant"]


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
    assert set(rows) == {"ground_truth", "no_change", "best_scale", "linear", "mean"}
    assert rows["linear"]["base_dataset_id"] == "base" and rows["linear"]["lsft_fraction"] == 0.05
    assert rows["linear"]["mean_difference"] == pytest.approx(LSFT_GAIN)
    assert rows["linear"]["p_value"] < 0.001
    assert rows["mean"]["mean_difference"] == 0.0


def test_write_merges_into_results_json(stats):
    outdir, result = stats
    merged = json.loads((outdir / "results.json").read_text())["statistics"]
    assert set(merged) == set(result) == {"summary", "pairwise_tests", "pca_convention", "hardness_regression", "lsft_effect"}
    for entry in merged.values():
        assert {"label", "description", "table"} <= set(entry)


def test_pca_conventions_are_compared_on_the_test_resources(tmp_path):
    """Both conventions are fitted and scored on a real dataset file; the rows pair them per subset."""
    data = ROOT / "resources_test/perturbation_effect/synthetic_simulation"
    files = {f"file_{name}": str(data / f"{name}.h5ad") for name in ("train", "test", "solution")}
    rows = analysis.pca_convention_comparison({"datasets": [{"id": "synthetic_simulation", "files": files}]})
    by_key = {(r["subset"], r["metric_id"]): r for r in rows}
    assert {s for s, _ in by_key} == {"single", "combination", "all"}
    train, test, solution = (ad.read_h5ad(files[f"file_{n}"]) for n in ("train", "test", "solution"))
    authors = analysis.convention_scores(train, test, solution, "authors")
    variant = analysis.convention_scores(train, test, solution, "perturbations")
    single = authors["n_targets"] == 1
    row = by_key[("single", "pearson_delta_top1000")]
    assert row["n_items"] == int(single.sum())
    assert row["mean_authors"] == pytest.approx(authors.loc[single, "pearson_delta_top1000"].mean())
    assert row["mean_perturbations"] == pytest.approx(variant.loc[single, "pearson_delta_top1000"].mean())
    assert row["mean_difference"] == pytest.approx(row["mean_authors"] - row["mean_perturbations"])
    assert row["ci_low"] <= row["mean_difference"] <= row["ci_high"]
    assert not np.allclose(authors["pearson_delta"], variant["pearson_delta"])  # two different models


def test_statistics_keep_the_papers_headline_while_the_aggregate_ranks_by_the_specific_correlation(stats, tmp_path):
    _, result = stats
    headline, others, aggregate_role = analysis.statistics_roles()
    assert headline == list(analysis.PAPER_HEADLINE)
    assert {aggregate_role[m] for m in headline} == {"diagnostic"}
    ranked = [m for m in others if aggregate_role[m] == "headline"]
    assert ranked == ["pearson_specific_top1000_single", "pearson_specific_top1000_combo"] == others[:2]
    row = result["summary"]["table"][0]
    assert row["metric_id"] == METRIC and row["role"] == "headline" and row["aggregate_role"] == "diagnostic"
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "task_info.yaml").write_text("headline_metrics: [pearson_specific_top1000_single]\ndiagnostic_metrics: [l2]\n")
    with pytest.raises(ValueError, match="paper's headline metrics"):
        analysis.statistics_roles(tmp_path)
