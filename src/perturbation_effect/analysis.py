"""Task-level statistics of a perturbation_effect benchmark run (the methods appendix's resampling).

Reads a results folder written by ``openpert benchmark --task perturbation_effect`` (``plan.json``,
``outputs/<dataset>/<method>/prediction.h5ad`` and ``.../<metric>/score.h5ad``; a method run over
seeds, ``<method>@seed<k>``, has its per-item values averaged over seeds) and computes, on the
per-test-perturbation values, with :mod:`openpert.results.resampling`:

* ``summary``: the mean of every metric per dataset and method with 95% percentile bootstrap
  intervals (B = 1,000 resamples of test perturbations). The statistics' headline is the
  paper's (:data:`PAPER_HEADLINE`: Pearson delta and L2 on the top-1,000 genes, single
  perturbations and combinations apart, as its figures report them); the headline of the
  aggregate in ``api/task_info.yaml`` (the perturbation-specific correlation, see its
  description) follows, then the other diagnostics. Each row says its ``role`` here and its
  ``aggregate_role``; an undefined value (a correlation of a constant change) is left out and
  counted in ``n_undefined``, and a method whose every value is undefined has no mean;
* ``pairwise_tests``: for every pair of methods and baselines (controls that set no scale
  excluded: positive, ceiling, adversarial), per dataset and tested metric (the paper's headline
  and the aggregate's), the mean paired
  difference with its bootstrap 95% interval and a paired sign-flip permutation test (P =
  10,000); pairs with an undefined value are left out (and counted);
* ``pca_convention``: the linear PCA model under the authors' convention (the default) and under
  the ``perturbations`` variant on each dataset without LSFT, scored by Pearson delta and L2, with
  the paired difference and its bootstrap interval;
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
import sys
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import yaml

from openpert.results.resampling import bootstrap_ci, paired_permutation_test, regression_with_ci

N_BOOT = 1000
N_PERMUTATIONS = 10_000
SEED = 0
N_TOP = 1000
#: The paper's headline (Ahlmann-Eltze, Huber & Anders 2025, the top-1,000 genes figures): the
#: headline of these statistics, whatever ranks the aggregate.
PAPER_HEADLINE = ("pearson_delta_top1000_single", "pearson_delta_top1000_combo", "l2_top1000_single", "l2_top1000_combo")
HARDNESS_COLUMNS = {"hardness_top1pct": 0.01, "hardness_top5pct": 0.05, "hardness_top10pct": 0.10}
#: Control roles that never rank: they stay out of the pairwise comparisons.
NOT_COMPARED = ("positive", "ceiling", "adversarial")
TASK_DIR = Path(__file__).resolve().parent


def metric_roles(task_dir: Path = TASK_DIR) -> tuple[list[str], list[str]]:
    """The headline and diagnostic metric ids of ``api/task_info.yaml``.

    Raises
    ------
    ValueError
        Naming the file, when either list is missing.
    """
    path = task_dir / "api" / "task_info.yaml"
    info = yaml.safe_load(path.read_text())
    headline, diagnostic = info.get("headline_metrics"), info.get("diagnostic_metrics")
    if not headline or diagnostic is None:
        raise ValueError(f"{path}: headline_metrics and diagnostic_metrics must both be listed")
    return list(headline), list(diagnostic)


def statistics_roles(task_dir: Path = TASK_DIR) -> tuple[list[str], list[str], dict[str, str]]:
    """The metrics of the statistics tables: the paper's headline, the others, and each one's aggregate role.

    Returns
    -------
    headline, diagnostic, aggregate_role
        :data:`PAPER_HEADLINE`; every other metric of ``api/task_info.yaml`` (the aggregate's
        headline first); metric id -> ``"headline"`` or ``"diagnostic"`` as ``task_info`` declares.

    Raises
    ------
    ValueError
        Naming the file, when a metric of the paper's headline is not declared there.
    """
    aggregate_headline, aggregate_diagnostic = metric_roles(task_dir)
    aggregate_role = {**{m: "headline" for m in aggregate_headline}, **{m: "diagnostic" for m in aggregate_diagnostic}}
    missing = [m for m in PAPER_HEADLINE if m not in aggregate_role]
    if missing:
        raise ValueError(f"{task_dir / 'api' / 'task_info.yaml'}: the paper's headline metrics {missing} are not declared")
    others = [m for m in [*aggregate_headline, *aggregate_diagnostic] if m not in PAPER_HEADLINE]
    return list(PAPER_HEADLINE), others, aggregate_role


def applies_to(metric_id: str, n_targets: pd.Series) -> pd.Series:
    """Which test perturbations a metric scores: ``*_single`` one target, ``*_combo`` several, else all."""
    if metric_id.endswith("_single"):
        return n_targets == 1
    if metric_id.endswith("_combo"):
        return n_targets > 1
    return pd.Series(True, index=n_targets.index)


def _json_number(value):
    value = float(value)
    return value if math.isfinite(value) else None


def load_run(outdir: str | Path, datasets: list[dict] | None = None) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """Per-item values of a run.

    Parameters
    ----------
    outdir
        The task's results folder.
    datasets
        The datasets the run scored (``{"id", "files": {format: path}}``), as the benchmark hands
        them over; ``None``: those ``plan.json`` lists (a run on processed datasets, ``--input``).
        The returned plan holds them as its ``datasets``.

    Returns
    -------
    plan, scores, hardness
        ``scores``: long table ``dataset_id, method_id, metric_id, item, value``; ``hardness``:
        ``dataset_id, method_id, item`` and one column per hardness share (methods that write it).

    Raises
    ------
    FileNotFoundError
        When ``outdir`` has no ``plan.json``.
    ValueError
        When there is no dataset: plan.json lists none where the run's dataset jobs made them.
    """
    outdir = Path(outdir)
    plan_path = outdir / "plan.json"
    if not plan_path.is_file():
        raise FileNotFoundError(f"{plan_path}: not found; is {outdir} a results folder of a benchmark run?")
    plan = json.loads(plan_path.read_text())
    if datasets is not None:
        plan["datasets"] = datasets
    if not plan["datasets"]:
        raise ValueError(f"{plan_path}: no dataset to analyse (a run whose dataset jobs made its datasets lists them "
                         "only in results.json; its statistics are computed by the run itself)")
    score_rows, hard_frames = [], []
    for ds in plan["datasets"]:
        for method in plan["methods"]:
            seeds = method.get("seeds")
            runs = [method["id"]] if not seeds else [f"{method['id']}@seed{k}" for k in seeds]
            rows_before = len(score_rows)
            for run in runs:
                _read_job(outdir / "outputs" / ds["id"] / run, ds["id"], method, plan, score_rows, hard_frames)
            if len(runs) > 1 and len(score_rows) > rows_before:
                # Seeds of one method: their per-item values are averaged, as the results are.
                frame = pd.DataFrame(score_rows[rows_before:], columns=["dataset_id", "method_id", "metric_id", "item", "value"])
                mean = frame.groupby(["dataset_id", "method_id", "metric_id", "item"], sort=False)["value"].mean().reset_index()
                del score_rows[rows_before:]
                score_rows.extend(mean.itertuples(index=False, name=None))
    scores = pd.DataFrame(score_rows, columns=["dataset_id", "method_id", "metric_id", "item", "value"])
    hardness = pd.concat(hard_frames, ignore_index=True) if hard_frames else pd.DataFrame(
        columns=["dataset_id", "method_id", "item", *HARDNESS_COLUMNS])
    return plan, scores, hardness


def _read_job(base: Path, dataset_id: str, method: dict, plan: dict, score_rows: list, hard_frames: list) -> None:
    """Per-item scores (and hardness) of one method job, appended to ``score_rows`` and ``hard_frames``."""
    pred_path = base / next(iter(method["output_names"].values()))
    if pred_path.is_file():
        obs = ad.read_h5ad(pred_path, backed="r").obs
        cols = [c for c in HARDNESS_COLUMNS if c in obs.columns]
        if cols:
            frame = obs[cols].astype(float).copy()
            frame.insert(0, "item", frame.index.astype(str))
            frame.insert(0, "method_id", method["id"])
            frame.insert(0, "dataset_id", dataset_id)
            hard_frames.append(frame.reset_index(drop=True))
    for metric in plan["metrics"]:
        score_path = base / metric["id"] / next(iter(metric["output_names"].values()))
        if not score_path.is_file():
            continue  # a failed job: results.json lists it among the failures
        score = ad.read_h5ad(score_path)
        for metric_id in np.atleast_1d(score.uns["metric_ids"]):
            if metric_id in score.obs.columns:
                values = score.obs[metric_id].astype(float)
                score_rows.extend((dataset_id, method["id"], str(metric_id), str(i), float(v)) for i, v in values.items())


def held_out_targets(plan: dict) -> pd.DataFrame:
    """``dataset_id, item, n_targets`` of every dataset's test file (which metrics apply to which item)."""
    frames = []
    for ds in plan["datasets"]:
        path = ds["files"]["file_test"]
        test = ad.read_h5ad(path, backed="r")
        if "n_targets" not in test.obs.columns:
            raise ValueError(f"{path}: obs has no n_targets; single perturbations and combinations cannot be told apart")
        frames.append(pd.DataFrame({"dataset_id": ds["id"], "item": test.obs_names.astype(str),
                                    "n_targets": test.obs["n_targets"].astype(int).to_numpy()}))
        test.file.close()
    return pd.concat(frames, ignore_index=True)


def applicable_scores(scores: pd.DataFrame, targets: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``scores`` for items a metric applies to (a NaN left among them is undefined)."""
    merged = scores.merge(targets, on=["dataset_id", "item"], how="left")
    keep = np.ones(len(merged), dtype=bool)
    for metric_id, index in merged.groupby("metric_id").groups.items():
        keep[index] = applies_to(str(metric_id), merged.loc[index, "n_targets"]).to_numpy()
    return merged[keep].drop(columns="n_targets").reset_index(drop=True)


def _controls(plan: dict) -> dict[str, str | None]:
    return {m["id"]: m.get("control") for m in plan["methods"]}


def summary_table(scores: pd.DataFrame, headline: list[str], diagnostic: list[str],
                  aggregate_role: dict[str, str] | None = None) -> list[dict]:
    """Mean of each metric per dataset and method with its bootstrap interval; undefined values counted.

    ``scores`` holds only the items each metric applies to (:func:`applicable_scores`), so a NaN
    left is an undefined value: it is excluded from the mean and interval and counted in
    ``n_undefined``; when every value is undefined the mean is missing (None). ``role`` is the
    metric's role in these tables, ``aggregate_role`` (when given) its role in the aggregate.
    """
    rows = []
    roles = {**{m: "headline" for m in headline}, **{m: "diagnostic" for m in diagnostic}}
    order = {m: i for i, m in enumerate([*headline, *diagnostic])}
    frame = scores[scores["metric_id"].isin(roles)]
    for (ds, method, metric), group in frame.groupby(["dataset_id", "method_id", "metric_id"], sort=True):
        values = group["value"].to_numpy()
        defined = values[~np.isnan(values)]
        res = bootstrap_ci(defined, n_boot=N_BOOT, seed=SEED) if defined.size else None
        rows.append({"dataset_id": ds, "method_id": method, "metric_id": metric, "role": roles[metric],
                     **({"aggregate_role": aggregate_role.get(metric)} if aggregate_role is not None else {}),
                     "mean": _json_number(res.estimate) if res else None,
                     "ci_low": _json_number(res.low) if res else None, "ci_high": _json_number(res.high) if res else None,
                     "n_items": int(defined.size), "n_undefined": int(values.size - defined.size)})
    rows.sort(key=lambda r: (r["dataset_id"], order[r["metric_id"]], r["method_id"]))
    return rows


def pairwise_tests(scores: pd.DataFrame, controls: dict[str, str | None], metrics: list[str]) -> list[dict]:
    """Every pair of compared methods: mean paired difference, its bootstrap interval and a permutation test.

    Controls that never rank (positive, ceiling, adversarial) are left out. Pairs in which either
    value is undefined are dropped and counted (``n_undefined``); a comparison with no defined pair
    has no difference, interval or p-value (None) and is not significant.
    """
    rows = []
    for (ds, metric), group in scores[scores["metric_id"].isin(metrics)].groupby(["dataset_id", "metric_id"], sort=True):
        table = group.pivot(index="item", columns="method_id", values="value")
        methods = sorted(m for m in table.columns if controls.get(m) not in NOT_COMPARED)
        for a, b in itertools.combinations(methods, 2):
            x, y = table[a].to_numpy(), table[b].to_numpy()
            both = ~(np.isnan(x) | np.isnan(y))
            row = {"dataset_id": ds, "metric_id": metric, "method_a": a, "method_b": b,
                   "mean_difference": None, "ci_low": None, "ci_high": None, "p_value": None, "significant": False,
                   "n_items": int(both.sum()), "n_undefined": int((~both).sum())}
            if both.any():
                boot = bootstrap_ci(x[both] - y[both], n_boot=N_BOOT, seed=SEED)
                res = paired_permutation_test(x[both], y[both], n_permutations=N_PERMUTATIONS, seed=SEED)
                row.update(mean_difference=_json_number(res.statistic), ci_low=_json_number(boot.low),
                           ci_high=_json_number(boot.high), p_value=_json_number(res.p_value),
                           significant=bool(res.p_value < 0.05))
            rows.append(row)
    return rows


def _rowwise_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Pearson correlation (as the ``pearson_delta`` metric); NaN where a row is constant."""
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    denom = np.sqrt((a**2).sum(axis=1) * (b**2).sum(axis=1))
    return np.divide((a * b).sum(axis=1), denom, out=np.full(len(a), np.nan), where=denom > 0)


def convention_scores(train: ad.AnnData, test: ad.AnnData, solution: ad.AnnData, pca_convention: str) -> pd.DataFrame:
    """Per-test-perturbation Pearson delta and L2 of the linear PCA model under one convention.

    The model is :func:`perturbation_effect_lib.lsft.predict_test_perturbations` with training-PCA
    gene and perturbation embeddings (the ``linear_pca`` method's defaults), trained on all
    training perturbations.

    Returns
    -------
    pandas.DataFrame
        Indexed by test perturbation; ``n_targets`` and the columns ``pearson_delta_top1000``,
        ``pearson_delta`` and ``l2_top1000``.
    """
    if str(TASK_DIR) not in sys.path:
        sys.path.append(str(TASK_DIR))
    from perturbation_effect_lib import lsft, prediction_files

    control = train.var["control_mean"].to_numpy(dtype=np.float64)
    result = lsft.predict_test_perturbations(
        prediction_files.training_profiles(train), train.obs_names, test.obs_names, train.var_names,
        gene_embedding="pca", pert_embedding="pca", lsft_fraction=0.0, pca_convention=pca_convention, control=control)
    observed = np.asarray(solution[test.obs_names, train.var_names].layers["expression"], dtype=np.float64)
    top = np.argsort(-control, kind="stable")[:N_TOP]
    predicted_change, observed_change = result.predictions - control, observed - control
    return pd.DataFrame({
        "n_targets": test.obs["n_targets"].astype(int).to_numpy(),
        "pearson_delta_top1000": _rowwise_pearson(predicted_change[:, top], observed_change[:, top]),
        "pearson_delta": _rowwise_pearson(predicted_change, observed_change),
        "l2_top1000": np.sqrt(((result.predictions - observed)[:, top] ** 2).sum(axis=1)),
    }, index=test.obs_names)


def pca_convention_comparison(plan: dict) -> list[dict]:
    """The linear PCA model under the authors' convention and the ``perturbations`` variant, paired.

    On every dataset without LSFT (LSFT refits under the authors' convention one model per test
    perturbation; the comparison is about the full fit), per subset (single perturbations,
    combinations, all) and metric: both means, the mean paired difference (authors minus
    perturbations) with its bootstrap interval, and a permutation p-value.
    """
    rows = []
    for ds in plan["datasets"]:
        files = ds["files"]
        if "file_solution" not in files:
            continue
        train = ad.read_h5ad(files["file_train"])
        if float(train.uns.get("lsft_fraction", 0.0)) > 0:
            continue
        test, solution = ad.read_h5ad(files["file_test"]), ad.read_h5ad(files["file_solution"])
        authors = convention_scores(train, test, solution, "authors")
        variant = convention_scores(train, test, solution, "perturbations")
        subsets = {"single": authors["n_targets"] == 1, "combination": authors["n_targets"] > 1,
                   "all": pd.Series(True, index=authors.index)}
        for subset, mask in subsets.items():
            if not mask.any():
                continue
            for metric in ("pearson_delta_top1000", "pearson_delta", "l2_top1000"):
                x, y = authors.loc[mask, metric].to_numpy(), variant.loc[mask, metric].to_numpy()
                both = ~(np.isnan(x) | np.isnan(y))
                if not both.any():
                    continue
                boot = bootstrap_ci(x[both] - y[both], n_boot=N_BOOT, seed=SEED)
                test_res = paired_permutation_test(x[both], y[both], n_permutations=N_PERMUTATIONS, seed=SEED)
                rows.append({"dataset_id": ds["id"], "subset": subset, "metric_id": metric,
                             "mean_authors": _json_number(x[both].mean()), "mean_perturbations": _json_number(y[both].mean()),
                             "mean_difference": _json_number(boot.estimate), "ci_low": _json_number(boot.low),
                             "ci_high": _json_number(boot.high), "p_value": _json_number(test_res.p_value),
                             "n_items": int(both.sum())})
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


def task_statistics(outdir: str | Path, datasets: list[dict] | None = None) -> dict[str, dict]:
    """Every statistic of the task, as ``results.json`` ``statistics`` entries.

    ``datasets``: those the run scored, as :func:`load_run` takes them (the benchmark passes them).
    """
    plan, scores, hardness = load_run(outdir, datasets)
    controls = _controls(plan)
    headline, diagnostic, aggregate_role = statistics_roles()
    # Tested: the paper's headline (its figures) and the aggregate's (what ranks the methods).
    tested = [*headline, *(m for m in diagnostic if aggregate_role[m] == "headline")]
    scores = applicable_scores(scores, held_out_targets(plan))
    return {
        "summary": {
            "label": "Paper's headline (top 1,000 genes; singles and combinations) and other means",
            "description": (f"Mean over test perturbations per dataset, method and metric; percentile bootstrap over test "
                            f"perturbations (B = {N_BOOT}, seed {SEED}). Headline of these tables (the paper's): "
                            f"{', '.join(headline)}; the others: {', '.join(diagnostic)}. aggregate_role says which "
                            "metrics rank the methods in the aggregate (the perturbation-specific correlation; see the "
                            "task description). Undefined values (the correlation of a constant predicted change) "
                            "are excluded and counted in n_undefined; a mean of none is missing."),
            "table": summary_table(scores, headline, diagnostic, aggregate_role),
        },
        "pairwise_tests": {
            "label": "Pairwise differences between methods",
            "description": (f"Per tested metric ({', '.join(tested)}): mean per-perturbation difference (method_a minus method_b) with a "
                            f"bootstrap 95% interval (B = {N_BOOT}) and a two-sided sign-flip test, P = {N_PERMUTATIONS}, "
                            "p = (k + 1)/(P + 1), not adjusted for multiple testing. Positive, ceiling and adversarial "
                            "controls are left out; pairs with an undefined value are excluded and counted."),
            "table": pairwise_tests(scores, controls, tested),
        },
        "pca_convention": {
            "label": "Linear PCA model: authors' convention vs variant",
            "description": ("The linear PCA model under the authors' convention (control among the conditions, PCA of "
                            "expression centred per condition, fitted to single perturbations and the control; the "
                            "default) and under the 'perturbations' variant (training perturbations only, PCA centred "
                            "per gene, every training perturbation fitted), on each dataset without LSFT: means, the "
                            f"paired difference (authors minus variant) with a bootstrap 95% interval (B = {N_BOOT}) and "
                            "a permutation p-value, for single perturbations, combinations and both."),
            "table": pca_convention_comparison(plan),
        },
        "hardness_regression": {
            "label": "Performance against hardness",
            "description": ("Least-squares slope and Pearson correlation of each tested per-perturbation metric on "
                            "hardness (mean cosine similarity to the top 1/5/10% training perturbations in the method's "
                            f"perturbation-embedding space), with pairs-bootstrap 95% intervals (B = {N_BOOT})."),
            "table": hardness_regressions(scores[scores["metric_id"].isin(tested)], hardness),
        },
        "lsft_effect": {
            "label": "LSFT against training on all perturbations",
            "description": ("Per tested metric, mean per-perturbation difference LSFT minus full training (same test "
                            f"perturbations), with a bootstrap 95% interval (B = {N_BOOT}) and a paired permutation p-value."),
            "table": lsft_effects(plan, scores[scores["metric_id"].isin(tested)]),
        },
    }


def format_summary(rows: list[dict]) -> str:
    """A plain-text table of the headline means with intervals, one line per dataset and method."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return "no per-item scores found"
    frame = frame[frame["role"] == "headline"]

    def cell(r) -> str:
        if r["mean"] is None or pd.isna(r["mean"]):
            return f"undefined (n={r['n_undefined']})"
        return f"{r['mean']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"

    frame = frame.assign(cell=frame.apply(cell, axis=1))
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
