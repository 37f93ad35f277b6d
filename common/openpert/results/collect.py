"""Collect job records into ``results/``: Open Problems' files and ``results.json``.

Both engines end here, so a run publishes the same files whichever engine ran it. ``results.json``
is the serialisation of :class:`openpert.results.model.Results` (``docs/results_json.md``,
``docs/results_schema.json``).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from openpert import __version__
from openpert.config.formats import IN_PROCESS_BYTES, declared_of
from openpert.config.task import Task
from openpert.config.viash import ComponentConfig, ConfigError
from openpert.data.manifest import DataFile, task_manifest
from openpert.engines.plan import runs_on
from openpert.files import format_bytes, shown_path, write_text_atomic, write_yaml_atomic
from openpert.results.item_scores import ITEM_SCORES, item_mean, write_item_scores
from openpert.results.llm_accounting import ABSTENTION_THRESHOLD, abstention_flags, prompt_too_long_flags, usage_table
from openpert.results.model import SCHEMA_VERSION, complete, is_ranked
from openpert.results.provenance import run_provenance
from openpert.results.reproduction import collect_reproduction
from openpert.results.scoring import (
    SCALE_SENTENCE,
    QCFlag,
    aggregate_scores,
    average_seeds,
    dynamic_range_flags,
    dynamic_range_table,
    gameability_flags,
    gameability_table,
    scale_scores,
)
from openpert.run.records import JobRecord

#: Largest ``dataset_*`` entry of a dataset's uns that the results read (bytes, as declared).
DATASET_UNS_MAX_BYTES = 1 << 20
#: Seeds of the statistics in results.json: fixed so that a report is reproducible.
BOOTSTRAP_SEED = 0
PERMUTATION_SEED = 0
N_BOOT = 1000
N_PERMUTATIONS = 10_000


def _clean(value: Any) -> Any:
    """JSON-safe values: NaN/inf become None, numpy scalars plain numbers."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return _clean(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if not math.isfinite(float(value)) else float(value)
    if isinstance(value, (str, int)) or value is None:
        return value
    return str(value)


def read_score(path: Path) -> tuple[dict[str, float], pd.DataFrame | None, dict]:
    """Read a metric's score file: ``uns`` metric_ids/metric_values and per-item values in ``obs``.

    Only ``obs`` and ``uns`` are read, and only when what they declare fits in
    :data:`openpert.config.formats.IN_PROCESS_BYTES`: the results are collected in the harness's
    process, and a score file is a component's output.

    Raises
    ------
    ValueError
        Naming the file, when ids and values are missing or of different lengths, or when its obs
        and uns declare more than the harness reads of a score file.
    """
    import h5py
    from anndata.io import read_elem

    declared = declared_of(path, "h5ad")
    sizes = [declared.under(part) for part in ("obs", "uns")]
    nbytes = sum(n for n, _ in sizes)
    peaks = [p for _, p in sizes]
    if None in peaks or sum(peaks) > IN_PROCESS_BYTES:
        raise ValueError(f"{path}: its obs and uns declare {format_bytes(nbytes)}; the results read at most "
                         f"{format_bytes(IN_PROCESS_BYTES / 2)} of a score file")
    with h5py.File(path, "r") as fh:
        uns = dict(read_elem(fh["uns"])) if "uns" in fh else {}
        obs = read_elem(fh["obs"]) if "obs" in fh else pd.DataFrame()
    ids = list(np.atleast_1d(uns.get("metric_ids", [])))
    values = list(np.atleast_1d(uns.get("metric_values", [])))
    if not ids or len(ids) != len(values):
        raise ValueError(f"{path}: uns['metric_ids'] and uns['metric_values'] must be non-empty lists of equal length "
                         f"(got {len(ids)} ids and {len(values)} values)")
    raw = {str(i): float(v) for i, v in zip(ids, values)}
    # Numeric obs columns are per-item values: of the metrics, or covariates (e.g. an item's hardness).
    numeric = [c for c in obs.columns if pd.api.types.is_numeric_dtype(obs[c])]
    items = obs[numeric] if len(obs) and numeric else None
    return raw, items, uns


def score_claims_problem(record: JobRecord, values: dict[str, float], per_item: pd.DataFrame | None, uns: dict, *,
                         declared: set[str], others: set[str], dataset_file_id: str | None = None) -> str:
    """What a score file claims that its job may not: the harness, not the component, says whose score it is.

    Parameters
    ----------
    record
        The metric job: its ``dataset_id`` and ``method_id`` (the predicting method) are the plan's.
    values, per_item, uns
        What :func:`read_score` read of its output.
    declared
        The metric ids the job's component declares in ``info.metrics``.
    others
        The metric ids the task's other metric components declare.
    dataset_file_id
        The ``dataset_id`` the dataset's own files hold, which a score may carry too (a ready-made
        dataset's folder may be named otherwise).

    Returns
    -------
    The problem in one sentence, or ``""``: a value of an undeclared metric id, per-item values of
    another component's metric (they would enter that metric's intervals and paired tests), or a
    ``dataset_id``/``method_id`` in ``uns`` other than the job's (it would put the score under
    another name).
    """
    unknown = sorted(set(values) - declared)
    if unknown:
        return f"metric ids {unknown} are not declared in info.metrics of {record.component}"
    foreign = sorted(others & set(per_item.columns if per_item is not None else ()) - declared)
    if foreign:
        return (f"obs holds per-item values of {foreign}, metrics {record.component} does not declare "
                "(another metric component reports them)")
    for key, planned, also in (("dataset_id", record.dataset_id, dataset_file_id), ("method_id", record.method_id, None)):
        claimed = uns.get(key)
        if claimed is not None and str(claimed) not in {str(v) for v in (planned, also) if v is not None}:
            return f"uns[{key!r}] is {str(claimed)!r}, but the job scored {key[:-3]} {planned!r}"
    return ""


def _dataset_uns(files: dict[str, str]) -> tuple[dict, list[str]]:
    """``dataset_*`` entries of the first h5ad file of a dataset that has them.

    Returns the entries and a message per file that could not be read: a corrupt dataset file
    costs its metadata (and its dataset's jobs, which fail on it), never the results file. An
    entry larger than :data:`DATASET_UNS_MAX_BYTES` (as declared) is left out, and said: these
    are a dataset's name and descriptions, and a loader wrote them.
    """
    import h5py

    problems = []
    for path in files.values():
        if not str(path).endswith(".h5ad"):
            continue
        try:
            with h5py.File(path, "r") as fh:
                if "uns" not in fh:
                    continue
                out = {}
                for key in fh["uns"]:
                    if key.startswith("dataset_") and isinstance(fh["uns"][key], h5py.Dataset):
                        entry = fh["uns"][key]
                        declared = entry.size * entry.dtype.itemsize
                        if entry.id.get_storage_size() > DATASET_UNS_MAX_BYTES or declared > DATASET_UNS_MAX_BYTES:
                            problems.append(f"{path}: uns['{key}'] declares {format_bytes(declared)}; a dataset's "
                                            f"metadata is read up to {format_bytes(DATASET_UNS_MAX_BYTES)}: left out")
                            continue
                        value = entry[()]
                        out[key] = value.decode() if isinstance(value, bytes) else _clean(value)
        except (OSError, ValueError, KeyError, TypeError) as err:
            problems.append(f"{path}: cannot read the dataset's uns: {type(err).__name__}: {err}")
            continue
        if out:
            return out, problems
    return {}, problems


def _component_meta(config: ComponentConfig, params: dict, seeds: list | None = None) -> dict:
    refs = config.data.get("references") or {}
    return {
        "id": config.name,
        "label": config.label,
        "summary": config.summary,
        "description": config.description,
        "type": config.type,
        "control": config.control,
        "references": _references(refs),
        "links": config.data.get("links") or {},
        "parameters": params,
        "seeds": list(seeds or []),
        "games": config.games,
        "engines": config.engines,
        "config": shown_path(config.path, config.root),
    }


def _references(refs: dict) -> dict[str, list]:
    """A component's (or metric's) ``references`` as lists of DOIs and BibTeX entries."""
    return {key: list(np.atleast_1d(refs.get(key, []))) for key in ("doi", "bibtex")}


def source_file_entry(f: DataFile) -> dict[str, Any]:
    """A public file a dataset was made from, as ``results.json`` lists it (``datasets[].source_files``)."""
    origin = f.url if f.derive is None else [d.url for _, d in f.derive.sources]
    return {"path": f.path, "origin": origin, "derived_by": f.derive.function if f.derive else None,
            "sha256": f.sha256, "size": f.size, "license": f.license, "non_commercial": f.non_commercial,
            "citation": f.citation, "source": f.source}


def write_results(task: Task, plan: dict, records: Sequence[JobRecord], outdir: Path, *, engine: str = "local") -> dict:
    """Score, compare and write every results file of a run. Returns the ``results.json`` content."""
    from openpert.results.resampling import bootstrap_ci, compare_to_best

    outdir = Path(outdir)
    # The configs the task has read, not read again per job.
    configs = {e["config"]: task.config_at(e["config"]) for e in [*plan["methods"], *plan["metrics"]]}
    methods = [_component_meta(configs[e["config"]], e["params"], e.get("seeds")) for e in plan["methods"]]
    controls = {m["id"]: m["control"] for m in methods}
    metric_rows: list[dict] = []
    maximize: dict[str, bool] = {}
    chance: dict[str, float] = {}
    metric_configs = []
    for entry in plan["metrics"]:
        config = configs[entry["config"]]
        metric_configs.append(config.public_dict())
        refs = config.data.get("references") or {}
        for m in config.metrics:
            maximize[m["name"]] = bool(m.get("maximize", True))
            if m.get("chance") is not None:
                chance[m["name"]] = float(m["chance"])
            metric_rows.append({
                "id": m["name"], "component": config.name, "label": m.get("label", m["name"]),
                "summary": m.get("summary", ""), "description": m.get("description", ""),
                "min": _clean(m.get("min")), "max": _clean(m.get("max")), "maximize": bool(m.get("maximize", True)),
                "chance": _clean(m.get("chance")),
                "references": _references(m.get("references") or refs),
                "parameters": entry["params"], "engines": config.engines, "links": config.data.get("links") or {},
                "config": shown_path(config.path, config.root),
            })

    headline_flags: list[QCFlag] = []
    try:
        headline = task.headline_metrics
    except ConfigError as err:
        # A malformed list must not cost the run its results: every metric counts, and QC says why.
        headline = None
        headline_flags.append(QCFlag("headline_metrics_invalid", str(err)))
    if headline is None:
        # An undeclared split must not hide a metric from the aggregate: every metric counts, and the
        # results say the task has not chosen its headline.
        headline = sorted(maximize)
        if not headline_flags:
            headline_flags.append(QCFlag("headline_metrics_undeclared", "task_info.yaml declares no headline_metrics: "
                                         "every metric enters the aggregate scores"))
    for row in metric_rows:
        row["headline"] = row["id"] in set(headline)

    # What each dataset's own files say of it (read once): a score may carry the id its dataset's files give.
    dataset_uns = {ds["id"]: _dataset_uns(ds["files"]) for ds in plan["datasets"]}
    metric_ids_of = {c.name: {m["name"] for m in c.metrics} for c in task.of_type("metric")}
    task_metric_ids = set().union(*metric_ids_of.values())
    # A failed method's metrics never run; its own failure says why, so their records add nothing.
    failed_methods = {(r.dataset_id, r.method_id) for r in records if r.stage == "method" and not r.succeeded}
    records = [r for r in records if not (r.stage == "metric" and (r.dataset_id, r.method_id) in failed_methods)]
    failures = [r for r in records if not r.succeeded]
    raw_rows: list[dict] = []
    seeded_items: dict[tuple[str, str, str], list[pd.Series]] = {}
    score_uns: list[dict] = []
    for rec in records:
        if rec.stage != "metric" or not rec.succeeded:
            continue
        (path,) = rec.outputs.values()
        try:
            raw, per_item, uns = read_score(Path(path))
        except Exception as err:  # a score file is a component's output: any error reading it fails that job only
            reason = str(err) if str(path) in str(err) else f"{path}: {type(err).__name__}: {err}"
            rec.status, rec.reason, rec.exit_code = "failed", reason, -1
            failures.append(rec)
            continue
        problem = score_claims_problem(rec, raw, per_item, uns, declared=metric_ids_of[rec.component],
                                       others=task_metric_ids - metric_ids_of[rec.component],
                                       dataset_file_id=dataset_uns.get(rec.dataset_id, ({}, []))[0].get("dataset_id"))
        if problem:
            rec.status, rec.exit_code, rec.reason = "failed", -1, f"{path}: {problem}"
            failures.append(rec)
            continue
        score_uns.append(_clean({k: v for k, v in uns.items() if not isinstance(v, dict)}))
        for metric_id, value in raw.items():
            raw_rows.append({"dataset_id": rec.dataset_id, "method_id": rec.method_id, "metric_id": metric_id, "raw": value,
                             "seed": rec.seed})
        for column in per_item.columns if per_item is not None else []:
            seeded_items.setdefault((rec.dataset_id, rec.method_id, column), []).append(per_item[column].astype(float))
    # A seeded control's per-item values are the mean over its seeds, item by item.
    items = {key: item_mean(series) for key, series in seeded_items.items()}

    raw_df = pd.DataFrame(raw_rows, columns=["dataset_id", "method_id", "metric_id", "raw", "seed"])
    averaged = average_seeds(raw_df)
    scaled, flags = scale_scores(averaged, controls, maximize, chance)
    flags = headline_flags + flags
    dataset_ids = [d["id"] for d in plan["datasets"]]
    not_run = [(d, e["id"]) for d in dataset_ids for e in plan["methods"] if not runs_on(plan, e, d)]
    dataset_scores, overall = aggregate_scores(scaled, [m["id"] for m in methods], dataset_ids, failed_methods,
                                               headline=headline, not_run=not_run)
    method_types = {m["id"]: m["type"] for m in methods}
    gameability = gameability_table(scaled, controls, method_types, headline,
                                    targets={m["id"]: m.get("games") for m in methods})
    dynamic_range = dynamic_range_table(averaged, scaled, controls, maximize,
                                        range_standard_errors(scaled, controls, items))
    flags += gameability_flags(gameability) + dynamic_range_flags(dynamic_range)
    # What the language-model components asked and got back; answers without a label are flagged.
    llm_usage, usage_problems = usage_table(records)
    flags += usage_problems + abstention_flags(llm_usage) + prompt_too_long_flags(llm_usage)
    provenance = run_provenance(task, plan)
    components_metrics: dict[str, list[str]] = {}
    for row in metric_rows:
        components_metrics.setdefault(row["component"], []).append(row["id"])
    row_provenance = score_provenance(records, provenance, engine, components_metrics)
    scores = []
    for row in scaled.itertuples(index=False):
        values = items.get((row.dataset_id, row.method_id, row.metric_id))
        ci_low = ci_high = None
        n_items = None
        if values is not None:
            boot = bootstrap_ci(values.to_numpy(), n_boot=N_BOOT, seed=BOOTSTRAP_SEED)
            ci_low, ci_high, n_items = boot.low, boot.high, boot.n
        scores.append({"dataset_id": row.dataset_id, "method_id": row.method_id, "metric_id": row.metric_id,
                       "raw": row.raw, "scaled": row.scaled, "scaled_openproblems": row.scaled_openproblems,
                       "ci_low": ci_low, "ci_high": ci_high, "n_items": n_items,
                       "n_seeds": row.n_seeds, "raw_sd": row.raw_sd, "raw_seeds": row.raw_seeds,
                       "headline": row.metric_id in set(headline),
                       "provenance": row_provenance.get((row.dataset_id, row.method_id, row.metric_id), {})})
    scale = [{"dataset_id": d, "metric_id": m, "hi": g["scale_hi"].iloc[0], "lo": g["scale_lo"].iloc[0],
              "lo_method_id": g["scale_lo_method"].iloc[0],
              "positive_method_ids": sorted(g.loc[g["method_id"].map(controls.get) == "positive", "method_id"])}
             for (d, m), g in scaled.groupby(["dataset_id", "metric_id"], sort=True)]

    # Paired tests against the best method; only methods and baselines compete.
    comparisons = []
    contenders = [m["id"] for m in methods if is_ranked(m)]
    for dataset_id in dataset_ids:
        for metric_id in sorted(maximize):
            table = {m: items[(dataset_id, m, metric_id)] for m in contenders if (dataset_id, m, metric_id) in items}
            frame = pd.DataFrame(table)
            # A metric of a subset the dataset has no item of (combinations, when only single
            # perturbations are held out) has no values to compare: no test, not an error.
            if len(table) < 2 or not frame.notna().to_numpy().any():
                continue
            result = compare_to_best(frame, maximize=maximize[metric_id], n_permutations=N_PERMUTATIONS, seed=PERMUTATION_SEED)
            for row in result.to_dict("records"):
                comparisons.append({"dataset_id": dataset_id, "metric_id": metric_id, "method_id": row["method_id"],
                                    "best_method_id": row["best_method_id"], "mean_difference": row["mean_difference"],
                                    "p_value": row["p_value"], "significant": bool(row["significant"]),
                                    "alternative": "two-sided", "n_permutations": N_PERMUTATIONS})

    statistics = {}
    regressions = regression_table(task.info.get("regressions") or [], items, dataset_ids, contenders)
    if regressions:
        statistics["regressions"] = {
            "label": "Performance against item covariates",
            "description": "Ordinary least-squares slope and Pearson correlation of each per-item metric value "
                           f"against a per-item covariate, with {int((1 - 0.05) * 100)}% percentile bootstrap intervals "
                           f"(B = {N_BOOT}, items resampled in pairs).",
            "table": regressions,
        }

    datasets_meta = []
    unreadable = []
    manifest = task_manifest(task.dir)
    # Datasets this run's loaders made (not ready-made ones given with --input, such as the bundled
    # test resources): only they were made from the public files the manifest names.
    made_by = {r.dataset_id: r.component for r in records if r.stage == "dataset" and r.succeeded}
    # A dataset cut from a build read the build's files too (through the build job it followed).
    jobs = {j["id"]: j for j in plan.get("jobs", [])}
    built_from = {j["dataset_id"]: jobs[j["after"]]["dataset_id"] for j in jobs.values()
                  if j["stage"] == "dataset" and j.get("after") in jobs and jobs[j["after"]]["stage"] == "build"}
    for ds in plan["datasets"]:
        uns, problems = dataset_uns[ds["id"]]
        meta = {"dataset_id": ds["id"], **uns}
        meta["dataset_id"] = ds["id"]
        if ds["id"] in made_by:
            meta["made_by"] = made_by[ds["id"]]
            readers = {ds["id"], built_from.get(ds["id"], ds["id"])}
            sources = [source_file_entry(f) for f in manifest if any(f.read_by(r) for r in readers)]
            if sources:
                meta["source_files"] = sources
        datasets_meta.append(meta)
        unreadable += [QCFlag("dataset_file_unreadable", m, dataset_id=ds["id"]).to_dict() for m in problems]

    # A component's limits: its labels' in order, a later label's value winning.
    limits = {entry["id"]: {key: value for label in entry["labels"] for key, value in plan["resources"].get(label, {}).items()}
              for entry in [*plan["methods"], *plan["metrics"]]}
    resources = [{"job_id": r.job_id, "stage": r.stage, "component": r.component, "dataset_id": r.dataset_id,
                  "method_id": r.method_id, "seed": r.seed, "metric_component": r.component if r.stage == "metric" else None,
                  "status": r.status, "cached": r.cached, "exit_code": r.exit_code, "duration_s": r.duration_s,
                  "peak_memory_mb": r.peak_memory_mb, "time_limit_s": limits.get(r.component, {}).get("time_s"),
                  "memory_limit_mb": limits.get(r.component, {}).get("memory_mb"), "sandbox": r.sandbox} for r in records]
    results = {
        "schema_version": SCHEMA_VERSION,
        "openpert_version": __version__,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "engine": engine,
        "provenance": provenance,
        "task": {k: task.info.get(k) for k in ("name", "label", "summary", "description", "motivation", "references", "links")}
        | {"name": task.name},
        "datasets": datasets_meta,
        "methods": methods,
        "metrics": metric_rows,
        "headline_metrics": list(headline),
        "diagnostic_metrics": [m for m in maximize if m not in set(headline)],
        "scale": {"convention": "strict", "description": SCALE_SENTENCE, "bounds": scale},
        "scores": scores,
        "gameability": gameability,
        "dynamic_range": dynamic_range,
        "dataset_scores": dataset_scores.to_dict("records"),
        "overall": overall.to_dict("records"),
        "comparisons": comparisons,
        "failures": [{"job_id": r.job_id, "stage": r.stage, "component": r.component, "dataset_id": r.dataset_id,
                      "method_id": r.method_id, "exit_code": r.exit_code, "reason": r.reason, "log": r.log} for r in failures],
        "qc": [f.to_dict() for f in flags] + unreadable,
        "llm_usage": llm_usage,
        "llm_abstention_threshold": ABSTENTION_THRESHOLD,
        "skipped": plan.get("skipped", []),
        "config_errors": [e.to_dict() for e in task.config_errors],
        "resources": resources,
        "statistics": statistics,
    }
    results = _clean(results)
    results.update(_clean(collect_reproduction(results, task.dir, outdir)))
    # Ranks, standings and the lead: computed once, by the results model, and stored with the scores.
    results = complete(results)
    write_text_atomic(outdir / "results.json", json.dumps(results, indent=2))
    extra = run_task_analysis(task, outdir, plan["datasets"])
    if extra:
        results["statistics"].update(_clean(extra.get("statistics", {})))
        results["qc"].extend(extra.get("qc", []))
        write_text_atomic(outdir / "results.json", json.dumps(results, indent=2))
    write_yaml_atomic(outdir / "task_info.yaml", _clean(task.info))
    write_yaml_atomic(outdir / "score_uns.yaml", score_uns)
    write_yaml_atomic(outdir / "method_configs.yaml", _clean([configs[e["config"]].public_dict() for e in plan["methods"]]))
    write_yaml_atomic(outdir / "metric_configs.yaml", _clean(metric_configs))
    write_yaml_atomic(outdir / "dataset_uns.yaml", datasets_meta)
    write_text_atomic(outdir / "trace.tsv", _trace_tsv(records))
    # The values each score is the mean of: `openpert compare` pairs two runs on them.
    write_item_scores(outdir / ITEM_SCORES, items)
    return results


def range_standard_errors(scaled: pd.DataFrame, controls: dict[str, str | None],
                          items: dict[tuple[str, str, str], pd.Series]) -> dict[tuple[str, str], tuple[float, str]]:
    """Bootstrap standard error of the ceiling-minus-strongest-negative difference, per (dataset, metric).

    Uses the per-item values of the metric (the ``obs`` column named by its id in the score files),
    paired over the items both controls scored when they share them (the difference of the means
    is then the mean of the differences, and pairing removes the items' common difficulty), else
    combined as ``sqrt(se_ceiling² + se_negative²)``. Pairs without per-item values are absent:
    :func:`openpert.results.scoring.dynamic_range_table` falls back to the seed standard deviation.
    """
    from openpert.results.resampling import bootstrap_ci

    out: dict[tuple[str, str], tuple[float, str]] = {}
    role = scaled["method_id"].map(controls.get)
    for (dataset_id, metric_id), group in scaled.groupby(["dataset_id", "metric_id"], sort=True):
        ceilings = group.loc[role.loc[group.index] == "ceiling", "method_id"].tolist()
        negative = group["scale_lo_method"].dropna()
        if not ceilings or negative.empty:
            continue
        ceiling_values = [items[(dataset_id, c, metric_id)] for c in ceilings if (dataset_id, c, metric_id) in items]
        neg_values = items.get((dataset_id, str(negative.iloc[0]), metric_id))
        if len(ceiling_values) != len(ceilings) or neg_values is None:
            continue
        ceiling = item_mean(ceiling_values)
        paired = pd.concat([ceiling.rename("c"), neg_values.rename("n")], axis=1, join="inner").dropna()
        if len(paired) >= 2 and ceiling.index.is_unique and neg_values.index.is_unique:
            diff = (paired["c"] - paired["n"]).to_numpy()
            out[(dataset_id, metric_id)] = (bootstrap_ci(diff, n_boot=N_BOOT, seed=BOOTSTRAP_SEED).se, "bootstrap_paired")
        else:
            se_c = bootstrap_ci(ceiling.to_numpy(), n_boot=N_BOOT, seed=BOOTSTRAP_SEED).se
            se_n = bootstrap_ci(neg_values.to_numpy(), n_boot=N_BOOT, seed=BOOTSTRAP_SEED).se
            out[(dataset_id, metric_id)] = (math.sqrt(se_c**2 + se_n**2), "bootstrap")
    return out


def score_provenance(records: Sequence[JobRecord], run: dict, engine: str,
                     metric_ids: dict[str, list[str]]) -> dict[tuple[str, str, str], dict]:
    """Provenance of each ``scores`` row: the method and metric jobs behind it and where they ran.

    A row's method jobs are one per seed replicate; its metric jobs those of the metric component
    that reported the row's metric. Code version, commit and dirty flag, packages and host come from
    the job records (a resumed run may reuse jobs of an earlier commit, and then says so), with the
    run's own values for an engine that did not record them.

    Parameters
    ----------
    records
        The run's job records.
    run
        The run-level ``provenance`` object (:func:`openpert.results.provenance.run_provenance`).
    engine
        The engine of the run.
    metric_ids
        Metric component name -> the metric ids it reports.
    """
    by_method: dict[tuple[str, str], list[JobRecord]] = {}
    for r in records:
        if r.stage == "method":
            by_method.setdefault((r.dataset_id, r.method_id), []).append(r)
    out: dict[tuple[str, str, str], dict] = {}
    for r in records:
        if r.stage != "metric" or not r.succeeded:
            continue
        method_jobs = sorted(by_method.get((r.dataset_id, r.method_id), []), key=lambda j: (j.seed is None, j.seed or 0))
        metric_jobs = [r]
        for metric_id in metric_ids.get(r.component, []):
            key = (r.dataset_id, r.method_id, metric_id)
            entry = out.setdefault(key, {"method_jobs": [], "metric_jobs": []})
            entry["method_jobs"] = [_job_provenance(j, run, engine) for j in method_jobs]
            entry["metric_jobs"].extend(_job_provenance(j, run, engine) for j in metric_jobs)
    for entry in out.values():
        entry["metric_jobs"].sort(key=lambda j: (j["seed"] is None, j["seed"] or 0))
        entry["seeds"] = [j["seed"] for j in entry["method_jobs"] if j["seed"] is not None]
        entry["wall_time_s"] = _total([j["duration_s"] for j in entry["method_jobs"] + entry["metric_jobs"]])
        entry["peak_memory_mb"] = _peak([j["peak_memory_mb"] for j in entry["method_jobs"] + entry["metric_jobs"]])
    return out


def _job_provenance(record: JobRecord, run: dict, engine: str) -> dict:
    env = record.provenance or {}
    return {
        "job_id": record.job_id, "component": record.component, "seed": record.seed, "params": record.params,
        "code_version": env.get("code_version", run.get("code_version")),
        "commit": env.get("commit", run.get("commit")), "dirty": env.get("dirty", run.get("dirty")),
        "component_digest": record.component_digest or run.get("component_digests", {}).get(record.component),
        "dataset_digest": record.dataset_digest or run.get("dataset_digests", {}).get(record.dataset_id),
        "engine": record.engine or engine, "sandbox": record.sandbox, "cached": record.cached,
        "packages": env.get("packages", run.get("packages")), "host": env.get("host", run.get("host")),
        "duration_s": record.duration_s, "peak_memory_mb": record.peak_memory_mb,
        # limits["cpus"] is also the job's numerical threads (openpert.run.sandbox.thread_environment).
        "limits": record.limits or None,
    }


def _total(values: list) -> float | None:
    known = [float(v) for v in values if v is not None]
    return round(sum(known), 4) if known else None


def _peak(values: list) -> float | None:
    known = [float(v) for v in values if v is not None]
    return max(known) if known else None


def regression_table(specs: Sequence[dict], items: dict, dataset_ids: Sequence[str], methods: Sequence[str]) -> list[dict]:
    """Regress per-item metric values on per-item covariates, as a task's ``regressions`` ask.

    Parameters
    ----------
    specs
        ``task_info.yaml``'s ``regressions``: ``[{metric: <metric id>, covariate: <obs column>}]``.
        The covariate is read from any score file of the same dataset and method.
    items
        (dataset, method, column) -> per-item values.
    """
    from openpert.results.resampling import regression_with_ci

    rows = []
    for spec in specs:
        metric, covariate = spec.get("metric"), spec.get("covariate")
        if not metric or not covariate:
            raise ValueError(f"task_info.yaml: regressions entries need 'metric' and 'covariate', got {spec!r}")
        for dataset_id in dataset_ids:
            for method_id in methods:
                y, x = items.get((dataset_id, method_id, metric)), items.get((dataset_id, method_id, covariate))
                if x is None or y is None:
                    continue
                pair = pd.concat([x.rename("x"), y.rename("y")], axis=1, join="inner").dropna()
                if len(pair) < 3:
                    continue
                fit = regression_with_ci(pair["x"].to_numpy(), pair["y"].to_numpy(), n_boot=N_BOOT, seed=BOOTSTRAP_SEED)
                rows.append({"dataset_id": dataset_id, "method_id": method_id, "metric_id": metric, "covariate": covariate,
                             "n_items": len(pair), "slope": fit.slope.estimate, "slope_low": fit.slope.low,
                             "slope_high": fit.slope.high, "correlation": fit.correlation.estimate,
                             "correlation_low": fit.correlation.low, "correlation_high": fit.correlation.high})
    return rows


def format_summary(results: dict, *, width: int = 24) -> str:
    """A plain-text table per dataset: each method's raw metric values with 95% CIs and its score.

    Methods are sorted by their dataset score; controls are marked with their role; a failed method
    says so in the score column. Columns widen to their longest entry: no method or metric name is
    cut. Components left out for a malformed config are listed first, so that nobody mistakes their
    absence from the tables for a run that did not include them.
    """
    metrics = [m["id"] for m in results["metrics"]]
    roles = {m["id"]: m.get("control") for m in results["methods"]}
    cells = {(s["dataset_id"], s["method_id"], s["metric_id"]): s for s in results["scores"]}
    widths = {m: max(24, len(m)) for m in metrics}
    lines = []
    for error in results.get("config_errors", []):
        lines.append(f"config error, {error.get('type') or 'component'} {error.get('component')} left out: {error.get('reason')}")
    for ds in results["datasets"]:
        dataset_id = ds["dataset_id"]
        rows = sorted((r for r in results["dataset_scores"] if r["dataset_id"] == dataset_id),
                      key=lambda r: -(r["score"] if r["score"] is not None else -1))
        names = {r["method_id"]: r["method_id"] + (f" ({roles[r['method_id']]})" if roles.get(r["method_id"]) else "")
                 for r in rows}
        name_width = max([width, *(len(n) + 1 for n in names.values())])
        lines.append(f"{dataset_id}")
        lines.append("  " + f"{'method':<{name_width}}{'score':>7}  " + "  ".join(f"{m:>{widths[m]}}" for m in metrics))
        for row in rows:
            failed = row["status"] == "failed"
            values = []
            for metric_id in metrics:
                cell = cells.get((dataset_id, row["method_id"], metric_id))
                if cell is None or cell["raw"] is None:
                    values.append(f"{'failed' if failed else '-':>{widths[metric_id]}}")
                elif cell["ci_low"] is not None:
                    values.append(f"{cell['raw']:>8.3f} [{cell['ci_low']:.3f}, {cell['ci_high']:.3f}]".rjust(widths[metric_id]))
                else:
                    values.append(f"{cell['raw']:>{widths[metric_id]}.3f}")
            # A failed method's score is the floor it is ranked at, not a result: the column says "failed".
            score = "failed" if failed else f"{row['score']:.3f}" if row["score"] is not None else "-"
            lines.append("  " + f"{names[row['method_id']]:<{name_width}}{score:>7}  " + "  ".join(values))
    # A model whose answers could not be read is scored by the fallback, and a judge may have been talked
    # up: both are said under the tables, not only in results.json.
    lines += [f"QC {q['flag']}: {q['message']}" for q in results.get("qc", [])
              if q.get("flag") in ("llm_abstentions", "llm_judge_abstentions", "graded_text_instruction_like")]
    return "\n".join(lines)


def run_task_analysis(task: Task, outdir: Path, datasets: Sequence[dict]) -> dict:
    """Task-specific statistics from ``src/<task>/analysis.py``'s ``task_statistics(outdir, datasets)``.

    A task may ship such a module for analyses that need more than per-item metric values (e.g.
    comparisons across datasets of one task). It is given the datasets the run scored (``{"id",
    "files": {format: path}}``, those its dataset jobs made included, which plan.json cannot list).
    It runs after ``results.json`` is first written, so a failing analysis loses nothing: it
    becomes a QC flag with the error, and the run goes on.
    """
    from openpert.run.task_code import TaskCodeError, call_task_function

    path = task.dir / "analysis.py"
    if not path.is_file():
        return {}
    try:
        # The task's own code runs in a child process: the harness never imports it.
        stats = call_task_function(task.dir, "analysis", "task_statistics", [outdir], {"datasets": list(datasets)})
    except TaskCodeError as err:  # the analysis is a task's own code: report its failure, keep the scores
        message = f"{path}: task_statistics failed: {err}"
        print(message, file=sys.stderr)
        return {"qc": [QCFlag("analysis_failed", message).to_dict()]}
    if not isinstance(stats, dict):
        message = f"{path}: task_statistics returned {type(stats).__name__}, not a dict"
        return {"qc": [QCFlag("analysis_failed", message).to_dict()]}
    return {"statistics": stats}


def _trace_tsv(records: Sequence[JobRecord]) -> str:
    buf = io.StringIO()
    fields = ["job_id", "stage", "component", "dataset_id", "method_id", "status", "exit", "cached", "duration_s",
              "peak_memory_mb", "reason"]
    writer = csv.writer(buf, delimiter="\t", lineterminator="\n")
    writer.writerow(fields)
    for r in sorted(records, key=lambda r: r.job_id):
        writer.writerow([r.job_id, r.stage, r.component, r.dataset_id, r.method_id or "", r.status,
                         "" if r.exit_code is None else r.exit_code, str(r.cached).lower(),
                         "" if r.duration_s is None else r.duration_s,
                         "" if r.peak_memory_mb is None else r.peak_memory_mb, r.reason.replace("\t", " ").replace("\n", " ")])
    return buf.getvalue()
