"""A cell's basal state (appendix B.2.1, B.2.2, B.2.5): KS thresholds, basal states, gating.

Every expected value below is worked out by hand in the comments.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pertreasonqa_lib.cell_state import (
    STATE_HIGH,
    STATE_LOW,
    STATE_MEDIUM,
    STATE_UNKNOWN,
    VALUE_GRID,
    basal_state,
    cell_thresholds,
    gate_edge_weights,
    gene_states,
    state_name,
    tau_high_ks,
    tau_low_ks,
    to_grid,
)
from pertreasonqa_lib.signed_graph import node_values
from toy_graphs import graph_of


def test_tau_low_maximises_signed_ks():
    # grid 1, 2, 2.5, 3, 4, 6, 8, 9: F_bg - F_sig = .25, .5, .25, .5, .25, 0, .25, 0 -> first max at 2
    assert tau_low_ks(np.array([1, 2, 3, 8]), np.array([2.5, 4, 6, 9])) == 2.0
    # perfectly separated samples: the largest background value
    assert tau_low_ks(np.array([0, 1, 1, 2]), np.array([5, 6, 7])) == 2.0
    with pytest.raises(ValueError, match="tau_low needs"):
        tau_low_ks(np.array([]), np.array([1.0]))


def test_tau_high_knee_against_uniform():
    # active values (> 0.5): 1, 2, 3, 4, 100 -> z = 0, 1/99, 2/99, 3/99, 1; F - z peaks at z = 3/99
    # (0.8 - 0.0303 = 0.77), so tau_high is the value 4.
    x = np.array([0, 0, 0, 1, 2, 3, 4, 100, np.nan])
    assert tau_high_ks(x, 0.5) == 4.0
    # values at or below tau_low never count as active
    assert tau_high_ks(np.array([4.0, 4.0, 5.0, 6.0, 7.0, 50.0]), 4.0) == 7.0
    with pytest.raises(ValueError, match="two distinct"):
        tau_high_ks(np.array([1.0, 2.0]), 1.5)


def test_basal_state_codes():
    s = basal_state(np.array([0.0, 1.0, 1.5, 3.0, 4.0, np.nan]), tau_low=1.0, tau_high=3.0)
    assert s.tolist() == [STATE_LOW, STATE_LOW, STATE_MEDIUM, STATE_HIGH, STATE_HIGH, STATE_UNKNOWN]


def test_gate_edge_weights_asymmetric():
    g = graph_of([("HI", 1, "LO"), ("LO", 1, "HI"), ("MID", 1, "NA"), ("NA", 1, "MID")])
    basal = pd.Series({"HI": 10.0, "LO": -10.0, "MID": 0.0})  # NA has no value
    w = pd.Series(gate_edge_weights(g, node_values(g, basal), tau_low=0.0),
                  index=list(zip(g.nodes[g.src], g.nodes[g.dst])))
    # sigmoid(10 * 10) = 1, sigmoid(-100) = 0, sigmoid(0) = 0.5 (and NA is gated as tau_low)
    assert w[("HI", "LO")] == pytest.approx(1.0 * (0.5 + 0.5 * 0.0) + 1e-9)  # source on, target floor 0.5
    assert w[("LO", "HI")] == pytest.approx(0.05 * 1.0 + 1e-9)  # source floor 0.05, target on
    assert w[("MID", "NA")] == pytest.approx(0.5 * 0.75 + 1e-9)
    assert w[("NA", "MID")] == pytest.approx(0.5 * 0.75 + 1e-9)
    with pytest.raises(ValueError, match="shape"):
        gate_edge_weights(g, np.zeros(2), 0.0)


def test_cell_thresholds_from_items():
    items = pd.DataFrame({"cell": "K562", "gene": ["a", "b", "c", "d", "e", "f"],
                          "label": ["unchanged", "unchanged", "up", "down", "unchanged", "up"]})
    basal = pd.DataFrame({"K562": {"a": 0.0, "b": 1.0, "c": 3.0, "d": 4.0, "e": np.nan, "f": 5.0}})
    profile = pd.DataFrame({"K562": [0.0, 1.0, 2.0, 3.0, 4.0, 100.0]})
    th = cell_thresholds(items, basal, profile)
    assert th.loc["K562", "tau_low"] == 1.0  # all background <= 1 < all signal
    assert th.loc["K562", "tau_high"] == 4.0  # active 2, 3, 4, 100: F - z peaks at 4
    assert th.loc["K562", "n_background"] == 2 and th.loc["K562", "n_signal"] == 3


def test_state_names_of_genes_in_a_cell():
    thresholds = pd.DataFrame({"tau_low": [1.0], "tau_high": [3.0]}, index=["K562"])
    basal = pd.DataFrame({"K562": {"lo": 0.5, "mid": 2.0, "hi": 3.0, "nan": np.nan}})
    assert state_name(1.0, 1.0, 3.0) == "low" and state_name(np.nan, 1.0, 3.0) == "unknown"
    # a gene without a row, or with NaN, is unknown; tau_low itself is low and tau_high high
    assert gene_states(["lo", "mid", "hi", "nan", "absent"], "K562", basal, thresholds) == {
        "lo": "low", "mid": "medium", "hi": "high", "nan": "unknown", "absent": "unknown"}


def test_tau_high_needs_two_distinct_active_values():
    with pytest.raises(ValueError, match="two distinct expression values"):
        tau_high_ks(np.array([1.0, 5.0, 5.0]), 2.0)  # two active values, but equal
    with pytest.raises(ValueError, match="two distinct expression values"):
        tau_high_ks(np.array([1.0, 5.0]), 2.0)  # one active value


def test_tau_high_edge_cases_of_the_active_set():
    # "active" is strictly above tau_low: a gene at tau_low would move the minimum of phi and the knee
    assert tau_high_ks(np.array([2.0, 5.0, 5.1, 5.2, 9.0, 9.5, 10.0]), 2.0) == 5.2
    assert tau_high_ks(np.array([1.0, 3.0, 5.0]), 2.0) == 3.0  # two distinct active values are enough


def test_tau_low_needs_both_samples_but_one_value_each_will_do():
    assert tau_low_ks(np.array([1.0]), np.array([3.0])) == 1.0
    with pytest.raises(ValueError, match="unchanged and changed"):
        tau_low_ks(np.array([]), np.array([3.0]))


def test_cell_thresholds_name_a_cell_without_profile():
    training = pd.DataFrame({"cell": "c", "gene": ["a", "b"], "label": ["unchanged", "up"]})
    basal = pd.DataFrame({"c": [1.0, 3.0]}, index=["a", "b"])
    with pytest.raises(KeyError, match="'c'"):
        cell_thresholds(training, basal, pd.DataFrame({"other": [1.0, 2.0]}))
    with pytest.raises(KeyError, match="'c'"):
        cell_thresholds(training, pd.DataFrame({"other": [1.0, 3.0]}, index=["a", "b"]), pd.DataFrame({"c": [1.0, 2.0]}))


def test_gate_weight_floor_eps_w_is_added():
    from pertreasonqa_lib.path_params import PathParams

    graph = graph_of([("A", 1, "B")])
    w = gate_edge_weights(graph, np.array([0.0, 0.0]), 5.0, PathParams(w_base=0.0))
    assert w.tolist() == [1e-9]


def test_tau_low_ties_are_exact():
    # F_bg - F_sig is 2/9 at 1.0 and at 5.0 (5/9 - 1/3); in floating point 5/9 - 1/3 rounds above 2/9,
    # which would pick 5.0. The exact comparison sees the tie and keeps the first value.
    bg = np.array([0.0, 1.0, 3.0, 4.0, 5.0, 7.0, 9.0, 10.0, 11.0])
    sig = np.array([2.0, 6.0, 8.0])
    assert 5 / 9 - 1 / 3 > 2 / 9
    assert tau_low_ks(bg, sig) == 1.0
    # Order of the samples does not matter
    assert tau_low_ks(bg[::-1], sig[::-1]) == 1.0


def test_gates_ignore_last_bit_differences():
    # Another CPU's tanh may differ in the last bits: the gated weights must not
    g = graph_of([(f"g{i}", 1, f"g{i + 1}") for i in range(200)])
    b = np.random.default_rng(0).uniform(0.0, 6.0, g.n_nodes)
    w = gate_edge_weights(g, b, 2.0)
    for ulps in (1, 3):
        nudged = b.copy()
        for _ in range(ulps):
            nudged = np.nextafter(nudged, np.inf)
        assert np.array_equal(gate_edge_weights(g, nudged, 2.0), w)
    # Grid values are exact multiples of the grid step; NaN stays NaN
    x = to_grid(np.array([0.1, np.pi, np.nan]))
    assert np.array_equal(x[:2] / VALUE_GRID, np.rint(x[:2] / VALUE_GRID)) and np.isnan(x[2])
    assert abs(x[1] - np.pi) <= VALUE_GRID / 2
