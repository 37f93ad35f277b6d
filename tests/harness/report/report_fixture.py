"""A realistic task results folder for the website tests.

Two datasets; a positive control, a negative control, a baseline, an adversarial control and a
ceiling; three methods, of which one
runs out of memory (exit 137) on one dataset and one runs out of time (exit 143) on the other; three
metrics, one to minimise; bootstrap CIs, permutation comparisons, QC flags, resources, a failed
metric job, task-specific statistics (one of them pairwise tests between methods) and the run's
provenance; one diagnostic metric, and gameability and dynamic-range tables computed as the schema
says. Scores are derived from the controls exactly as the schema says, so the numbers are
internally consistent. Some texts carry HTML to test escaping, and Markdown to test its rendering;
one dataset name is longer than a label may be.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

#: Text that must never reach a page unescaped.
HOSTILE = '<script>alert("pwned")</script>'

#: The public files of the first dataset: one pinned and non-commercial, one derived and unpinned.
SOURCE_FILES = [
    {"path": "perturbqa/k562-de.csv", "derived_by": None, "sha256": "ab" * 32, "size": 3_200_000,
     "origin": "https://raw.githubusercontent.com/o/r/" + "0" * 40 + "/perturbqa/datasets/k562-de.csv",
     "license": "Genentech Non-Commercial", "non_commercial": True, "citation": "Wu et al. 2025 " + HOSTILE,
     "source": "o/r @ 0000000, perturbqa/datasets/k562-de.csv"},
    {"path": "knowledge_graphs/regulons.tsv", "derived_by": "pertsci.rda_tables:dorothea_regulons", "sha256": None,
     "size": None, "origin": ["https://raw.githubusercontent.com/o/d/" + "1" * 40 + "/data/d.rda", "javascript:alert(1)"],
     "license": "GPL-3.0", "non_commercial": False, "citation": "Garcia-Alonso et al. 2019", "source": ""},
]

#: A dataset name longer than the 30 characters a label may have.
LONG_DATASET_NAME = "RPE1 essential genes, day-7 knockdown, every perturbation"

DATASETS = [
    ("k562", "K562 essential", 412),
    ("rpe1", LONG_DATASET_NAME, 280),
]

#: The task description, in Markdown; no marker of it may show on a page.
TASK_DESCRIPTION = (
    "Given a perturbation and a downstream gene, predict whether knocking the **perturbation** "
    "down changes the gene's expression, and in which *direction*:\n\n"
    "- `de`: is the gene differentially expressed?\n"
    "- `dir`: does it go up or down?\n\n"
    "See [the paper](https://doi.org/10.1016/j.cell.2022.05.013) and "
    "[a crafted link](javascript:alert(1)).\n\n"
    "Tasks with <b>markup</b> & ampersands are shown as text."
)

#: id, label, control kind (None for methods), quality (0 = negative control, 1 = positive).
METHODS: list[tuple[str, str, str | None, float]] = [
    ("ground_truth", "Ground truth", "positive", 1.0),
    ("random_guess", "Random guess", "negative", 0.0),
    ("mean_baseline", "Mean baseline", "baseline", 0.18),
    ("mlp", "MLP", None, 0.62),
    ("gat", "Graph attention", None, 0.60),
    ("big_llm", "Big LLM & co", None, 0.71),
    ("prevalence_game", "Prevalence game", "adversarial", 0.66),
    ("half_cells", "Half the cells", "ceiling", 0.93),
]

#: Metrics shown but not aggregated.
DIAGNOSTIC = ("brier",)

#: id, component, label, maximize, value of the negative and of the positive control.
METRICS: list[tuple[str, str, str, bool, float, float]] = [
    ("macro_auroc", "auroc", "Macro AUROC", True, 0.5, 0.97),
    ("accuracy", "accuracy", "Accuracy", True, 0.25, 0.93),
    ("brier", "calibration", "Brier score", False, 0.25, 0.02),
]

#: (dataset, method) -> (exit code, reason) of method jobs that fail.
METHOD_FAILURES = {
    ("k562", "big_llm"): (137, "memory limit exceeded (peak 2.1 GB > 2.0 GB)"),
    ("rpe1", "gat"): (143, "time limit exceeded (3600 s)"),
}

#: (dataset, method, metric component) -> (exit code, reason) of metric jobs that fail.
METRIC_FAILURES = {
    ("rpe1", "mean_baseline", "calibration"): (1, "ValueError: predicted probabilities do not sum to 1"),
}


def build_results(
    task_name: str = "perturbqa", label: str = "PerturbQA", seed: int = 7, provenance: bool = True
) -> dict[str, Any]:
    """Build the content of a ``results.json``.

    Parameters
    ----------
    task_name, label
        The task's name and label (several tasks can be built for one site).
    seed
        Seed of the noise added to the method values.
    provenance
        Add the optional ``provenance`` block (a file without it shows "not recorded").

    Returns
    -------
    dict
        A ``results.json`` following ``docs/results_json.md``.
    """
    rng = random.Random(seed)
    scores, dataset_scores, comparisons, qc, resources, failures = [], [], [], [], [], []

    for did, _, n_items in DATASETS:
        raw_by_metric: dict[str, dict[str, float]] = {}
        for metric_id, component, _, maximize, neg, pos in METRICS:
            raws: dict[str, float] = {}
            for mid, _, control, quality in METHODS:
                if (did, mid) in METHOD_FAILURES or (did, mid, component) in METRIC_FAILURES:
                    continue
                noise = 0.0 if control in ("positive", "negative") else rng.uniform(-0.02, 0.02)
                raws[mid] = neg + (quality + noise) * (pos - neg)
            # One method edges past the positive control: scaled > 1, which QC must flag.
            if did == "k562" and metric_id == "accuracy":
                raws["mlp"] = pos + 0.01
            raw_by_metric[metric_id] = raws
            lo, hi = raws["random_guess"], raws["ground_truth"]
            for mid, value in raws.items():
                half = 0.015 + 0.01 * rng.random()
                scores.append(
                    {
                        "dataset_id": did,
                        "method_id": mid,
                        "metric_id": metric_id,
                        "raw": value,
                        "scaled": (value - lo) / (hi - lo),
                        "ci_low": value - half,
                        "ci_high": value + half * 0.9,
                        "n_items": n_items,
                    }
                )
            # Compare every scored method with the best one, controls left out.
            sign = 1 if maximize else -1
            candidates = {m: v for m, v in raws.items() if _control(m) is None}
            best = max(candidates, key=lambda m: sign * candidates[m])
            for mid, value in candidates.items():
                if mid == best:
                    continue
                diff = value - candidates[best]
                p_value = 0.41 if abs(diff) < 0.02 * abs(hi - lo) + 0.012 else 0.002
                comparisons.append(
                    {
                        "dataset_id": did,
                        "metric_id": metric_id,
                        "method_id": mid,
                        "best_method_id": best,
                        "mean_difference": diff,
                        "p_value": p_value,
                        "significant": p_value < 0.05,
                        "alternative": "two-sided",
                        "n_permutations": 10000,
                    }
                )

        by_key = {(s["method_id"], s["metric_id"]): s for s in scores if s["dataset_id"] == did}
        for mid, _, _, _ in METHODS:
            if (did, mid) in METHOD_FAILURES:
                dataset_scores.append(
                    {"dataset_id": did, "method_id": mid, "score": 0.0, "status": "failed"}
                )
                continue
            values = [
                min(1.0, max(0.0, by_key[(mid, m[0])]["scaled"]))
                for m in METRICS
                if (mid, m[0]) in by_key and m[0] not in DIAGNOSTIC
            ]
            dataset_scores.append(
                {
                    "dataset_id": did,
                    "method_id": mid,
                    "score": sum(values) / len(values),
                    "status": "succeeded",
                }
            )

        qc.append(
            {
                "dataset_id": did,
                "metric_id": "accuracy",
                "method_id": "mlp" if did == "k562" else None,
                "flag": "scaled_out_of_range" if did == "k562" else "few_items",
                "message": (
                    "17% of scaled values fall outside [0, 1]"
                    if did == "k562"
                    else f"only {n_items} test perturbations; CIs are wide"
                ),
            }
        )

        for mid, _, _, quality in METHODS:
            failed = METHOD_FAILURES.get((did, mid))
            job = f"{did}/{mid}"
            resources.append(
                {
                    "job_id": job,
                    "stage": "method",
                    "component": mid,
                    "dataset_id": did,
                    "method_id": mid,
                    "metric_component": None,
                    "status": "failed" if failed else "succeeded",
                    "cached": mid == "ground_truth",
                    "exit_code": failed[0] if failed else 0,
                    "duration_s": (
                        3600.0 if failed and failed[0] == 143 else round(5 + 900 * quality**3 + rng.random() * 20, 1)
                    ),
                    "peak_memory_mb": (
                        2100.0 if failed and failed[0] == 137 else round(180 + 1500 * quality**2 + rng.random() * 50, 1)
                    ),
                }
            )
            if failed:
                failures.append(
                    {
                        "job_id": job,
                        "stage": "method",
                        "component": mid,
                        "dataset_id": did,
                        "method_id": mid,
                        "exit_code": failed[0],
                        "reason": failed[1],
                        "log": f"logs/{did}/{mid}.log",
                    }
                )
                continue
            for component in dict.fromkeys(m[1] for m in METRICS):
                metric_failed = METRIC_FAILURES.get((did, mid, component))
                mjob = f"{did}/{mid}/{component}"
                resources.append(
                    {
                        "job_id": mjob,
                        "stage": "metric",
                        "component": component,
                        "dataset_id": did,
                        "method_id": mid,
                        "metric_component": component,
                        "status": "failed" if metric_failed else "succeeded",
                        "cached": False,
                        "exit_code": metric_failed[0] if metric_failed else 0,
                        "duration_s": round(1 + rng.random() * 4, 2),
                        "peak_memory_mb": round(90 + rng.random() * 60, 1),
                    }
                )
                if metric_failed:
                    failures.append(
                        {
                            "job_id": mjob,
                            "stage": "metric",
                            "component": component,
                            "dataset_id": did,
                            "method_id": mid,
                            "exit_code": metric_failed[0],
                            "reason": metric_failed[1],
                            "log": f"logs/{did}/{mid}_{component}.log",
                        }
                    )

    overall = []
    for mid, _, _, _ in METHODS:
        rows = [s for s in dataset_scores if s["method_id"] == mid]
        overall.append(
            {
                "method_id": mid,
                "score": sum(r["score"] for r in rows) / len(rows),
                "rank": None,
                "status": "failed" if any(r["status"] == "failed" for r in rows) else "succeeded",
            }
        )
    # Best first, as the results writer lists them; the ranks are the results model's (TaskResults completes the file).
    overall.sort(key=lambda o: (-o["score"], o["method_id"]))

    for r in resources:
        r["sandbox"] = "bubblewrap"
    data = {
        "schema_version": 1,
        "openpert_version": "0.1.0",
        "created": "2026-11-21T10:00:00+00:00",
        "engine": "local",
        "task": {
            "name": task_name,
            "label": label,
            "summary": f"Predict which genetic perturbations change a gene's expression ({label}).",
            "description": TASK_DESCRIPTION,
            "motivation": "Perturbation screens are expensive; models that generalise save experiments.",
            "references": {
                "doi": ["10.1016/j.cell.2022.05.013"],
                "bibtex": [
                    "@article{replogle2022,\n  title={Mapping information-rich genotype-phenotype "
                    "landscapes with genome-scale Perturb-seq},\n  journal={Cell},\n  year={2022}\n}"
                ],
            },
            "links": {
                "repository": "https://github.com/openpert/openpert",
                "documentation": "https://openpert.example.org/docs",
                "issue_tracker": "javascript:alert(1)",
            },
        },
        "datasets": [
            {
                "dataset_id": did,
                "dataset_name": name,
                "dataset_summary": f"Genome-wide CRISPRi screen in {name.split()[0]} cells.",
                "dataset_description": "Essential genes knocked down; expression measured by Perturb-seq.",
                "dataset_reference": "10.1016/j.cell.2022.05.013",
                "dataset_url": "https://gwps.wi.mit.edu/",
                "dataset_organism": "homo_sapiens",
                "dataset_license": "CC BY 4.0",
                "made_by": "perturbqa",
                "source_files": SOURCE_FILES if did == "k562" else [],
            }
            for did, name, _ in DATASETS
        ],
        "methods": [_method(mid, mlabel, control) for mid, mlabel, control, _ in METHODS],
        "metrics": [
            {
                "id": metric_id,
                "component": component,
                "label": mlabel,
                "summary": f"{mlabel} of the predicted classes against the observed ones.",
                "description": f"{mlabel}, averaged over test perturbations.",
                "min": 0,
                "max": 1,
                "maximize": maximize,
                "references": {"doi": [], "bibtex": []},
            }
            for metric_id, component, mlabel, maximize, _, _ in METRICS
        ],
        "scores": scores,
        "dataset_scores": dataset_scores,
        "overall": overall,
        "comparisons": comparisons,
        "failures": failures,
        "qc": qc,
        "resources": resources,
        "statistics": {
            "hardness": {
                "label": "Performance vs perturbation hardness",
                "description": "Slope of per-item correctness against the perturbation's *hardness*.",
                "table": [
                    {"method_id": "mlp", "slope": -0.121, "p_value": 0.003, "n_items": 412.0, "significant": True},
                    {"method_id": "gat", "slope": -0.087, "p_value": 0.04, "n_items": 412.0, "significant": True},
                ],
            },
            "pairwise": {
                "label": "Paired tests between methods",
                "description": "Two-sided sign-flip tests of `method_a` minus `method_b`.",
                "table": _pairwise(rng),
            },
        },
    }
    gameability, dynamic_range = [], []
    for did, _, _ in DATASETS:
        for metric_id, _, _, maximize, _, _ in METRICS:
            cells = {s["method_id"]: s for s in scores if (s["dataset_id"], s["metric_id"]) == (did, metric_id)}
            real = sorted(cells[m]["scaled"] for m, _, control, _ in METHODS if control is None and m in cells)
            median = (real[(len(real) - 1) // 2] + real[len(real) // 2]) / 2
            adversarial = cells["prevalence_game"]["scaled"]
            gameability.append({"dataset_id": did, "metric_id": metric_id, "headline": metric_id not in DIAGNOSTIC,
                                "adversarial_method_id": "prevalence_game", "gameability": adversarial,
                                "method_median": median, "n_methods": len(real), "gameable": adversarial > median})
            span = (1 if maximize else -1) * (cells["half_cells"]["raw"] - cells["random_guess"]["raw"])
            se = 0.004 if metric_id != "brier" else 0.2
            dynamic_range.append({"dataset_id": did, "metric_id": metric_id, "ceiling_method_id": "half_cells",
                                  "ceiling_raw": cells["half_cells"]["raw"], "negative_method_id": "random_guess",
                                  "negative_raw": cells["random_guess"]["raw"], "range": span, "se": se,
                                  "se_source": "bootstrap_paired", "range_se": span / se, "small": span / se < 2,
                                  "reason": ""})
    data["headline_metrics"] = [m[0] for m in METRICS if m[0] not in DIAGNOSTIC]
    data["diagnostic_metrics"] = list(DIAGNOSTIC)
    data["gameability"] = gameability
    data["dynamic_range"] = dynamic_range
    data["scale"] = {
        "convention": "strict",
        "description": "On each dataset and metric, 1 is the positive control's score and 0 the strongest "
                       "negative control's.",
        "bounds": [{"dataset_id": did, "metric_id": m[0], "hi": _raw(scores, did, "ground_truth", m[0]),
                    "lo": _raw(scores, did, "random_guess", m[0]), "lo_method_id": "random_guess",
                    "positive_method_ids": ["ground_truth"]} for did, _, _ in DATASETS for m in METRICS],
    }
    if provenance:
        data["provenance"] = {
            "code_version": "0.1.0",
            "commit": "4234136e0c1f2b3a4d5e6f708192a3b4c5d6e7f8",
            "dirty": True,
            "packages": {"python": "3.11.9", "numpy": "2.1.3", "anndata": "0.11.1"},
            "host": {"cpu_count": 2, "memory_mb": 7940.2, "platform": "Linux-6.8-x86_64", "python": "3.11.9"},
            "component_digests": {m[0]: f"sha256:{i:064x}" for i, m in enumerate(METHODS)},
            "dataset_digests": {did: {"train.h5ad": f"sha256:{i + 100:064x}"} for i, (did, _, _) in enumerate(DATASETS)},
        }
    return data


def _pairwise(rng: random.Random) -> list[dict[str, Any]]:
    """Pairwise tests on K562 accuracy between every two methods and controls (controls included)."""
    ids = [m[0] for m in METHODS]
    quality = {m[0]: m[3] for m in METHODS}
    rows = []
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            diff = (quality[a] - quality[b]) * 0.68 + rng.uniform(-0.005, 0.005)
            p_value = 0.5 if abs(diff) < 0.03 else 0.0001
            rows.append(
                {"dataset_id": "k562", "metric_id": "accuracy", "method_a": a, "method_b": b,
                 "mean_difference": diff, "p_value": p_value, "significant": p_value < 0.05, "n_items": 412}
            )
    return rows


def _raw(scores: list[dict[str, Any]], dataset_id: str, method_id: str, metric_id: str) -> float:
    (value,) = [s["raw"] for s in scores if (s["dataset_id"], s["method_id"], s["metric_id"]) == (dataset_id, method_id, metric_id)]
    return value


def write_results_dir(path: Path, **kwargs: Any) -> Path:
    """Write a task results folder: ``results.json`` and the logs of failed jobs.

    Parameters
    ----------
    path
        The folder to create.
    **kwargs
        Passed to :func:`build_results`.

    Returns
    -------
    Path
        The folder.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    data = build_results(**kwargs)
    (path / "results.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    for failure in data["failures"]:
        log = path / failure["log"]
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"running {failure['job_id']}\n{failure['reason']}\n", encoding="utf-8")
    return path


def _control(method_id: str) -> str | None:
    return next(c for m, _, c, _ in METHODS if m == method_id)


def _method(mid: str, label: str, control: str | None) -> dict[str, Any]:
    parameters = {
        "mlp": {"hidden_dim": 256, "epochs": 20, "learning_rate": 0.001},
        "gat": {"heads": 4, "layers": 2, "dropout": 0.1},
        "big_llm": {"model": "bio-llm-7b", "batch_size": 8, "use_cache": True},
        "random_guess": {"seed": 0},
        "mean_baseline": {"pseudocount": 1.0},
        "ground_truth": {},
        "prevalence_game": {},
        "half_cells": {"seed": 0},
    }[mid]
    summary = {
        "gat": f"Graph attention over a gene network {HOSTILE}.",
        "mlp": "A **multilayer** perceptron on `gene` embeddings.",
    }.get(mid, f"{label}: predicts perturbation effects.")
    return {
        "id": mid,
        "label": label,
        "summary": summary,
        "description": f"{label} is run with the parameters below on *every* dataset:\n\n1. train\n2. predict\n",
        "type": "control_method" if control else "method",
        "control": control,
        "references": {"doi": ["10.48550/arXiv.1710.10903"] if mid == "gat" else [], "bibtex": []},
        "links": {"repository": f"https://github.com/openpert/{mid}"},
        "parameters": parameters,
        "engines": [
            {
                "type": "docker",
                "image": f"ghcr.io/openpert/{mid.replace('_', '-')}:0.1.0",
                "setup": [
                    {"type": "python", "packages": ["numpy", "scikit-learn"]},
                    {"type": "apt", "packages": ["procps"]},
                ],
            },
            {"type": "native"},
        ],
        "config": f"src/perturbqa/{'control_methods' if control else 'methods'}/{mid}/config.vsh.yaml",
    }
