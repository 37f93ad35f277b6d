"""Scaling between controls, aggregation and QC flags against hand-computed values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from openpert.results.scoring import aggregate_scores, scale_scores

CONTROLS = {"pos": "positive", "neg": "negative", "base": "baseline", "m1": None, "m2": None}


def table(rows):
    return pd.DataFrame(rows, columns=["dataset_id", "method_id", "metric_id", "raw"])


def test_scaling_by_hand():
    raw = table([
        ("d", "pos", "acc", 0.9), ("d", "neg", "acc", 0.5), ("d", "m1", "acc", 0.8), ("d", "m2", "acc", 0.95),
        ("d", "pos", "err", 1.0), ("d", "neg", "err", 3.0), ("d", "m1", "err", 2.5), ("d", "m2", "err", 4.0),
    ])
    scaled, flags = scale_scores(raw, CONTROLS, {"acc": True, "err": False})
    s = scaled.set_index(["method_id", "metric_id"])["scaled"]
    assert s[("m1", "acc")] == pytest.approx((0.8 - 0.5) / 0.4)  # 0.75
    assert s[("m2", "acc")] == pytest.approx(1.125)  # above the positive control: kept unclipped
    assert s[("m1", "err")] == pytest.approx((2.5 - 3.0) / (1.0 - 3.0))  # 0.25: minimised metrics need no flip
    assert s[("m2", "err")] == pytest.approx(-0.5)
    assert s[("pos", "err")] == 1.0 and s[("neg", "err")] == 0.0
    # one of the four scaled values of each metric (25% > 10%) falls outside [0, 1]
    assert sorted(f.metric_id for f in flags if f.flag == "scaled_out_of_range") == ["acc", "err"]
    dataset_scores, overall = aggregate_scores(scaled, ["pos", "neg", "m1", "m2"], ["d"])
    ds = dataset_scores.set_index("method_id")["score"]
    assert ds["m1"] == pytest.approx((0.75 + 0.25) / 2)
    assert ds["m2"] == pytest.approx((1.0 + 0.0) / 2)  # clipped in the aggregate only
    assert list(overall["method_id"][:1]) == ["pos"]


def test_missing_and_degenerate_controls_are_flagged():
    raw = table([
        ("d1", "pos", "acc", 0.7), ("d1", "m1", "acc", 0.6),  # no negative control
        ("d2", "pos", "acc", 0.5), ("d2", "neg", "acc", 0.5), ("d2", "m1", "acc", 0.6),  # hi == lo
    ])
    scaled, flags = scale_scores(raw, CONTROLS, {"acc": True})
    assert scaled["scaled"].isna().all()
    kinds = {(f.dataset_id, f.flag) for f in flags}
    assert ("d1", "missing_control") in kinds and ("d2", "degenerate_controls") in kinds
    dataset_scores, _ = aggregate_scores(scaled, ["pos", "neg", "m1"], ["d1", "d2"])
    assert dataset_scores["score"].isna().all()


def test_misplaced_control_and_failures():
    raw = table([("d", "pos", "acc", 0.4), ("d", "neg", "acc", 0.6), ("d", "m1", "acc", 0.5),
                 ("d", "pos", "err", 1.0), ("d", "neg", "err", 2.0), ("d", "m1", "err", 1.5)])
    scaled, flags = scale_scores(raw, CONTROLS, {"acc": True, "err": False})
    misplaced = [f for f in flags if f.flag == "control_misplaced"]
    assert [f.metric_id for f in misplaced] == ["acc"] and misplaced[0].method_id == "pos"
    dataset_scores, overall = aggregate_scores(scaled, ["pos", "neg", "m1", "m2"], ["d"], failed=[("d", "m2")])
    row = dataset_scores.set_index("method_id").loc["m2"]
    assert row["status"] == "failed" and row["score"] == 0.0
    assert overall.set_index("method_id").loc["m2", "status"] == "failed"
    # a method without a score on a scalable metric counts 0 there
    dataset_scores, _ = aggregate_scores(scaled[~((scaled.method_id == "m1") & (scaled.metric_id == "err"))], ["m1"], ["d"])
    assert dataset_scores["score"].iloc[0] == pytest.approx(np.clip((0.5 - 0.6) / (0.4 - 0.6), 0, 1) / 2)


def test_metric_without_values_on_a_dataset_is_not_applicable():
    raw = table([("d", "pos", "acc", np.nan), ("d", "neg", "acc", np.nan), ("d", "m1", "acc", np.nan),
                 ("d", "pos", "sim", 1.0), ("d", "neg", "sim", 0.0), ("d", "m1", "sim", 0.5)])
    scaled, flags = scale_scores(raw, CONTROLS, {"acc": True, "sim": True})
    assert [(f.flag, f.metric_id) for f in flags] == [("not_applicable", "acc")]
    dataset_scores, _ = aggregate_scores(scaled, ["m1"], ["d"])
    assert dataset_scores["score"].iloc[0] == pytest.approx(0.5)  # only the metric that applies counts
