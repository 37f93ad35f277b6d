"""The sign filters of reference paths, Algorithms 1 and 2 (PertReasonQA, Kim et al. 2026, appendix B.2.4).

:func:`sign_reachability` (Algorithm 1) accepts a path whose propagated sign reaches an up/down
label; :func:`sign_consistency` (Algorithm 2) one that explains an *unchanged* label by a floor or
ceiling effect on the effect gene. :func:`filter_reference_paths` applies them to the candidate
paths of many items; :func:`predict_from_paths` applies the same rules without the label, to answer.

Choices the paper leaves open
-----------------------------
- **Ambiguity budget** of Algorithm 1: ``B_0 = 1`` (at most one unsigned edge per path).
- **CRISPRi** knockdown: initial sign ``-1`` (Algorithm 1), initial state ``z_0 = 0`` (Algorithm 2).
- **Chemical perturbations**: the compound itself is present (initial sign ``+1``, initial state
  ``z_0 = 1``); the sign of its drug-target edge does the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from pertreasonqa_lib.cell_state import STATE_HIGH, STATE_LOW
from pertreasonqa_lib.path_params import AMBIGUITY_BUDGET
from pertreasonqa_lib.signed_graph import SignedGraph

#: Initial sign of a perturbation (Algorithm 1) and initial binary state (Algorithm 2).
INITIAL_SIGN = {"crispri": -1, "knockdown": -1, "knockout": -1, "inhibitor": -1, "crispra": 1, "activator": 1,
                "chemical": 1}
INITIAL_STATE = {k: (0 if v < 0 else 1) for k, v in INITIAL_SIGN.items()}


def propagate_signs(edge_signs: Sequence[int], initial_sign: int) -> tuple[set[int], int]:
    """Signs reachable at the end of a path and the number of ambiguous edges (Algorithm 1, lines 3-14)."""
    states = {int(initial_sign)}
    ambiguous = 0
    for s in edge_signs:
        if s == 1:
            continue
        if s == -1:
            states = {-x for x in states}
        else:
            states = states | {-x for x in states}
            ambiguous += 1
    return states, ambiguous


def sign_reachability(edge_signs: Sequence[int], initial_sign: int, label: str, budget: int = AMBIGUITY_BUDGET) -> bool:
    """Algorithm 1: does the path's propagated sign reach the observed up/down label?

    Parameters
    ----------
    edge_signs
        Signs of the path's edges in order (+1, -1, 0 for ambiguous).
    initial_sign
        Sign of the perturbation (-1 for a knockdown).
    label
        ``"up"`` or ``"down"``.
    budget
        Ambiguity budget ``B_0``: a path with more ambiguous edges is rejected.
    """
    if label not in ("up", "down"):
        raise ValueError(f"Algorithm 1 takes an up/down label, got {label!r}")
    states, ambiguous = propagate_signs(edge_signs, initial_sign)
    if ambiguous > budget:
        return False
    return (1 if label == "up" else -1) in states


def propagate_states(edge_signs: Sequence[int], initial_state: int) -> set[int]:
    """Binary activity states reachable at the end of a path (Algorithm 2, lines 10-20)."""
    states = {int(initial_state)}
    for s in edge_signs:
        if s == 1:
            continue
        if s == -1:
            states = {1 - z for z in states}
        else:
            states = {0, 1}
    return states


def sign_consistency(edge_signs: Sequence[int], initial_state: int, target_state: int) -> bool:
    """Algorithm 2: is an *unchanged* outcome explained by a floor or ceiling effect?

    Parameters
    ----------
    edge_signs
        Signs of the path's edges.
    initial_state
        ``z_0``: 0 when the perturbation switches its gene off (knockdown), 1 when it switches it on.
    target_state
        Basal state of the effect gene (:func:`~pertreasonqa_lib.cell_state.basal_state` code): low = silent (``b = 0``), high =
        saturated (``b = 1``); medium and unknown have no boundary and never pass.
    """
    states = propagate_states(edge_signs, initial_state)
    if target_state == STATE_HIGH:
        return 1 in states
    if target_state == STATE_LOW:
        return 0 in states
    return False


def path_is_reference(edge_signs: Sequence[int], label: str, perturbation_type: str, target_state: int,
                      budget: int = AMBIGUITY_BUDGET) -> bool:
    """Algorithm 1 for up/down, Algorithm 2 for unchanged."""
    kind = perturbation_type.lower()
    if kind not in INITIAL_SIGN:
        raise ValueError(f"unknown perturbation type {perturbation_type!r}; known: {sorted(INITIAL_SIGN)}")
    if label == "unchanged":
        return sign_consistency(edge_signs, INITIAL_STATE[kind], target_state)
    return sign_reachability(edge_signs, INITIAL_SIGN[kind], label, budget)


def filter_reference_paths(graph: SignedGraph, paths: Sequence[Sequence[tuple[int, ...]]], labels: Sequence[str],
                           perturbation_types: Sequence[str], target_states: Sequence[int],
                           budget: int = AMBIGUITY_BUDGET) -> list[list[tuple[int, ...]]]:
    """Keep, per query, the candidate paths that pass Algorithm 1 (up/down) or Algorithm 2 (unchanged)."""
    out = []
    for bag, label, kind, state in zip(paths, labels, perturbation_types, target_states):
        out.append([p for p in bag if path_is_reference(graph.sign[list(p)], label, kind, int(state), budget)])
    return out


def predict_from_paths(path_signs: Sequence[Sequence[int]], perturbation_type: str, target_state: int,
                       budget: int = AMBIGUITY_BUDGET, aggregation: str = "majority") -> tuple[str, int | None]:
    """Answer a question from label-free paths: propagated sign plus the basal-state rules.

    Each path with at most ``budget`` ambiguous edges and one reachable sign votes ``up``/``down``;
    a vote reaching a silent target with a decrease (floor) or a saturated one with an increase
    (ceiling) becomes ``unchanged`` (the rules of Algorithm 2). Paths with an undetermined sign
    abstain. ``aggregation="first"`` takes the cheapest voting path, ``"majority"`` the most common
    vote (ties go to the cheaper path's vote). No vote: ``unchanged``.

    Returns
    -------
    answer, path_index
        The answer and the index of the path that supports it (None without paths).
    """
    kind = perturbation_type.lower()
    sign0 = INITIAL_SIGN[kind]
    votes: list[tuple[str, int]] = []
    for i, signs in enumerate(path_signs):
        states, ambiguous = propagate_signs(signs, sign0)
        if ambiguous > budget or len(states) != 1:
            continue
        answer = "up" if states == {1} else "down"
        if (answer == "down" and target_state == STATE_LOW) or (answer == "up" and target_state == STATE_HIGH):
            answer = "unchanged"
        votes.append((answer, i))
    if not votes:
        return "unchanged", (0 if len(path_signs) else None)
    if aggregation == "first":
        return votes[0]
    if aggregation != "majority":
        raise ValueError(f"aggregation must be 'first' or 'majority', got {aggregation!r}")
    counts = pd.Series([v for v, _ in votes]).value_counts()
    top = counts[counts == counts.max()].index
    for answer, i in votes:  # votes are in cost order: the first tied answer is the cheapest
        if answer in top:
            return answer, i
    raise AssertionError("unreachable")
