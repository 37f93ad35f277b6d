"""Task-level statistics of a perturbation_effect benchmark run (the methods appendix's resampling).

Reads a results folder written by ``openpert benchmark --task perturbation_effect`` (``plan.json``,
``outputs/<dataset>/<method>/prediction.h5ad`` and ``.../<metric>/score.h5ad``) and computes, on
the per-test-perturbation values of the headline metrics (``pearson_delta`` and ``l2``), with
:mod:`openpert.results.resampling`:

* ``summary``: mean Pearson delta and mean L2 per dataset and method with 95% percentile
  bootstrap intervals (B = 1,000 resamples of test perturbations);
* ``pairwise_tests``: paired sign-flip permutation tests (P = 10,000) between every pair of
  baselines (positive controls excluded), per dataset and metric;
* ``hardness_regression``: per dataset, method with a perturbation embedding, metric and top-k
  share (1/5/10%), the least-squares slope and the Pearson correlation of performance on hardness,
  with pairs-bootstrap intervals;
* ``lsft_effect``: for each LSFT dataset, the paired difference (LSFT minus training on all data)
  per method and metric, against the simulation dataset with the same train/test perturbations,
  with a bootstrap interval of the mean difference and a permutation p-value.

Each entry is ``{"label", "description", "table": [...]}``, the free-form layout of
``results.json``'s ``statistics``. Run as a script to print the summary and write
``statistics.json`` next to ``results.json`` (``--write`` also merges it into ``results.json``)::

    python src/perturbation_effect/analysis.py results/perturbation_effect [--write]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd

from openpert.results.resampling import bootstrap_ci, paired_permutation_test, regression_with_ci

N_BOOT = 1000
N_PERMUTATIONS = 10_000
SEED = 0
HARDNESS_COLUMNS = {"hardness_top1pct": 0.01, "hardness_top5pct": 0.05, "hardness_top10pct": 0.10}
SUMMARY_METRICS = ("pearson_delta", "l2")


def _json_number(value):
    value = float(value)
    return value if math.isfinite(value) else None


def load_run(outdir: str | Path) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """Per-item values of a run.

    Returns
    -------
    plan, scores, hardness
        ``scores``: long table ``dataset_id, method_id, metric_id, item, value``; ``hardness``:
        ``dataset_id, method_id, item`` and one column per hardness share (methods that write it).

    Raises
    ------
    FileNotFoundError
        When ``outdir`` has no ``plan.json``.
    """
    outdir = Path(outdir)
    plan_path = outdir / "plan.json"
    if not plan_path.is_file():
        raise FileNotFoundError(f"{plan_path}: not found; is {outdir} a results folder of a benchmark run?")
    plan = json.loads(plan_path.read_text())
    score_rows, hard_frames = [], []
    for ds in plan["datasets"]:
        for method in plan["methods"]:
            base = outdir / "outputs" / ds["id"] / method["id"]
            pred_path = base / next(iter(method["output_names"].values()))
            if pred_path.is_file():
                obs = ad.read_h5ad(pred_path, backed="r").obs
                cols = [c for c in HARDNESS_COLUMNS if c in obs.columns]
                if cols:
                    frame = obs[cols].astype(float).copy()
                    frame.insert(0, "item", frame.index.astype(str))
                    frame.insert(0, "method_id", method["id"])
                    frame.insert(0, "dataset_id", ds["id"])
                    hard_frames.append(frame.reset_index(drop=True))
            for metric in plan["metrics"]:
                score_path = base / metric["id"] / next(iter(metric["output_names"].values()))
                if not score_path.is_file():
                    continue  # a failed job: results.json lists it among the failures
                score = ad.read_h5ad(score_path)
                for metric_id in np.atleast_1d(score.uns["metric_ids"]):
                    if metric_id in score.obs.columns:
                        values = score.obs[metric_id].astype(float)
                        score_rows.extend((ds["id"], method["id"], str(metric_id), str(i), float(v)) for i, v in values.items())
    scores = pd.DataFrame(score_rows, columns=["dataset_id", "method_id", "metric_id", "item", "value"])
    hardness = pd.concat(hard_frames, ignore_index=True) if hard_frames else pd.DataFrame(
        columns=["dataset_id", "method_id", "item", *HARDNESS_COLUMNS])
    return plan, scores, hardness


def _controls(plan: dict) -> dict[str, str | None]:
    return {m["id"]: m.get("control") for m in plan["methods"]}


def summary_table(scores: pd.DataFrame, metrics=SUMMARY_METRICS) -> list[dict]:
    """Mean of each metric per dataset and method with its bootstrap interval."""
    rows = []
    for (ds, method, metric), group in scores[scores["metric_id"].isin(metrics)].groupby(["dataset_id", "method_id", "metric_id"], sort=True):
        res = bootstrap_ci(group["value"].to_numpy(), n_boot=N_BOOT, seed=SEED)
        rows.append({"dataset_id": ds, "method_id": method, "metric_id": metric, "mean": _json_number(res.estimate),
                     "ci_low": _json_number(res.low), "ci_high": _json_number(res.high), "n_items": res.n})
    return rows


def pairwise_tests(scores: pd.DataFrame, controls: dict[str, str | None]) -> list[dict]:
    """Paired permutation test of every pair of baselines (positive controls excluded)."""
    rows = []
    for (ds, metric), group in scores.groupby(["dataset_id", "metric_id"], sort=True):
        table = group.pivot(index="item", columns="method_id", values="value")
        methods = sorted(m for m in table.columns if controls.get(m) != "positive")
        for a, b in itertools.combinations(methods, 2):
            res = paired_permutation_test(table[a].to_numpy(), table[b].to_numpy(), n_permutations=N_PERMUTATIONS, seed=SEED)
            rows.append({"dataset_id": ds, "metric_id": metric, "method_a": a, "method_b": b,
                         "mean_difference": _json_number(res.statistic), "p_value": _json_number(res.p_value),
                         "significant": bool(res.p_value < 0.05), "n_items": res.n})
    return rows


def hardness_regressions(scores: pd.DataFrame, hardness: pd.DataFrame) -> list[dict]:
    """Slope and correlation of each metric on hardness, per dataset, method and top-k share."""
    rows = []
    if hardness.empty:
        return rows
    merged = scores.merge(hardness, on=["dataset_id", "method_id", "item"], how="inner")
    for (ds, method, metric), group in merged.groupby(["dataset_id", "method_id", "metric_id"], sort=True):
        for column, share in HARDNESS_COLUMNS.items():
            res = regression_with_ci(group[column].to_numpy(), group["value"].to_numpy(), n_boot=N_BOOT, seed=SEED)
            rows.append({
                "dataset_id": ds, "method_id": method, "metric_id": metric, "top_pct": share,
                "mean_hardness": _json_number(np.nanmean(group[column])) if group[column].notna().any() else None,
                "slope": _json_number(res.slope.estimate), "slope_ci_low": _json_number(res.slope.low),
                "slope_ci_high": _json_number(res.slope.high), "correlation": _json_number(res.correlation.estimate),
                "correlation_ci_low": _json_number(res.correlation.low),
                "correlation_ci_high": _json_number(res.correlation.high), "n_items": res.n,
            })
    return rows


def _dataset_settings(plan: dict) -> pd.DataFrame:
    """Per dataset: split, LSFT fraction, and fingerprints of its train and test perturbations."""
    rows = []
    for ds in plan["datasets"]:
        files = ds["files"]
        train = ad.read_h5ad(files["file_train"], backed="r")
        test = ad.read_h5ad(files["file_test"], backed="r")
        rows.append({"dataset_id": ds["id"], "split": str(train.uns.get("split", "")),
                     "lsft_fraction": float(train.uns.get("lsft_fraction", 0.0)),
                     "train_key": "|".join(sorted(map(str, train.obs_names))),
                     "test_key": "|".join(sorted(map(str, test.obs_names)))})
        train.file.close()
        test.file.close()
    return pd.DataFrame(rows)


def lsft_effects(plan: dict, scores: pd.DataFrame) -> list[dict]:
    """LSFT minus full training, paired by test perturbation, for every LSFT dataset with a base."""
    settings = _dataset_settings(plan)
    rows = []
    for lsft in settings[settings["lsft_fraction"] > 0].itertuples():
        bases = settings[(settings["lsft_fraction"] == 0) & (settings["train_key"] == lsft.train_key)
                         & (settings["test_key"] == lsft.test_key)]
        if bases.empty:
            continue
        base_id = bases["dataset_id"].iloc[0]
        both = scores[scores["dataset_id"].isin([lsft.dataset_id, base_id])]
        for (method, metric), group in both.groupby(["method_id", "metric_id"], sort=True):
            table = group.pivot(index="item", columns="dataset_id", values="value")
            if lsft.dataset_id not in table or base_id not in table:
                continue
            diff = (table[lsft.dataset_id] - table[base_id]).to_numpy()
            boot = bootstrap_ci(diff, n_boot=N_BOOT, seed=SEED)
            test = paired_permutation_test(table[lsft.dataset_id].to_numpy(), table[base_id].to_numpy(),
                                           n_permutations=N_PERMUTATIONS, seed=SEED)
            rows.append({"dataset_id": lsft.dataset_id, "base_dataset_id": base_id, "lsft_fraction": lsft.lsft_fraction,
                         "method_id": method, "metric_id": metric,
                         "mean_base": _json_number(table[base_id].mean()), "mean_lsft": _json_number(table[lsft.dataset_id].mean()),
                         "mean_difference": _json_number(boot.estimate), "ci_low": _json_number(boot.low),
                         "ci_high": _json_number(boot.high), "p_value": _json_number(test.p_value), "n_items": boot.n})
    return rows


def task_statistics(outdir: str | Path) -> dict[str, dict]:
    """Every statistic of the task, as ``results.json`` ``statistics`` entries."""
    plan, scores, hardness = load_run(outdir)
    controls = _controls(plan)
    # The headline metrics of the appendix (mean r and L2, all genes); the top-1,000-gene variants
    # have their intervals and comparisons in results.json's scores already.
    scores = scores[scores["metric_id"].isin(SUMMARY_METRICS)]
    return {
        "summary": {
            "label": "Mean Pearson delta and L2 with 95% bootstrap intervals",
            "description": (f"Mean over test perturbations per dataset and method; percentile bootstrap over test "
                            f"perturbations (B = {N_BOOT}, seed {SEED})."),
            "table": summary_table(scores),
        },
        "pairwise_tests": {
            "label": "Paired permutation tests between baselines",
            "description": (f"Two-sided sign-flip test of the mean per-perturbation difference (method_a minus "
                            f"method_b), P = {N_PERMUTATIONS}, p = (k + 1)/(P + 1); not adjusted for multiple testing."),
            "table": pairwise_tests(scores, controls),
        },
        "hardness_regression": {
            "label": "Performance against hardness",
            "description": ("Least-squares slope and Pearson correlation of each per-perturbation metric on hardness "
                            "(mean cosine similarity to the top 1/5/10% training perturbations in the method's "
                            f"perturbation-embedding space), with pairs-bootstrap 95% intervals (B = {N_BOOT})."),
            "table": hardness_regressions(scores, hardness),
        },
        "lsft_effect": {
            "label": "LSFT against training on all perturbations",
            "description": ("Mean per-perturbation difference LSFT minus full training (same test perturbations), "
                            f"with a bootstrap 95% interval (B = {N_BOOT}) and a paired permutation p-value."),
            "table": lsft_effects(plan, scores),
        },
    }


def format_summary(rows: list[dict]) -> str:
    """A plain-text table of mean r and L2 with intervals, one line per dataset and method."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return "no per-item scores found"
    frame["cell"] = frame.apply(lambda r: f"{r['mean']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]", axis=1)
    wide = frame.pivot(index=["dataset_id", "method_id"], columns="metric_id", values="cell").fillna("-")
    return wide.to_string()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="results folder of the task (holding plan.json and outputs/)")
    parser.add_argument("--write", action="store_true", help="also merge the statistics into results.json")
    ns = parser.parse_args(argv)
    outdir = Path(ns.results)
    stats = task_statistics(outdir)
    (outdir / "statistics.json").write_text(json.dumps(stats, indent=2))
    if ns.write:
        results_path = outdir / "results.json"
        results = json.loads(results_path.read_text())
        results["statistics"] = {**(results.get("statistics") or {}), **stats}
        tmp = results_path.with_name(".results.json.tmp")
        tmp.write_text(json.dumps(results, indent=2))
        tmp.replace(results_path)
    print(format_summary(stats["summary"]["table"]))
    print(f"statistics written to {outdir / 'statistics.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
