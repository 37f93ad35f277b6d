"""Two synthetic runs of one task whose differences are known, for the archive and compare tests.

Six datasets of 40 items, one headline metric (``accuracy``, to maximise), a positive and a negative
control and three methods; the later run differs from the earlier one in exactly these ways:

- ``delta`` is added;
- ``alpha``'s code changed (its component digest) and its items rose by 0.3: it swaps ranks with
  ``beta`` (alpha 2 -> 1, beta 1 -> 2), a change far beyond noise;
- ``gamma``'s items moved by +-0.02 in balanced pairs: its scores change, within noise (and its overall
  score moves up on half the datasets and down on the others, within noise too);
- everything else is identical, bit for bit.

Scores are derived from the items as ``results.json`` says: ``raw`` is the mean over items,
``scaled`` is placed between the negative (0) and positive (1) controls, dataset scores are the
clipped scaled values and ``overall`` their mean, ranked over the methods.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from openpert.results.item_scores import ITEM_SCORES, write_item_scores

DATASETS = [f"d{i}" for i in range(1, 7)]
N_ITEMS = 40
METHODS = {"truth": "positive", "noise": "negative", "alpha": None, "beta": None, "gamma": None}
OLD_CREATED, NEW_CREATED = "2026-11-20T09:05:31+00:00", "2026-11-27T23:12:04+01:00"
OLD_COMMIT, NEW_COMMIT = "a" * 40, "b" * 40


def _item_values(run: str) -> dict[tuple[str, str, str], pd.Series]:
    rng = np.random.default_rng(11)
    items = {}
    index = [f"item{i:02d}" for i in range(N_ITEMS)]
    for k, dataset in enumerate(DATASETS):
        base = {"truth": 0.95, "noise": 0.1, "alpha": 0.45, "beta": 0.6, "gamma": 0.3, "delta": 0.5}
        values = {m: np.clip(b + rng.normal(0, 0.05, N_ITEMS), 0, 1) for m, b in base.items()}
        if run == "new":
            values["alpha"] = values["alpha"] + 0.3
            # Balanced moves: a nonzero mean change far inside the spread of the sign flips.
            wiggle = np.tile([0.02, -0.02], N_ITEMS // 2)
            # ... and one unbalanced item, up on half the datasets and down on the others.
            wiggle[0] += 0.004 if k % 2 == 0 else -0.004
            values["gamma"] = values["gamma"] + wiggle
        for method, v in values.items():
            if method == "delta" and run == "old":
                continue
            items[dataset, method, "accuracy"] = pd.Series(v, index=index)
    return items


def build_run(run: str) -> tuple[dict[str, Any], dict[tuple[str, str, str], pd.Series]]:
    """The ``results.json`` content and per-item values of the ``"old"`` or ``"new"`` run."""
    items = _item_values(run)
    methods = dict(METHODS, **({"delta": None} if run == "new" else {}))
    scores, dataset_scores = [], []
    for dataset in DATASETS:
        raw = {m: float(items[dataset, m, "accuracy"].mean()) for m in methods}
        lo, hi = raw["noise"], raw["truth"]
        for m in methods:
            scaled = (raw[m] - lo) / (hi - lo)
            scores.append({"dataset_id": dataset, "method_id": m, "metric_id": "accuracy", "raw": raw[m],
                           "scaled": scaled, "n_items": N_ITEMS, "n_seeds": 1, "raw_seeds": [], "headline": True})
            dataset_scores.append({"dataset_id": dataset, "method_id": m, "score": min(max(scaled, 0.0), 1.0),
                                   "status": "succeeded"})
    overall = []
    for m in methods:
        overall.append({"method_id": m, "score": float(np.mean([r["score"] for r in dataset_scores if r["method_id"] == m])),
                        "status": "succeeded", "rank": None})
    ranked = sorted((r for r in overall if methods[r["method_id"]] is None), key=lambda r: -r["score"])
    for i, r in enumerate(ranked, 1):
        r["rank"] = i
    for r in dataset_scores:
        r["rank"] = None
    digests = {m: f"sha256:{m}-v1" for m in methods}
    digests["accuracy"] = "sha256:accuracy-v1"
    if run == "new":
        digests["alpha"] = "sha256:alpha-v2"
    data = {
        "schema_version": 1, "openpert_version": "0.1.0", "engine": "local",
        "created": OLD_CREATED if run == "old" else NEW_CREATED,
        "task": {"name": "toy", "label": "Toy task"},
        "datasets": [{"dataset_id": d, "dataset_name": d.upper()} for d in DATASETS],
        "methods": [{"id": m, "label": m.title(), "type": "control_method" if c else "method", "control": c}
                    for m, c in methods.items()],
        "metrics": [{"id": "accuracy", "component": "accuracy", "label": "Accuracy", "maximize": True, "headline": True}],
        "headline_metrics": ["accuracy"],
        "scores": scores, "dataset_scores": dataset_scores, "overall": overall,
        "provenance": {"commit": OLD_COMMIT if run == "old" else NEW_COMMIT, "dirty": False,
                       "component_digests": digests, "dataset_digests": {d: f"sha256:{d}" for d in DATASETS}},
    }
    return data, items


def write_run(folder: Path, run: str, *, with_items: bool = True) -> Path:
    """Write ``folder/toy/results.json`` (and its ``item_scores.csv.gz``) as ``openpert benchmark`` would."""
    data, items = build_run(run)
    task_dir = Path(folder) / "toy"
    task_dir.mkdir(parents=True, exist_ok=True)
    (task_dir / "results.json").write_text(json.dumps(data, indent=2))
    if with_items:
        write_item_scores(task_dir / ITEM_SCORES, items)
    return Path(folder)
