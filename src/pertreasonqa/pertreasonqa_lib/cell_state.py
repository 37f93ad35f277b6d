"""A cell's basal state: KS thresholds, basal states and edge gating (PertReasonQA, Kim et al. 2026, appendix B.2).

- :func:`tau_low_ks`, :func:`tau_high_ks` — the KS-based basal activity thresholds (B.2.1), and
  :func:`cell_thresholds` for every cell of a set of labelled items;
- :func:`basal_state` — the low / medium / high / unknown codes of a gene (B.2.5), named by
  :func:`state_name` and :func:`gene_states` for prompts;
- :func:`gate_edge_weights` — asymmetric sigmoid gating of the edge weights by the basal
  expression of their endpoints (B.2.2).

Choices the paper leaves open
-----------------------------
- **Expression scale**: basal expression enters as ``log1p(NX)`` (HPA v20 NX). ``tau_low`` does not
  depend on the scale (a monotone transform keeps the argmax); ``tau_high`` and the gates do.
- **Genes without a basal value** (outside the symbol map) are gated as if they sat exactly at
  ``tau_low`` (gate = sigmoid(0) = 0.5): no evidence either way. Their basal state is *unknown*, so
  Algorithm 2 never accepts them as silent or saturated.
- **Machine independence**: numpy's ``tanh`` and ``log1p`` have CPU-specific (SIMD) versions that
  differ in the last bits. The gate activations, like the basal values
  (:func:`pertreasonqa_lib.basal_expression.log1p_nx`), are rounded to multiples of
  :data:`VALUE_GRID` (:func:`to_grid`) before anything is decided on them, so two machines agree
  unless a value sits within those last bits of a grid boundary. ``tau_low``'s argmax compares
  exact integers; ``tau_high`` and the basal states use only correctly rounded arithmetic on them.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from pertreasonqa_lib.path_params import DEFAULT_PARAMS, PathParams
from pertreasonqa_lib.signed_graph import SignedGraph

#: Grid of values that come out of a transcendental function before a decision is taken on them:
#: far below the data's resolution (HPA NX has one decimal), far above the last bits CPUs disagree on.
VALUE_GRID = 2.0 ** -24

#: Basal states (B.2.5): codes used throughout the task.
STATE_UNKNOWN, STATE_LOW, STATE_MEDIUM, STATE_HIGH = -1, 0, 1, 2
STATE_NAMES = {STATE_UNKNOWN: "unknown", STATE_LOW: "low", STATE_MEDIUM: "medium", STATE_HIGH: "high"}


# =================================================================================================
# KS-based basal activity thresholds (B.2.1)
# =================================================================================================
def tau_low_ks(background: np.ndarray, signal: np.ndarray) -> float:
    """Low threshold: the value maximising the signed two-sample KS statistic ``F_bg(x) - F_sig(x)``.

    Parameters
    ----------
    background
        Basal expression of the effect genes of items labelled *unchanged* (one value per item).
    signal
        Basal expression of the effect genes of items labelled *up* or *down*.

    Returns
    -------
    float
        The pooled sample value where the background ECDF most exceeds the signal ECDF (the first
        one on ties, compared exactly in integers). ECDFs are right-continuous, so genes at exactly ``tau_low`` are on the
        background side, matching ``x <= tau_low`` = silent in Algorithm 2.
    """
    bg = np.sort(np.asarray(background, dtype=float))
    sig = np.sort(np.asarray(signal, dtype=float))
    bg, sig = bg[np.isfinite(bg)], sig[np.isfinite(sig)]
    if len(bg) == 0 or len(sig) == 0:
        raise ValueError(f"tau_low needs unchanged and changed items with basal values (got {len(bg)} and {len(sig)})")
    grid = np.unique(np.concatenate([bg, sig]))
    # F_bg - F_sig = (n_sig * count_bg - n_bg * count_sig) / (n_bg * n_sig): the argmax is taken on the
    # exact integer numerator, so equal KS values tie exactly and the first grid value wins.
    count_bg = np.searchsorted(bg, grid, side="right").astype(np.int64)
    count_sig = np.searchsorted(sig, grid, side="right").astype(np.int64)
    diff = len(sig) * count_bg - len(bg) * count_sig
    return float(grid[int(np.argmax(diff))])


def tau_high_ks(expression: np.ndarray, tau_low: float) -> float:
    """High threshold: knee of the active genes' distribution against a uniform (one-sample KS).

    The active values ``x > tau_low`` are min-max normalised to ``z`` in [0, 1]; ``z*`` maximises
    ``|F_act(z) - z|`` over both sides of every ECDF step (the one-sample KS statistic) and
    ``tau_high = phi^-1(z*)`` is the active value there.

    Parameters
    ----------
    expression
        Basal expression of every gene of the cell (the whole profile).
    tau_low
        From :func:`tau_low_ks`.
    """
    x = np.asarray(expression, dtype=float)
    act = np.sort(x[np.isfinite(x) & (x > tau_low)])
    if len(act) < 2 or act[-1] == act[0]:
        raise ValueError(f"tau_high needs at least two distinct expression values above tau_low={tau_low} (got {len(act)})")
    z = (act - act[0]) / (act[-1] - act[0])
    n = len(z)
    upper = np.arange(1, n + 1) / n - z  # F(z_i) - z_i, right limit
    lower = z - np.arange(0, n) / n  # z_i - F(z_i-), left limit
    d = np.maximum(np.abs(upper), np.abs(lower))
    return float(act[int(np.argmax(d))])


def cell_thresholds(training: pd.DataFrame, basal: pd.DataFrame, profile: pd.DataFrame,
                    cells: Iterable[str] | None = None) -> pd.DataFrame:
    """``tau_low`` and ``tau_high`` of every cell (B.2.1), from training labels only.

    Parameters
    ----------
    training
        ``cell``, ``gene``, ``label`` of the *training* items (train and valid folds): the
        background (unchanged) and signal (up/down) samples of ``tau_low``, one value per item.
        Test labels must not enter: the thresholds shape every reference path, and a method reads
        them from the context file.
    basal
        Basal expression by gene symbol (genes x cells), on the pipeline's scale (log1p NX).
    profile
        The whole expression profile (all genes x cells, same scale) for ``tau_high``.
    cells
        Cells to compute thresholds for (default: the cells of ``training``). A cell without
        training items (an OOD cell: RPE1, the T cells) uses every training item's gene and label,
        read at *its own* basal expression: which genes respond is learnt in the ID cells, where
        they sit is the OOD cell's.

    Returns
    -------
    pandas.DataFrame
        Indexed by cell: ``tau_low``, ``tau_high``, ``n_background``, ``n_signal`` and
        ``labels_from`` (``own`` or ``pooled`` training items).
    """
    if training.empty:
        raise ValueError("cell_thresholds: no training item (tau_low needs training labels)")
    cells = sorted(training["cell"].unique()) if cells is None else list(dict.fromkeys(cells))
    rows = {}
    for cell in cells:
        if cell not in basal.columns or cell not in profile.columns:
            raise KeyError(f"no basal expression column for cell {cell!r}")
        own = training[training["cell"] == cell]
        sub = own if len(own) else training
        x = sub["gene"].map(basal[cell]).to_numpy(dtype=float)
        ok = np.isfinite(x)
        unchanged = sub["label"].to_numpy() == "unchanged"
        tl = tau_low_ks(x[ok & unchanged], x[ok & ~unchanged])
        th = tau_high_ks(profile[cell].to_numpy(dtype=float), tl)
        rows[cell] = {"tau_low": tl, "tau_high": th, "n_background": int((ok & unchanged).sum()),
                      "n_signal": int((ok & ~unchanged).sum()), "labels_from": "own" if len(own) else "pooled"}
    return pd.DataFrame.from_dict(rows, orient="index")


# =================================================================================================
# Basal states (B.2.5)
# =================================================================================================
def basal_state(values: np.ndarray, tau_low: float, tau_high: float) -> np.ndarray:
    """Discretise basal expression: 0 low (``<= tau_low``), 2 high (``>= tau_high``), 1 medium, -1 unknown (NaN)."""
    x = np.asarray(values, dtype=float)
    out = np.full(x.shape, STATE_MEDIUM, dtype=np.int64)
    out[x <= tau_low] = STATE_LOW
    out[x >= tau_high] = STATE_HIGH
    out[~np.isfinite(x)] = STATE_UNKNOWN
    return out


def state_name(value: float, tau_low: float, tau_high: float) -> str:
    """``low``, ``medium``, ``high`` or ``unknown`` (B.2.5's discretisation)."""
    return STATE_NAMES[int(basal_state(np.array([value]), tau_low, tau_high)[0])]


def gene_states(genes: Iterable[str], cell: str, basal: pd.DataFrame, thresholds: pd.DataFrame) -> dict[str, str]:
    """Basal state name of each gene in one cell (``unknown`` without a value)."""
    tl, th = float(thresholds.loc[cell, "tau_low"]), float(thresholds.loc[cell, "tau_high"])
    col = basal[cell] if cell in basal.columns else pd.Series(dtype=float)
    return {g: state_name(float(col.get(g, np.nan)), tl, th) for g in genes}


# =================================================================================================
# Asymmetric basal gating of edge weights (B.2.2)
# =================================================================================================
def to_grid(values: np.ndarray, step: float = VALUE_GRID) -> np.ndarray:
    """Values rounded to the nearest multiple of ``step`` (a power of two: exact; NaN stays NaN)."""
    return np.rint(np.asarray(values, dtype=float) / step) * step


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # overflow-free logistic


def gate_edge_weights(graph: SignedGraph, node_basal: np.ndarray, tau_low: float, params: PathParams = DEFAULT_PARAMS) -> np.ndarray:
    """Cell-conditioned edge weights ``w_uv = w_base * g_src(u) * g_tgt(v) + eps_w``.

    ``g_src(u) = max(sigmoid(beta (b_u - tau_low)), delta_src)`` and
    ``g_tgt(v) = delta_tgt + (1 - delta_tgt) sigmoid(beta (b_v - tau_low))``.

    Parameters
    ----------
    graph
        The graph.
    node_basal
        Basal expression per node of ``graph`` (same scale as ``tau_low``); NaN where unknown, which
        is gated as ``b = tau_low`` (sigmoid 0.5).
    tau_low
        Low threshold of the cell.
    params
        Gating hyperparameters.
    """
    b = np.asarray(node_basal, dtype=float)
    if b.shape != (graph.n_nodes,):
        raise ValueError(f"node_basal has shape {b.shape}, expected ({graph.n_nodes},)")
    act = to_grid(_sigmoid(params.beta * (np.where(np.isfinite(b), b, tau_low) - tau_low)))  # see the module notes
    g_src = np.maximum(act, params.delta_src)
    g_tgt = params.delta_tgt + (1.0 - params.delta_tgt) * act
    return params.w_base * g_src[graph.src] * g_tgt[graph.dst] + params.eps_w
