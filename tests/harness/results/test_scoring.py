"""Scaling between controls, aggregation and QC flags against hand-computed values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from openpert.results.scoring import NOT_APPLICABLE, aggregate_scores, scale_scores

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


# -- the strict scale, Open Problems' convention, seeds, headline metrics --------------------------

ROLES = {"pos": "positive", "neg_a": "negative", "neg_b": "negative", "base": "baseline", "adv": "adversarial",
         "ceil": "ceiling", "m1": None, "m2": None, "m3": None}
TYPES = {m: ("method" if r is None else "control_method") for m, r in ROLES.items()}


def test_strongest_negative_sets_zero_and_baselines_never_set_the_scale():
    raw = table([
        ("d", "pos", "acc", 0.9), ("d", "neg_a", "acc", 0.5), ("d", "neg_b", "acc", 0.6), ("d", "base", "acc", 0.95),
        ("d", "adv", "acc", 0.2), ("d", "m1", "acc", 0.75),
        ("d", "pos", "err", 1.0), ("d", "neg_a", "err", 3.0), ("d", "neg_b", "err", 2.0), ("d", "base", "err", 0.5),
        ("d", "m1", "err", 1.5),
    ])
    scaled, flags = scale_scores(raw, ROLES, {"acc": True, "err": False})
    s = scaled.set_index(["method_id", "metric_id"])
    # acc: the strongest negative is neg_b (0.6, higher is better); the baseline above 1 changes nothing
    assert s.loc[("m1", "acc"), "scaled"] == pytest.approx((0.75 - 0.6) / (0.9 - 0.6))
    assert s.loc[("neg_a", "acc"), "scaled"] == pytest.approx((0.5 - 0.6) / 0.3)  # below 0 by design
    assert s.loc[("m1", "acc"), "scale_lo_method"] == "neg_b"
    # err: lower is better, so the strongest negative is the lower one (neg_b, 2.0)
    assert s.loc[("m1", "err"), "scaled"] == pytest.approx((1.5 - 2.0) / (1.0 - 2.0))
    assert s.loc[("m1", "err"), "scale_lo"] == 2.0 and s.loc[("m1", "err"), "scale_hi"] == 1.0
    # Open Problems: min and max over positive, negative and baseline controls, 1 - s for minimised metrics;
    # the adversarial control (0.2) is not one of its controls
    assert s.loc[("m1", "acc"), "scaled_openproblems"] == pytest.approx((0.75 - 0.5) / (0.95 - 0.5))
    assert s.loc[("m1", "err"), "scaled_openproblems"] == pytest.approx(1 - (1.5 - 0.5) / (3.0 - 0.5))
    # out-of-range is judged on the real methods only: neg_a below 0 and the baseline above 1 are no flag
    assert not [f for f in flags if f.flag == "scaled_out_of_range"]


def test_openproblems_convention_needs_two_distinct_control_values():
    raw = table([("d", "pos", "acc", 0.9), ("d", "m1", "acc", 0.5)])
    scaled, flags = scale_scores(raw, ROLES, {"acc": True})
    assert scaled["scaled_openproblems"].isna().all()
    assert [f.flag for f in flags] == ["missing_control"]


def test_seed_replicates_are_averaged_before_the_strongest_negative_is_chosen():
    rows = [("d", "neg_a", "acc", v, k) for k, v in enumerate([0.50, 0.54, 0.46, 0.52, 0.48])]
    rows += [("d", "neg_b", "acc", 0.45, None), ("d", "pos", "acc", 1.0, None), ("d", "m1", "acc", 0.6, None)]
    raw = pd.DataFrame(rows, columns=["dataset_id", "method_id", "metric_id", "raw", "seed"])
    from openpert.results.scoring import average_seeds

    averaged = average_seeds(raw).set_index("method_id")
    assert averaged.loc["neg_a", "raw"] == pytest.approx(0.5)
    assert averaged.loc["neg_a", "n_seeds"] == 5
    assert averaged.loc["neg_a", "raw_sd"] == pytest.approx(np.std([0.50, 0.54, 0.46, 0.52, 0.48], ddof=1))
    assert averaged.loc["neg_a", "raw_seeds"] == [0.50, 0.54, 0.46, 0.52, 0.48]
    assert averaged.loc["m1", "n_seeds"] == 1 and np.isnan(averaged.loc["m1", "raw_sd"])
    scaled, _ = scale_scores(averaged.reset_index(), ROLES, {"acc": True})
    m1 = scaled.set_index("method_id").loc["m1"]
    # the lucky draw 0.54 does not set the scale: the mean over seeds (0.5) does
    assert m1["scale_lo"] == pytest.approx(0.5) and m1["scaled"] == pytest.approx(0.2)


def test_a_random_control_counts_at_the_metric_s_chance_level():
    from openpert.results.scoring import average_seeds

    # Five lucky draws average 0.52; an AUROC's exact expectation for any uninformative answer is 0.5.
    rows = [("d", "neg_a", "auc", v, k) for k, v in enumerate([0.50, 0.55, 0.51, 0.53, 0.51])]
    rows += [("d", "prev", "auc", 0.5, None), ("d", "pos", "auc", 1.0, None), ("d", "m1", "auc", 0.51, None)]
    averaged = average_seeds(pd.DataFrame(rows, columns=["dataset_id", "method_id", "metric_id", "raw", "seed"]))
    roles = {"neg_a": "negative", "prev": "adversarial", "pos": "positive", "m1": None}
    scaled = scale_scores(averaged, roles, {"auc": True}, {"auc": 0.5})[0].set_index("method_id")
    assert scaled.loc["neg_a", "raw"] == pytest.approx(0.52)  # shown as measured ...
    assert scaled.loc["m1", "scale_lo"] == 0.5 and scaled.loc["m1", "scaled"] == pytest.approx(0.02)  # ... counted at 0.5
    assert scaled.loc["prev", "scaled"] == 0.0 and scaled.loc["neg_a", "scaled"] == pytest.approx(0.04)
    # Without a chance level the draws set the scale, and the method would score below a trivial answer.
    unscaled = scale_scores(averaged, roles, {"auc": True})[0].set_index("method_id")
    assert unscaled.loc["m1", "scaled"] < 0 < unscaled.loc["m1", "scaled"] + 0.03
    # An unseeded negative control above chance still sets 0: it is a trivial answer that does better.
    rows += [("d", "neg_b", "auc", 0.6, None)]
    averaged = average_seeds(pd.DataFrame(rows, columns=["dataset_id", "method_id", "metric_id", "raw", "seed"]))
    scaled = scale_scores(averaged, {**roles, "neg_b": "negative"}, {"auc": True}, {"auc": 0.5})[0]
    assert (scaled["scale_lo"] == 0.6).all() and (scaled["scale_lo_method"] == "neg_b").all()
    # A random control with one seed left (the others failed) is still random: it counts at chance.
    rows = [("d", "neg_a", "auc", v, k) for k, v in enumerate([0.58, None, None])]
    rows += [("d", "pos", "auc", 1.0, None), ("d", "m1", "auc", 0.51, None)]
    averaged = average_seeds(pd.DataFrame(rows, columns=["dataset_id", "method_id", "metric_id", "raw", "seed"]))
    scaled = scale_scores(averaged, roles, {"auc": True}, {"auc": 0.5})[0].set_index("method_id")
    assert averaged.set_index("method_id").loc["neg_a", "n_seeds"] == 1 and scaled.loc["m1", "scale_lo"] == 0.5


def test_only_headline_metrics_enter_the_aggregate():
    raw = table([("d", "pos", "acc", 1.0), ("d", "neg_a", "acc", 0.0), ("d", "m1", "acc", 0.4),
                 ("d", "pos", "pooled", 1.0), ("d", "neg_a", "pooled", 0.0), ("d", "m1", "pooled", 1.0)])
    scaled, _ = scale_scores(raw, ROLES, {"acc": True, "pooled": True})
    everything, _ = aggregate_scores(scaled, ["m1"], ["d"])
    headline, _ = aggregate_scores(scaled, ["m1"], ["d"], headline=["acc"])
    assert everything["score"].iloc[0] == pytest.approx(0.7)
    assert headline["score"].iloc[0] == pytest.approx(0.4)


def _gameable_fixture(adv_value: float):
    raw = table([("d", "pos", "acc", 1.0), ("d", "neg_a", "acc", 0.0), ("d", "adv", "acc", adv_value),
                 ("d", "m1", "acc", 0.2), ("d", "m2", "acc", 0.4), ("d", "m3", "acc", 0.9), ("d", "base", "acc", 0.0),
                 ("d", "pos", "sim", 1.0), ("d", "neg_a", "sim", 0.0), ("d", "adv", "sim", 0.95),
                 ("d", "m1", "sim", 0.5), ("d", "m2", "sim", 0.6)])
    scaled, _ = scale_scores(raw, ROLES, {"acc": True, "sim": True})
    return scaled


def test_gameability_is_the_best_adversarial_against_the_median_method():
    from openpert.results.scoring import gameability_flags, gameability_table

    table_ = gameability_table(_gameable_fixture(0.3), ROLES, TYPES, headline=["acc"])
    rows = {r["metric_id"]: r for r in table_}
    # acc: median of m1, m2, m3 is 0.4 (the baseline at 0 is not a real method); 0.3 does not beat it
    assert rows["acc"]["method_median"] == pytest.approx(0.4) and rows["acc"]["n_methods"] == 3
    assert rows["acc"]["gameability"] == pytest.approx(0.3) and rows["acc"]["gameable"] is False
    assert rows["acc"]["headline"] is True
    # sim: a diagnostic metric the adversarial control games (0.95 > median 0.55)
    assert rows["sim"]["gameable"] is True and rows["sim"]["headline"] is False
    assert [f.metric_id for f in gameability_flags(table_)] == ["sim"]
    # an adversarial answer at 0.5 beats the median method on the headline metric
    table_ = gameability_table(_gameable_fixture(0.5), ROLES, TYPES, headline=["acc"])
    assert {r["metric_id"]: r["gameable"] for r in table_} == {"acc": True, "sim": True}



def test_an_adversarial_answer_no_better_than_a_trivial_one_games_nothing():
    from openpert.results.scoring import gameability_table

    # Every method below the strongest negative control (a weak field): an adversarial answer tied
    # with that control (scaled 0) is above the median method, yet the metric gives it no credit.
    raw = table([("d", "pos", "acc", 1.0), ("d", "neg_a", "acc", 0.5), ("d", "adv", "acc", 0.5),
                 ("d", "m1", "acc", 0.3), ("d", "m2", "acc", 0.4)])
    scaled, _ = scale_scores(raw, ROLES, {"acc": True})
    (row,) = gameability_table(scaled, ROLES, TYPES)
    assert row["gameability"] == pytest.approx(0.0) and row["method_median"] < 0
    assert row["gameable"] is False
    # One step above the trivial answer, it games the metric.
    raw.loc[raw["method_id"] == "adv", "raw"] = 0.55
    scaled, _ = scale_scores(raw, ROLES, {"acc": True})
    (row,) = gameability_table(scaled, ROLES, TYPES)
    assert row["gameable"] is True


def test_an_adversarial_control_counts_on_the_metrics_it_is_built_to_game():
    from openpert.results.scoring import gameability_table

    scaled = _gameable_fixture(0.5)  # beats the median method on acc, and games sim
    # Declared to game sim only: its acc score is not an attack on acc.
    rows = {r["metric_id"]: r for r in gameability_table(scaled, ROLES, TYPES, targets={"adv": ["sim"]})}
    assert set(rows) == {"sim"} and rows["sim"]["gameable"] is True
    rows = {r["metric_id"]: r for r in gameability_table(scaled, ROLES, TYPES, targets={"adv": None})}
    assert rows["acc"]["gameable"] is True and rows["sim"]["gameable"] is True

def test_gameability_without_methods_is_undecided():
    from openpert.results.scoring import gameability_table

    raw = table([("d", "pos", "acc", 1.0), ("d", "neg_a", "acc", 0.0), ("d", "adv", "acc", 0.7)])
    scaled, _ = scale_scores(raw, ROLES, {"acc": True})
    (row,) = gameability_table(scaled, ROLES, TYPES)
    assert row["gameable"] is None and row["method_median"] is None and row["headline"] is True


def test_dynamic_range_in_standard_errors():
    from openpert.results.scoring import average_seeds, dynamic_range_flags, dynamic_range_table

    rows = [("d", "pos", "r", 1.0, None), ("d", "ceil", "r", 0.8, None), ("d", "m1", "r", 0.5, None),
            ("d", "pos", "q", 1.0, None), ("d", "ceil", "q", 0.30, None)]
    rows += [("d", "neg_a", "r", v, k) for k, v in enumerate([0.1, 0.3, 0.2])]
    rows += [("d", "neg_a", "q", v, k) for k, v in enumerate([0.2, 0.3, 0.25])]
    rows += [("d", "pos", "z", 1.0, None), ("d", "neg_b", "z", 0.0, None), ("d", "ceil", "z", 0.9, None)]
    raw = pd.DataFrame(rows, columns=["dataset_id", "method_id", "metric_id", "raw", "seed"])
    averaged = average_seeds(raw)
    scaled, _ = scale_scores(averaged, ROLES, {"r": True, "q": True, "z": True})
    table_ = dynamic_range_table(averaged, scaled, ROLES, {"r": True, "q": True, "z": True}, {("d", "r"): (0.05, "bootstrap_paired")})
    by = {r["metric_id"]: r for r in table_}
    # r: per-item SE given: (0.8 - 0.2) / 0.05 = 12 standard errors
    assert by["r"]["range"] == pytest.approx(0.6) and by["r"]["range_se"] == pytest.approx(12.0)
    assert by["r"]["se_source"] == "bootstrap_paired" and by["r"]["small"] is False
    # q: no per-item values, so the seed sd of the negative control (0.05): (0.30 - 0.25) / 0.05 = 1 < 2
    assert by["q"]["se_source"] == "seed_sd" and by["q"]["range_se"] == pytest.approx(1.0) and by["q"]["small"] is True
    # z: neither per-item values nor seeds: unavailable, with the reason
    assert by["z"]["range_se"] is None and "standard error is unknown" in by["z"]["reason"]
    assert [f.metric_id for f in dynamic_range_flags(table_)] == ["q"]


def test_a_method_without_any_headline_value_on_a_dataset_is_not_applicable_there():
    # m2 addresses only d2 (its rows on d1 carry no value); m1 addresses both.
    raw = table([("d1", "pos", "acc", 0.9), ("d1", "neg", "acc", 0.5), ("d1", "m1", "acc", 0.7), ("d1", "m2", "acc", np.nan),
                 ("d2", "pos", "acc", 0.9), ("d2", "neg", "acc", 0.5), ("d2", "m1", "acc", 0.7), ("d2", "m2", "acc", 0.8)])
    scaled, _ = scale_scores(raw, CONTROLS, {"acc": True})
    dataset_scores, overall = aggregate_scores(scaled, ["pos", "neg", "m1", "m2"], ["d1", "d2"])
    ds = dataset_scores.set_index(["dataset_id", "method_id"])
    assert np.isnan(ds.loc[("d1", "m2"), "score"]) and ds.loc[("d1", "m2"), "status"] == NOT_APPLICABLE
    assert ds.loc[("d2", "m2"), "score"] == pytest.approx(0.75) and ds.loc[("d2", "m2"), "status"] == "succeeded"
    # The overall score averages the datasets the method addresses, not a 0 for the other one.
    assert overall.set_index("method_id").loc["m2", "score"] == pytest.approx(0.75)
    # A failed job is still a 0, never "not applicable".
    dataset_scores, _ = aggregate_scores(scaled, ["m2"], ["d1"], failed=[("d1", "m2")])
    assert dataset_scores.iloc[0]["status"] == "failed" and dataset_scores.iloc[0]["score"] == 0.0


def test_a_method_the_plan_did_not_run_on_a_dataset_is_not_applicable_there_not_zero():
    # m2 (a language-model method kept to d2 by --llm-datasets) has no rows at all on d1.
    raw = table([("d1", "pos", "acc", 0.9), ("d1", "neg", "acc", 0.5), ("d1", "m1", "acc", 0.7),
                 ("d2", "pos", "acc", 0.9), ("d2", "neg", "acc", 0.5), ("d2", "m1", "acc", 0.7), ("d2", "m2", "acc", 0.8)])
    scaled, _ = scale_scores(raw, CONTROLS, {"acc": True})
    unplanned, overall_unplanned = aggregate_scores(scaled, ["pos", "neg", "m1", "m2"], ["d1", "d2"])
    # Without being told, a method without rows scores 0 there (a method that wrote nothing).
    assert unplanned.set_index(["dataset_id", "method_id"]).loc[("d1", "m2"), "score"] == 0.0
    dataset_scores, overall = aggregate_scores(scaled, ["pos", "neg", "m1", "m2"], ["d1", "d2"], not_run=[("d1", "m2")])
    ds = dataset_scores.set_index(["dataset_id", "method_id"])
    assert np.isnan(ds.loc[("d1", "m2"), "score"]) and ds.loc[("d1", "m2"), "status"] == NOT_APPLICABLE
    assert overall.set_index("method_id").loc["m2", "score"] == pytest.approx(0.75)
    assert overall_unplanned.set_index("method_id").loc["m2", "score"] == pytest.approx(0.375)
