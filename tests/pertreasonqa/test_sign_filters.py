"""The sign filters of reference paths: Algorithms 1 and 2 (appendix B.2.4), and the label-free answer rules.
"""

from __future__ import annotations

import pandas as pd
import pytest
from pertreasonqa_lib.cell_state import STATE_HIGH, STATE_LOW, STATE_MEDIUM, STATE_UNKNOWN
from pertreasonqa_lib.sign_filters import (
    filter_reference_paths,
    path_is_reference,
    predict_from_paths,
    sign_consistency,
    sign_reachability,
)
from pertreasonqa_lib.signed_graph import build_signed_graph


@pytest.mark.parametrize("signs, label, budget, expected", [
    ([1, 1], "down", 1, True),  # knockdown through activations: down
    ([1, 1], "up", 1, False),
    ([-1], "up", 1, True),  # knockdown of an inhibitor: up
    ([1, -1, -1], "down", 1, True),
    ([0], "up", 1, True),  # one ambiguous edge: both signs reachable within budget 1
    ([0], "down", 1, True),
    ([0], "up", 0, False),  # over budget 0
    ([0, 1, 0], "down", 1, False),  # two ambiguous edges > 1
    ([0, 1, 0], "down", 2, True),
])
def test_sign_reachability(signs, label, budget, expected):
    assert sign_reachability(signs, -1, label, budget) is expected


@pytest.mark.parametrize("signs, state, expected", [
    ([1], STATE_LOW, True),  # off signal reaches a silent gene: floor effect
    ([1], STATE_HIGH, False),
    ([-1], STATE_HIGH, True),  # knockdown of a repressor turns the target on; saturated: ceiling
    ([-1], STATE_LOW, False),
    ([0], STATE_LOW, True),
    ([0], STATE_HIGH, True),
    ([0], STATE_MEDIUM, False),  # no boundary, never unchanged by Algorithm 2
    ([1], STATE_UNKNOWN, False),
])
def test_sign_consistency(signs, state, expected):
    assert sign_consistency(signs, 0, state) is expected


def test_predict_from_paths_rules():
    # one activation path: knockdown -> down; a silent target turns it into unchanged (floor)
    assert predict_from_paths([[1, 1]], "CRISPRi", STATE_MEDIUM) == ("down", 0)
    assert predict_from_paths([[1, 1]], "CRISPRi", STATE_LOW) == ("unchanged", 0)
    assert predict_from_paths([[-1]], "CRISPRi", STATE_HIGH) == ("unchanged", 0)  # ceiling
    assert predict_from_paths([], "CRISPRi", STATE_MEDIUM) == ("unchanged", None)
    # an ambiguous path abstains; majority of the other two (up, up) beats the cheapest (down)
    votes = [[1], [0], [-1], [-1, 1]]
    assert predict_from_paths(votes, "CRISPRi", STATE_MEDIUM, aggregation="majority") == ("up", 2)
    assert predict_from_paths(votes, "CRISPRi", STATE_MEDIUM, aggregation="first") == ("down", 0)


def test_path_is_reference_picks_the_algorithm_by_label():
    # knockdown through an activation: Algorithm 1 accepts down; Algorithm 2 accepts unchanged on a silent gene only
    assert path_is_reference([1], "down", "CRISPRi", STATE_MEDIUM)
    assert not path_is_reference([1], "up", "CRISPRi", STATE_MEDIUM)
    assert path_is_reference([1], "unchanged", "CRISPRi", STATE_LOW)
    assert not path_is_reference([1], "unchanged", "CRISPRi", STATE_MEDIUM)
    # a compound is present (+1): through an activation it raises the gene
    assert path_is_reference([1], "up", "chemical", STATE_MEDIUM)
    with pytest.raises(ValueError, match="unknown perturbation type"):
        path_is_reference([1], "up", "prime_editing", STATE_MEDIUM)


def test_filter_reference_paths_keeps_passing_paths_per_item():
    graph = build_signed_graph(pd.DataFrame({"source": ["P", "P", "A", "B"], "target": ["A", "B", "G", "G"],
                                             "sign": [1, 1, 1, -1], "database": "OmniPath"}))
    e = graph.edge_lookup()
    pag, pbg = (e["P", "A"], e["A", "G"]), (e["P", "B"], e["B", "G"])
    # knockdown: P-A-G (+,+) says down, P-B-G (+,-) says up
    kept = filter_reference_paths(graph, [[pag, pbg], [pag, pbg], []], ["down", "up", "down"], ["CRISPRi"] * 3,
                                  [STATE_MEDIUM] * 3)
    assert kept == [[pag], [pbg], []]
