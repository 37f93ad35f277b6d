"""Appendix B.2 at pipeline level: each step and hyperparameter changes which path is chosen.

The library's diversified bag of paths is compared with :mod:`b2_reference`, an independent dense,
brute-force statement of the paper's formulas, on small random graphs; for every step the test
also switches the step off in the reference and checks that the chosen path then differs, so a
library that skipped or changed the step could not pass. The cases (seed, effect gene) were
picked among the first random graphs where the step matters.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from b2_reference import PAPER, Variant, bag_of_paths, random_case, tau_high, tau_low
from pertreasonqa_lib.cell_state import STATE_HIGH, STATE_MEDIUM, cell_thresholds, tau_high_ks, tau_low_ks
from pertreasonqa_lib.path_params import DEFAULT_PARAMS, PathParams
from pertreasonqa_lib.reference_paths import extract_paths, reference_paths_for_items
from pertreasonqa_lib.signed_graph import build_signed_graph, node_values
from toy_graphs import graph_of

#: Each B.2 step, the reference with the step changed, and cases where that changes the chosen paths.
STEPS = {
    "gating in the whole search (B.2.2)": (Variant(gate_in_ppr=False, gate_in_cost=False), [(1, 8), (3, 2), (3, 3)]),
    "gating in the cost only (B.2.3)": (Variant(gate_in_cost=False), [(1, 8), (5, 1), (5, 3)]),
    "gating in the PageRank only (B.2.3)": (Variant(gate_in_ppr=False), [(3, 2), (3, 3), (3, 5)]),
    "PageRank flow in the cost (B.2.3)": (Variant(ppr_in_cost=False), [(0, 1), (0, 5), (0, 7)]),
    "gating steepness beta 10 -> 5 (B.2.6)": (Variant(beta=5.0), [(16, 7), (39, 1), (39, 4)]),
    "penalty lambda 2 -> 1.5 (B.2.6)": (Variant(penalty=1.5), [(3, 2), (3, 3), (3, 5)]),
}


def names(edges, bag):
    """Node sequences of reference-implementation paths (edge indices into ``edges``)."""
    return [tuple([f"N{edges[p[0]][0]}"] + [f"N{edges[e][1]}" for e in p]) for p in bag]


def library_bag(edges, basal, tau, target, params: PathParams = DEFAULT_PARAMS):
    """The library's diversified bag from N0 to ``N<target>``, as node sequences."""
    graph = build_signed_graph(pd.DataFrame([{"source": f"N{u}", "target": f"N{v}", "sign": s, "database": "x"}
                                             for u, v, s in edges]))
    values = node_values(graph, pd.Series(basal, index=[f"N{i}" for i in range(len(basal))]))
    found = extract_paths(graph, values, tau, pd.DataFrame({"perturbation": ["N0"], "gene": [f"N{target}"]}), params)
    return [tuple([str(graph.nodes[graph.src[p[0]]])] + [str(graph.nodes[graph.dst[e]]) for e in p]) for p in found.paths[0]]


CASES = [(step, seed, target) for step, (_, cases) in STEPS.items() for seed, target in cases]


@pytest.mark.parametrize(("step", "seed", "target"), CASES, ids=[f"{s}-{a}-{b}" for s, a, b in CASES])
def test_each_step_changes_the_chosen_paths_and_the_library_keeps_it(step, seed, target):
    edges, basal, tau = random_case(seed)
    variant, _ = STEPS[step]
    paper = names(edges, bag_of_paths(edges, basal, tau, 0, target, PAPER))
    changed = names(edges, bag_of_paths(edges, basal, tau, 0, target, variant))
    assert paper and changed != paper, f"{step} does not matter for case {seed}/{target}"
    assert library_bag(edges, basal, tau, target) == paper


@pytest.mark.parametrize("seed", range(12))
def test_library_bags_equal_the_papers_formulas_on_random_graphs(seed):
    edges, basal, tau = random_case(seed)
    for target in range(1, len(basal)):
        assert library_bag(edges, basal, tau, target) == names(edges, bag_of_paths(edges, basal, tau, 0, target))


def test_hyperparameters_reach_the_search():
    """A method's own beta and lambda are used (the library is not hard-wired to the defaults)."""
    for params, variant, (seed, target) in ((PathParams(beta=5.0), Variant(beta=5.0), (16, 7)),
                                            (PathParams(penalty=1.5), Variant(penalty=1.5), (3, 2))):
        edges, basal, tau = random_case(seed)
        assert library_bag(edges, basal, tau, target, params) == names(edges, bag_of_paths(edges, basal, tau, 0, target, variant))


# --- the thresholds of B.2.1, through the whole pipeline ----------------------------------------------
#: Basal values of the effect genes of unchanged (background) and changed (signal) training items:
#: the signed KS statistic F_bg - F_sig peaks at 3.6, its absolute value at 0.45 (signal lowest).
BACKGROUND = np.array([0.5, 0.6, 0.7, 0.8, 3.5, 3.6])
SIGNAL = np.array([0.1, 0.2, 0.3, 0.4, 0.45, 4.0, 4.1, 4.2, 4.3, 4.4])
#: The cell's whole profile for tau_high: the training genes and a spread of active genes.
PROFILE = np.concatenate([BACKGROUND, SIGNAL, np.linspace(3.7, 6.0, 40), [9.0, 12.0]])


def thresholds_from_training() -> pd.DataFrame:
    genes = [f"T{i}" for i in range(len(BACKGROUND) + len(SIGNAL))]
    training = pd.DataFrame({"cell": "c", "gene": genes,
                             "label": ["unchanged"] * len(BACKGROUND) + ["up", "down"] * (len(SIGNAL) // 2)})
    basal = pd.DataFrame({"c": np.concatenate([BACKGROUND, SIGNAL])}, index=genes)
    return cell_thresholds(training, basal, pd.DataFrame({"c": PROFILE}))


def test_tau_low_is_the_signed_ks_argmax_and_its_side_changes_the_path():
    signed, two_sided = tau_low(BACKGROUND, SIGNAL), tau_low(BACKGROUND, SIGNAL, two_sided=True)
    assert (signed, two_sided) == (3.6, 0.45)
    assert thresholds_from_training().loc["c", "tau_low"] == signed
    edges, basal, _ = random_case(0)
    paper = names(edges, bag_of_paths(edges, basal, signed, 0, 1))
    assert paper != names(edges, bag_of_paths(edges, basal, two_sided, 0, 1))  # the side matters here
    assert library_bag(edges, basal, thresholds_from_training().loc["c", "tau_low"], 1) == paper


def test_tau_high_is_mapped_back_with_its_shift_and_decides_an_unchanged_reference():
    th = thresholds_from_training()
    low = float(th.loc["c", "tau_low"])
    shifted, unshifted = tau_high(PROFILE, low), tau_high(PROFILE, low, shift=False)
    assert th.loc["c", "tau_high"] == pytest.approx(shifted) and unshifted < shifted - 3
    # P -| G: a knockdown through an inhibition switches G on; G unchanged is a ceiling effect only if
    # G is saturated. Between the unshifted and the shifted tau_high, G is medium: no reference path.
    graph = graph_of([("P", -1, "G"), ("P", -1, "H")])
    items = pd.DataFrame({"cell": "c", "perturbation": "P", "perturbation_type": "CRISPRi", "gene": ["G", "H"],
                          "label": "unchanged"}, index=["g", "h"])
    basal = pd.DataFrame({"c": {"P": 5.0, "G": (shifted + unshifted) / 2, "H": shifted + 0.5}})
    out = reference_paths_for_items(items, graph, basal, th)
    assert out["gene_state"].tolist() == [STATE_MEDIUM, STATE_HIGH]
    assert out["n_reference_paths"].tolist() == [0, 1]


def test_an_ood_cell_reads_the_training_labels_at_its_own_basal_values():
    genes = [f"T{i}" for i in range(len(BACKGROUND) + len(SIGNAL))]
    training = pd.DataFrame({"cell": "id", "gene": genes,
                             "label": ["unchanged"] * len(BACKGROUND) + ["up"] * len(SIGNAL)})
    values = np.concatenate([BACKGROUND, SIGNAL])
    basal = pd.DataFrame({"id": values, "ood": values + 1.0}, index=genes)
    profile = pd.DataFrame({"id": PROFILE, "ood": PROFILE + 1.0})
    th = cell_thresholds(training, basal, profile, cells=["id", "ood"])
    assert th["labels_from"].tolist() == ["own", "pooled"]
    assert th.loc["ood", "tau_low"] == pytest.approx(th.loc["id", "tau_low"] + 1.0)  # same labels, its own values
    with pytest.raises(ValueError, match="no training item"):
        cell_thresholds(training.iloc[:0], basal, profile, cells=["ood"])


def test_tau_high_reads_both_sides_of_every_ecdf_step():
    """The one-sample KS gap at z_i is max(F(z_i) - z_i, z_i - F(z_i-)): here the left limit decides."""
    active = 2.0 + np.array([1.0, 1.1, 1.2, 1.3, 1.5, 21.0, 21.0, 21.0, 21.0, 21.0])
    # right limits peak at the fifth value (0.5 - 0.025), left limits at the sixth (1.0 - 0.5)
    expected = tau_high(np.concatenate([[0.5, 1.0], active]), 2.0)
    assert expected == 23.0
    assert tau_high_ks(np.concatenate([[0.5, 1.0], active]), 2.0) == expected


@pytest.mark.parametrize("seed", range(20))
def test_thresholds_equal_the_papers_formulas_on_random_profiles(seed):
    rng = np.random.default_rng(seed)
    background, signal = rng.gamma(2.0, 1.0, 40), rng.gamma(3.0, 1.2, 30)
    profile = rng.gamma(rng.uniform(0.5, 3.0), rng.uniform(0.5, 2.0), 300)
    low = tau_low(background, signal)
    assert tau_low_ks(background, signal) == low
    profile = np.concatenate([profile, low + rng.gamma(1.5, 1.0, 60)])  # enough active genes in every draw
    assert tau_high_ks(profile, low) == pytest.approx(tau_high(profile, low), rel=1e-12)
