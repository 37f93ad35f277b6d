"""A slow, independent statement of appendix B.2's path search, written from the paper's formulas.

Dense matrices and brute-force path enumeration, no code shared with ``pertreasonqa_lib``: the
pipeline-level tests compare the library with it on small random graphs, and switch single steps
off here to show that each step changes which path is chosen (so a library that skipped the step
would fail). Every switch names the step of B.2 it removes.
"""

from __future__ import annotations

import dataclasses
import itertools
from fractions import Fraction

import numpy as np


@dataclasses.dataclass(frozen=True)
class Variant:
    """The paper's pipeline (all defaults) or one step of it changed."""

    beta: float = 10.0
    delta_src: float = 0.05
    delta_tgt: float = 0.5
    penalty: float = 2.0
    gate_in_ppr: bool = True  # B.2.2 weights enter the PPR's transition matrix
    gate_in_cost: bool = True  # B.2.2 weights enter the cost 1 / (w p_u p_v + eps)
    ppr_in_cost: bool = True  # B.2.3 flow scores enter the cost
    n_paths: int = 4
    max_hops: int = 4


PAPER = Variant()


def random_case(seed: int, n_nodes: int = 9, density: float = 0.3):
    """A random signed graph (node 0 is the perturbation), basal values in [0, 6] and tau_low 3."""
    rng = np.random.default_rng(seed)
    edges = [(u, v, int(rng.choice([-1, 1]))) for u, v in itertools.permutations(range(n_nodes), 2)
             if v != 0 and rng.random() < density]
    basal = rng.uniform(0.0, 6.0, n_nodes)
    return edges, basal, 3.0


def gates(basal: np.ndarray, tau_low: float, v: Variant) -> tuple[np.ndarray, np.ndarray]:
    """``g_src`` and ``g_tgt`` of every node (B.2.2)."""
    act = 1.0 / (1.0 + np.exp(-v.beta * (basal - tau_low)))
    return np.maximum(act, v.delta_src), v.delta_tgt + (1.0 - v.delta_tgt) * act


def weights(edges, basal, tau_low, v: Variant) -> np.ndarray:
    """``w_uv = 1 * g_src(u) * g_tgt(v) + 1e-9`` per edge."""
    g_src, g_tgt = gates(basal, tau_low, v)
    return np.array([g_src[u] * g_tgt[w] + 1e-9 for u, w, _ in edges])


def ppr(edges, w: np.ndarray, n: int, start: int, alpha: float = 0.85, iters: int = 50, tol: float = 1e-4) -> np.ndarray:
    """Dense power iteration of ``p = (1 - a) s + a P^T p``; a dangling node's mass returns to ``s``."""
    mat = np.zeros((n, n))
    for (u, x, _), wt in zip(edges, w):
        mat[u, x] += wt
    rows = mat.sum(axis=1)
    trans = np.divide(mat, rows[:, None], out=np.zeros_like(mat), where=rows[:, None] > 0)
    s = np.zeros(n)
    s[start] = 1.0
    p = s.copy()
    for _ in range(iters):
        lost = p[rows == 0].sum()
        new = (1 - alpha) * s + alpha * (trans.T @ p) + alpha * lost * s
        done = np.abs(new - p).sum() < tol
        p = new
        if done:
            break
    return p


def simple_paths(edges, start: int, target: int, max_hops: int) -> list[tuple[int, ...]]:
    """Every simple path (as edge indices) from ``start`` to ``target`` of at most ``max_hops`` edges."""
    out_edges: dict[int, list[int]] = {}
    for i, (u, _, _) in enumerate(edges):
        out_edges.setdefault(u, []).append(i)
    found = []

    def walk(node, seen, path):
        for e in out_edges.get(node, ()):
            nxt = edges[e][1]
            if nxt in seen:
                continue
            if nxt == target:
                found.append((*path, e))
            elif len(path) + 1 < max_hops:
                walk(nxt, seen | {nxt}, [*path, e])

    walk(start, {start}, [])
    return found


def bag_of_paths(edges, basal, tau_low, start: int, target: int, v: Variant = PAPER) -> list[tuple[int, ...]]:
    """B.2.3's diversified bag: cheapest path, penalise its edges by ``lambda``, repeat ``K`` times; prune."""
    n = len(basal)
    gated = weights(edges, basal, tau_low, v)
    plain = np.ones(len(edges)) + 1e-9
    p = ppr(edges, gated if v.gate_in_ppr else plain, n, start) if v.ppr_in_cost else np.ones(n)
    w = gated if v.gate_in_cost else plain
    candidates = simple_paths(edges, start, target, v.max_hops)
    if not candidates:
        return []
    uses = np.zeros(len(edges))
    chosen = []
    for _ in range(v.n_paths):
        flow = w / v.penalty ** uses * np.array([p[u] * p[x] for u, x, _ in edges])
        cost = 1.0 / (flow + 1e-4)
        best = min(candidates, key=lambda path: (sum(cost[e] for e in path), len(path)))
        chosen.append(best)
        uses[list(best)] += 1
    unique = list(dict.fromkeys(chosen))
    nodes = [frozenset([start] + [edges[e][1] for e in path]) for path in unique]
    return [path for path, ns in zip(unique, nodes) if not any(other < ns for other in nodes)]


def tau_low(background: np.ndarray, signal: np.ndarray, two_sided: bool = False) -> float:
    """``argmax_x F_bg(x) - F_sig(x)`` over the pooled values (B.2.1); ``two_sided`` uses ``|.|`` instead."""
    grid = np.unique(np.concatenate([background, signal]))
    # exact rationals: equal KS values tie exactly, and the first grid value wins
    diff = [Fraction(int((background <= x).sum()), len(background)) - Fraction(int((signal <= x).sum()), len(signal))
            for x in grid]
    score = [abs(d) for d in diff] if two_sided else diff
    return float(grid[score.index(max(score))])


def tau_high(expression: np.ndarray, low: float, shift: bool = True) -> float:
    """``phi^-1(argmax_z |F_act(z) - z|)`` over the active values (B.2.1); ``shift=False`` drops phi^-1's ``+ min``."""
    act = np.sort(expression[expression > low])
    z = (act - act[0]) / (act[-1] - act[0])
    n = len(z)
    gap = [max(abs((i + 1) / n - z[i]), abs(z[i] - i / n)) for i in range(n)]
    k = int(np.argmax(gap))
    return float(z[k] * (act[-1] - act[0]) + (act[0] if shift else 0.0))
