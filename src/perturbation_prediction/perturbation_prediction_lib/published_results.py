"""Open Problems' published OP3 leaderboard, read for the task's Reproduction section.

Open Problems publishes each task's results for its website (openproblems-bio/website,
``results/perturbation_prediction/data/results.json``): a list with one entry per dataset and
method, ``{"dataset_id", "method_id", "metric_values": {metric id: raw value}, "scaled_scores",
"mean_score", "resources"}``. :func:`openproblems_scores` turns the raw values into the records of
``api/published_results.yaml``'s readers; a value Open Problems left out (``null``, ``"NA"``) gives
no record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

__all__ = ["openproblems_scores"]


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(float(value)) else None


def openproblems_scores(path: str | Path, *, datasets: Sequence[str] = ()) -> list[dict]:
    """The raw metric values of Open Problems' published ``results.json``.

    Parameters
    ----------
    path
        The published file.
    datasets
        Open Problems' dataset ids to read (all when empty).

    Returns
    -------
    list of dict
        ``{"dataset", "method", "metric", "value"}`` per dataset, method and metric with a value,
        in the file's order.

    Raises
    ------
    ValueError
        Naming the file, when it is not a list of entries with ``dataset_id``, ``method_id`` and
        a mapping ``metric_values``.
    """
    path = Path(path)
    entries = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a list of results, got {type(entries).__name__}")
    records = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("metric_values"), dict) \
                or not isinstance(entry.get("dataset_id"), str) or not isinstance(entry.get("method_id"), str):
            raise ValueError(f"{path}: entry {i} lacks dataset_id, method_id or a mapping metric_values")
        if datasets and entry["dataset_id"] not in datasets:
            continue
        for metric, raw in entry["metric_values"].items():
            value = _number(raw)
            if value is not None:
                records.append({"dataset": entry["dataset_id"], "method": entry["method_id"], "metric": str(metric),
                                "value": value})
    return records
