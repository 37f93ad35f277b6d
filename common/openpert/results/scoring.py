"""Scale raw metric values between controls, aggregate them, and flag what looks wrong.

For each dataset and metric, ``hi`` is the mean raw value of the positive controls and ``lo`` that of
the negative controls; ``scaled = (raw - lo) / (hi - lo)``. The formula handles metrics to minimise
as they are (there ``hi < lo``). Scaled values are kept unclipped; only the aggregate clips them to
[0, 1] before averaging, so that one metric cannot dominate and the raw picture stays visible.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

#: Share of scaled values outside [0, 1] above which a metric is flagged (as Open Problems does).
OUT_OF_RANGE_SHARE = 0.10


@dataclasses.dataclass
class QCFlag:
    """A quality-control finding about the scores of a task."""

    flag: str
    message: str
    dataset_id: str | None = None
    metric_id: str | None = None
    method_id: str | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def scale_scores(
    raw: pd.DataFrame,
    controls: Mapping[str, str | None],
    maximize: Mapping[str, bool],
) -> tuple[pd.DataFrame, list[QCFlag]]:
    """Scale raw scores between the positive and negative controls of each dataset and metric.

    Parameters
    ----------
    raw
        Long table with columns ``dataset_id, method_id, metric_id, raw``.
    controls
        Method id -> ``"positive"``, ``"negative"``, ``"baseline"`` or ``None`` (a method).
    maximize
        Metric id -> whether higher is better (used for QC only: the scaling itself needs no
        direction).

    Returns
    -------
    scaled
        ``raw`` with a ``scaled`` column (NaN where scaling is impossible).
    flags
        QC flags: missing or degenerate controls, controls on the wrong side of each other, metrics
        with more than 10% of scaled values outside [0, 1].
    """
    out = raw.copy()
    out["scaled"] = np.nan
    flags: list[QCFlag] = []
    role = out["method_id"].map(lambda m: controls.get(m))
    for (dataset_id, metric_id), group in out.groupby(["dataset_id", "metric_id"], sort=True):
        roles = role.loc[group.index]
        if group["raw"].isna().all():
            # Every method scored NaN: the metric does not apply to this dataset (e.g. it has no items
            # of the kind the metric scores). Nothing to scale, and nothing is wrong with the controls.
            flags.append(QCFlag("not_applicable", f"{metric_id} has no value on {dataset_id} for any method",
                                dataset_id=dataset_id, metric_id=metric_id))
            continue
        pos = group.loc[roles == "positive", "raw"].dropna()
        neg = group.loc[roles == "negative", "raw"].dropna()
        if pos.empty or neg.empty:
            missing = "positive" if pos.empty else "negative"
            flags.append(QCFlag("missing_control", f"no {missing} control scored on {dataset_id}/{metric_id}: scaled scores are missing",
                                dataset_id=dataset_id, metric_id=metric_id))
            continue
        hi, lo = float(pos.mean()), float(neg.mean())
        if np.isclose(hi, lo, rtol=0, atol=1e-12):
            flags.append(QCFlag("degenerate_controls", f"positive and negative controls score the same ({hi:g}) on {dataset_id}/{metric_id}: scaled scores are missing",
                                dataset_id=dataset_id, metric_id=metric_id))
            continue
        out.loc[group.index, "scaled"] = (group["raw"] - lo) / (hi - lo)
        sign = 1.0 if maximize.get(metric_id, True) else -1.0
        worst_pos = pos.idxmin() if sign > 0 else pos.idxmax()
        best_neg = neg.idxmax() if sign > 0 else neg.idxmin()
        if sign * (out.at[worst_pos, "raw"] - out.at[best_neg, "raw"]) < 0:
            flags.append(QCFlag(
                "control_misplaced",
                f"positive control {out.at[worst_pos, 'method_id']} ({out.at[worst_pos, 'raw']:g}) scores worse than "
                f"negative control {out.at[best_neg, 'method_id']} ({out.at[best_neg, 'raw']:g}) on {dataset_id}/{metric_id}",
                dataset_id=dataset_id, metric_id=metric_id, method_id=str(out.at[worst_pos, "method_id"]),
            ))
    for metric_id, group in out.groupby("metric_id", sort=True):
        values = group["scaled"].dropna()
        if values.empty:
            continue
        share = float(((values < 0) | (values > 1)).mean())
        if share > OUT_OF_RANGE_SHARE:
            flags.append(QCFlag("scaled_out_of_range", f"{share:.0%} of scaled values of {metric_id} fall outside [0, 1]",
                                metric_id=metric_id))
    return out, flags


def aggregate_scores(
    scaled: pd.DataFrame,
    methods: Iterable[str],
    datasets: Iterable[str],
    failed: Iterable[tuple[str, str]] = (),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mean scaled score per method and dataset, and overall.

    Parameters
    ----------
    scaled
        Output of :func:`scale_scores`.
    methods, datasets
        Every method and dataset of the run (a method with no score row on a dataset scores 0).
    failed
        ``(dataset_id, method_id)`` pairs whose method job failed: they score 0 and are marked failed.

    Returns
    -------
    dataset_scores
        Columns ``dataset_id, method_id, score, status``: the mean over metrics of the scaled values
        clipped to [0, 1]. Metrics whose scaled value is missing for every method of the dataset
        (no controls) are left out; a metric a method lacks while others have it counts 0.
    overall
        Columns ``method_id, score, status``: the mean over datasets, best first.
    """
    methods, datasets = list(methods), list(datasets)
    failed = set(failed)
    rows = []
    for dataset_id in datasets:
        on_dataset = scaled[scaled["dataset_id"] == dataset_id]
        scalable = sorted(on_dataset.loc[on_dataset["scaled"].notna(), "metric_id"].unique())
        for method_id in methods:
            if (dataset_id, method_id) in failed:
                rows.append((dataset_id, method_id, 0.0, "failed"))
                continue
            if not scalable:
                rows.append((dataset_id, method_id, np.nan, "succeeded"))
                continue
            mine = on_dataset[on_dataset["method_id"] == method_id].set_index("metric_id")["scaled"]
            values = mine.reindex(scalable).fillna(0.0).clip(0.0, 1.0)
            rows.append((dataset_id, method_id, float(values.mean()), "succeeded"))
    dataset_scores = pd.DataFrame(rows, columns=["dataset_id", "method_id", "score", "status"])
    overall = (
        dataset_scores.groupby("method_id", sort=False)
        .agg(score=("score", lambda s: float(s.mean()) if s.notna().any() else np.nan),
             status=("status", lambda s: "failed" if (s == "failed").any() else "succeeded"))
        .reset_index()
    )
    overall = overall.sort_values(["score", "method_id"], ascending=[False, True], na_position="last").reset_index(drop=True)
    return dataset_scores, overall[["method_id", "score", "status"]]
