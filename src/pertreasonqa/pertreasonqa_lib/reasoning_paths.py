"""Cell-state-conditioned reference reasoning paths (PertReasonQA, Kim et al. 2026, appendix B.2).

One function per step of the pipeline that pairs a perturbation outcome (cell ``c``, perturbation
``p``, effect gene ``g``, label up/down/unchanged) with signed mechanistic paths ``p -> ... -> g``
from a knowledge graph conditioned on the cell's basal expression:

1. :func:`build_signed_graph` — one signed, directed edge per gene pair from OmniPath, DoRothEA and
   TRRUST, each edge keeping the databases it comes from (B.2.2, B.2.4 "evidence augmentation").
2. :func:`tau_low_ks`, :func:`tau_high_ks` — the KS-based basal activity thresholds (B.2.1).
3. :func:`gate_edge_weights` — asymmetric sigmoid gating of the edge weights (B.2.2).
4. :func:`personalized_pagerank` — vectorised sparse PPR from the perturbation's start nodes (B.2.3).
5. :func:`edge_costs` and :func:`hop_limited_shortest_paths` — Dijkstra on the PPR-informed cost
   with a hop limit (B.2.3).
6. :func:`diversified_paths` — iterative penalty diversification, duplicates and supersets pruned
   (B.2.3).
7. :func:`sign_reachability` (Algorithm 1) and :func:`sign_consistency` (Algorithm 2) — the label
   filters that turn candidate paths into reference paths (B.2.4).

:func:`extract_paths` runs steps 3-6 for many (perturbation, gene) queries of one cell and
:func:`filter_reference_paths` step 7; :func:`reference_paths_for_items` chains everything.

The module also holds what several PertReasonQA components share around these paths: their JSON
serialisation and the task's prediction file, the ``<thinking>/<answer>/<triplets>`` answer format
with its strict parser, the language-model prompts (cell context, breadth-first serialised paths)
and answer loop, and the scores (balanced accuracy per item, edge recall, path connectivity, GO
similarity, failure modes).

Choices the paper leaves open (each is also stated where it is made)
--------------------------------------------------------------------
- **Expression scale**: basal expression enters as ``log1p(NX)`` (HPA v20 NX). ``tau_low`` does not
  depend on the scale (a monotone transform keeps the argmax); ``tau_high`` and the gates do.
- **Genes without a basal value** (outside the symbol map) are gated as if they sat exactly at
  ``tau_low`` (gate = sigmoid(0) = 0.5): no evidence either way. Their basal state is *unknown*, so
  Algorithm 2 never accepts them as silent or saturated.
- **Sign consensus** (stand-in for INDRA CoGEx, which is not available offline): each database row
  votes its sign; unsigned rows abstain; the majority of signed votes wins; a tie, or no signed vote,
  leaves the edge ambiguous (sign 0).
- **PPR**: dangling nodes return their mass to the personalisation vector; iteration starts from the
  personalisation vector and stops after 50 iterations or when every column's L1 change is below
  1e-4. Raw PPR probabilities enter the cost.
- **Hop limit**: the hop-constrained shortest path is computed exactly by a layered Bellman-Ford
  recursion (the answer of Dijkstra on (node, depth) states), vectorised over edges and queries.
- **Diversification**: the PPR is not recomputed on the penalised copy; an edge used by ``m``
  extracted paths has its weight divided by ``penalty**m``; ``n_paths`` extraction rounds are run
  and the distinct paths kept, then any path whose node set strictly contains another kept path's
  node set is pruned.
- **Ambiguity budget** of Algorithm 1: ``B_0 = 1`` (at most one unsigned edge per path).
- **CRISPRi** knockdown: initial sign ``-1`` (Algorithm 1), initial state ``z_0 = 0`` (Algorithm 2).
- **Chemical perturbations**: a compound is a node of the graph whose out-edges are its
  drug-target edges (``interaction == "drug_target"``, signed +1 for an activator, -1 for an
  inhibitor, 0 when unknown). Its start set ``S(p)`` is its targets: PPR is personalised on them
  and the search runs from them with ``D_max = 3``; the drug-target edge into the path's first
  gene is then prepended, so a chemical path has at most four edges and starts at the compound.
  The compound itself is present (initial sign ``+1``, initial state ``z_0 = 1``); the sign of
  the drug-target edge does the rest. A target that is itself the effect gene is explained by the
  drug-target edge alone. The drug-target edge adds no cost (the compound has no PPR mass).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

log = logging.getLogger(__name__)

# --- hyperparameters of appendix B.2.6 -------------------------------------------------------------
BETA = 10.0
DELTA_SRC = 0.05
DELTA_TGT = 0.5
EPS_W = 1e-9
W_BASE = 1.0
ALPHA = 0.85
PPR_MAX_ITER = 50
PPR_TOL = 1e-4
EPS_C = 1e-4
MAX_HOPS = 4
#: Gene-gene edges of a chemical's path after its drug-target edge (B.2.6: "reduced to 3 internally").
MAX_HOPS_CHEMICAL = MAX_HOPS - 1
#: ``interaction`` of an edge from a compound to one of its targets (graph files, :class:`SignedGraph`).
DRUG_TARGET = "drug_target"
REGULATION = "regulation"
N_PATHS = 4
PENALTY = 2.0
#: Ambiguity budget B_0 of Algorithm 1 (not given in the paper).
AMBIGUITY_BUDGET = 1

#: Initial sign of a perturbation (Algorithm 1) and initial binary state (Algorithm 2).
INITIAL_SIGN = {"crispri": -1, "knockdown": -1, "knockout": -1, "inhibitor": -1, "crispra": 1, "activator": 1,
                "chemical": 1}
INITIAL_STATE = {k: (0 if v < 0 else 1) for k, v in INITIAL_SIGN.items()}

LABELS = ("up", "down", "unchanged")
#: Basal states (B.2.5): codes used throughout the task.
STATE_UNKNOWN, STATE_LOW, STATE_MEDIUM, STATE_HIGH = -1, 0, 1, 2
STATE_NAMES = {STATE_UNKNOWN: "unknown", STATE_LOW: "low", STATE_MEDIUM: "medium", STATE_HIGH: "high"}


@dataclasses.dataclass(frozen=True)
class PathParams:
    """Hyperparameters of the reference-path pipeline (defaults: appendix B.2.6).

    Parameters
    ----------
    beta, delta_src, delta_tgt, eps_w, w_base
        Gating steepness, source floor, target floor, weight floor, structural base weight.
    alpha, ppr_max_iter, ppr_tol
        PPR damping, iteration cap and L1 tolerance.
    eps_c
        Cost constant of the Dijkstra search.
    max_hops
        Maximum number of edges of a path (``D_max``); a chemical's path has one drug-target edge
        and at most ``max_hops - 1`` gene-gene edges.
    n_paths, penalty
        Path budget ``K`` and penalty factor ``lambda`` of the diversification.
    ambiguity_budget
        ``B_0`` of Algorithm 1.
    """

    beta: float = BETA
    delta_src: float = DELTA_SRC
    delta_tgt: float = DELTA_TGT
    eps_w: float = EPS_W
    w_base: float = W_BASE
    alpha: float = ALPHA
    ppr_max_iter: int = PPR_MAX_ITER
    ppr_tol: float = PPR_TOL
    eps_c: float = EPS_C
    max_hops: int = MAX_HOPS
    n_paths: int = N_PATHS
    penalty: float = PENALTY
    ambiguity_budget: int = AMBIGUITY_BUDGET


# =================================================================================================
# Step 1: the signed, directed graph
# =================================================================================================
@dataclasses.dataclass
class SignedGraph:
    """A signed, directed gene graph: one edge per ordered gene pair.

    Attributes
    ----------
    nodes : pandas.Index
        Gene symbols; node ``i`` is ``nodes[i]``.
    src, dst : numpy.ndarray of int
        Endpoints of each edge (node positions).
    sign : numpy.ndarray of int8
        +1 activation, -1 inhibition, 0 ambiguous/unknown.
    databases : numpy.ndarray of str
        Databases supporting each edge, ``;``-separated (e.g. ``"DoRothEA;OmniPath"``).
    drug_edge : numpy.ndarray of bool
        Whether each edge goes from a compound to one of its targets (default: none does).
    """

    nodes: pd.Index
    src: np.ndarray
    dst: np.ndarray
    sign: np.ndarray
    databases: np.ndarray
    drug_edge: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.drug_edge = (np.zeros(len(self.src), dtype=bool) if self.drug_edge is None
                          else np.asarray(self.drug_edge, dtype=bool))
        if self.drug_edge.shape != (len(self.src),):
            raise ValueError(f"drug_edge has shape {self.drug_edge.shape}, expected ({len(self.src)},)")

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def n_edges(self) -> int:
        return len(self.src)

    def to_frame(self) -> pd.DataFrame:
        """Edge table ``source, target, sign, databases, interaction`` (``regulation`` or ``drug_target``)."""
        return pd.DataFrame({"source": self.nodes[self.src], "target": self.nodes[self.dst],
                             "sign": self.sign.astype(int), "databases": self.databases,
                             "interaction": np.where(self.drug_edge, DRUG_TARGET, REGULATION)})

    @classmethod
    def from_frame(cls, df: pd.DataFrame, where: str = "edge table") -> SignedGraph:
        """Rebuild a graph from :meth:`to_frame` output (one row per ordered pair).

        The ``interaction`` column is optional (absent: every edge is a regulation). A compound
        (source of a drug-target edge) may not be the target of any edge.
        """
        missing = {"source", "target", "sign", "databases"} - set(df.columns)
        if missing:
            raise ValueError(f"{where}: missing columns {sorted(missing)}")
        if df.duplicated(["source", "target"]).any():
            raise ValueError(f"{where}: duplicated (source, target) pairs; expected one edge per ordered pair")
        bad = ~df["sign"].isin([-1, 0, 1])
        if bad.any():
            raise ValueError(f"{where}: sign must be -1, 0 or 1 (row {int(np.flatnonzero(bad)[0])})")
        drug = np.zeros(len(df), dtype=bool)
        if "interaction" in df.columns:
            kind = df["interaction"].astype(str)
            bad = ~kind.isin([DRUG_TARGET, REGULATION])
            if bad.any():
                raise ValueError(f"{where}: interaction must be {REGULATION!r} or {DRUG_TARGET!r} "
                                 f"(row {int(np.flatnonzero(bad)[0])}: {kind[bad].iloc[0]!r})")
            drug = (kind == DRUG_TARGET).to_numpy()
            compounds = set(df.loc[drug, "source"])
            entering = df.loc[df["target"].isin(compounds), "target"]
            if len(entering):
                raise ValueError(f"{where}: compound {entering.iloc[0]!r} is the target of an edge; compounds "
                                 "may only have drug-target out-edges")
            regulating = df.loc[~drug & df["source"].isin(compounds), "source"]
            if len(regulating):
                raise ValueError(f"{where}: compound {regulating.iloc[0]!r} has a regulation edge; compounds "
                                 "may only have drug-target out-edges")
        nodes = pd.Index(sorted(set(df["source"]) | set(df["target"])))
        return cls(nodes=nodes, src=nodes.get_indexer(df["source"]).astype(np.int64),
                   dst=nodes.get_indexer(df["target"]).astype(np.int64),
                   sign=df["sign"].to_numpy().astype(np.int8), databases=df["databases"].astype(str).to_numpy(),
                   drug_edge=drug)

    def with_drug_targets(self, targets: pd.DataFrame, database: str) -> SignedGraph:
        """This graph plus drug-target edges.

        Parameters
        ----------
        targets
            ``drug``, ``target``, ``sign`` (+1 activates, -1 inhibits, 0 unknown), one row per pair.
        database
            Source of the drug-target edges (their ``databases`` entry).
        """
        extra = pd.DataFrame({"source": targets["drug"].astype(str), "target": targets["target"].astype(str),
                              "sign": targets["sign"].astype(int), "databases": database,
                              "interaction": DRUG_TARGET})
        return SignedGraph.from_frame(pd.concat([self.to_frame(), extra], ignore_index=True),
                                      where="graph with drug targets")

    def drug_targets(self, perturbation: str) -> dict[int, int] | None:
        """Target node -> drug-target edge of a compound; None when ``perturbation`` is no compound."""
        cache = self.__dict__.setdefault("_drug_targets", None)
        if cache is None:
            cache = {}
            for e in np.flatnonzero(self.drug_edge):
                cache.setdefault(str(self.nodes[self.src[e]]), {})[int(self.dst[e])] = int(e)
            self.__dict__["_drug_targets"] = cache
        return cache.get(str(perturbation))

    def start_nodes(self, perturbation: str) -> np.ndarray | None:
        """The start set ``S(p)`` (B.2.3): a compound's targets, or the genes of ``A`` or ``A+B``.

        None when a gene of the perturbation is not a node (no path can start there).
        """
        targets = self.drug_targets(perturbation)
        if targets is not None:
            return np.fromiter(sorted(targets), dtype=np.int64)
        idx = self.nodes.get_indexer(str(perturbation).split("+"))
        return idx.astype(np.int64) if (idx >= 0).all() else None

    def subgraph(self, keep_edges: np.ndarray) -> SignedGraph:
        """The graph of the edges selected by a boolean mask (nodes: their endpoints, kinds kept)."""
        return SignedGraph.from_frame(self.to_frame()[keep_edges].reset_index(drop=True))

    def edge_lookup(self) -> dict[tuple[str, str], int]:
        """``(source, target) -> edge index``."""
        return {(self.nodes[s], self.nodes[d]): i for i, (s, d) in enumerate(zip(self.src, self.dst))}

    def out_csr(self, values: np.ndarray | None = None) -> sp.csr_matrix:
        """``n x n`` sparse matrix with ``values`` (default 1) at ``[src, dst]``."""
        vals = np.ones(self.n_edges) if values is None else np.asarray(values, dtype=float)
        return sp.csr_matrix((vals, (self.src, self.dst)), shape=(self.n_nodes, self.n_nodes))

    def reach_matrix(self, mode: str) -> sp.csr_matrix:
        """Cached 0/1 matrix ``M`` with ``M @ frontier`` = nodes one hop on (``forward``, ``reverse``, ``undirected``)."""
        cache = self.__dict__.setdefault("_reach", {})
        if mode not in cache:
            adj = self.out_csr()
            if mode == "forward":
                mat = adj.T
            elif mode == "reverse":
                mat = adj
            elif mode == "undirected":
                mat = adj + adj.T
            else:
                raise ValueError(f"unknown mode {mode!r}")
            cache[mode] = (mat.tocsr() > 0).astype(np.float64)
        return cache[mode]


def consensus_sign(signs: Iterable[int]) -> int:
    """Majority of the signed votes (+1/-1); 0 on a tie or when no vote is signed."""
    total = sum(int(np.sign(s)) for s in signs)
    return int(np.sign(total))


def build_signed_graph(edges: pd.DataFrame) -> SignedGraph:
    """Merge edge tables of several databases into one signed edge per ordered gene pair.

    Parameters
    ----------
    edges
        Rows with ``source``, ``target``, ``sign`` (+1, -1, 0) and ``database`` (the layout of
        :mod:`pertsci.knowledge_graphs`). Only directed rows are expected (signalling and regulons).

    Returns
    -------
    SignedGraph
        Self-loops dropped; sign by :func:`consensus_sign` over the rows of the pair (each row, of
        any database, one vote; unsigned rows abstain); ``databases`` lists every database that
        has the pair.
    """
    missing = {"source", "target", "sign", "database"} - set(edges.columns)
    if missing:
        raise ValueError(f"edge table: missing columns {sorted(missing)}")
    df = edges.loc[edges["source"] != edges["target"], ["source", "target", "sign", "database"]].copy()
    df["sign"] = np.sign(df["sign"].astype(int))
    grouped = df.groupby(["source", "target"], sort=True)
    merged = grouped["sign"].sum().pipe(np.sign).astype(int).rename("sign").to_frame()
    merged["databases"] = grouped["database"].agg(lambda s: ";".join(sorted(set(s))))
    merged = merged.reset_index()
    return SignedGraph.from_frame(merged)


def load_signed_graph(data_dir: str | Path | None = None) -> SignedGraph:
    """OmniPath signed signalling + DoRothEA A-C + TRRUST, from :mod:`pertsci.knowledge_graphs`."""
    from pertsci import knowledge_graphs as kg

    edges = pd.concat([kg.omnipath_edges(data_dir), kg.dorothea_edges(data_dir), kg.trrust_edges(data_dir)],
                      ignore_index=True)
    return build_signed_graph(edges)


def hop_distances(graph: SignedGraph, starts: Sequence[int], max_hops: int, *, reverse: bool = False,
                  undirected: bool = False) -> np.ndarray:
    """Breadth-first hop distance from a set of nodes (``max_hops + 1`` where farther or unreachable).

    Parameters
    ----------
    graph
        The graph.
    starts
        Node positions at distance 0.
    max_hops
        Search depth.
    reverse
        Follow edges backwards (distance *to* the start set).
    undirected
        Follow edges both ways.
    """
    step = graph.reach_matrix("undirected" if undirected else "reverse" if reverse else "forward")
    dist = np.full(graph.n_nodes, max_hops + 1, dtype=np.int64)
    frontier = np.zeros(graph.n_nodes, dtype=bool)
    frontier[np.asarray(starts, dtype=np.int64)] = True
    dist[frontier] = 0
    for hop in range(1, max_hops + 1):
        reach = (step @ frontier.astype(np.float64)) > 0
        new = reach & (dist > hop)
        if not new.any():
            break
        dist[new] = hop
        frontier = new
    return dist


# =================================================================================================
# Step 2: KS-based basal activity thresholds (B.2.1)
# =================================================================================================
def _ecdf(sorted_values: np.ndarray, at: np.ndarray) -> np.ndarray:
    return np.searchsorted(sorted_values, at, side="right") / len(sorted_values)


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
        one on ties). ECDFs are right-continuous, so genes at exactly ``tau_low`` are on the
        background side, matching ``x <= tau_low`` = silent in Algorithm 2.
    """
    bg = np.sort(np.asarray(background, dtype=float))
    sig = np.sort(np.asarray(signal, dtype=float))
    bg, sig = bg[np.isfinite(bg)], sig[np.isfinite(sig)]
    if len(bg) == 0 or len(sig) == 0:
        raise ValueError(f"tau_low needs unchanged and changed items with basal values (got {len(bg)} and {len(sig)})")
    grid = np.unique(np.concatenate([bg, sig]))
    diff = _ecdf(bg, grid) - _ecdf(sig, grid)
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


def basal_state(values: np.ndarray, tau_low: float, tau_high: float) -> np.ndarray:
    """Discretise basal expression: 0 low (``<= tau_low``), 2 high (``>= tau_high``), 1 medium, -1 unknown (NaN)."""
    x = np.asarray(values, dtype=float)
    out = np.full(x.shape, STATE_MEDIUM, dtype=np.int64)
    out[x <= tau_low] = STATE_LOW
    out[x >= tau_high] = STATE_HIGH
    out[~np.isfinite(x)] = STATE_UNKNOWN
    return out


# =================================================================================================
# Step 3: asymmetric basal gating of edge weights (B.2.2)
# =================================================================================================
def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # overflow-free logistic


def gate_edge_weights(graph: SignedGraph, node_basal: np.ndarray, tau_low: float, params: PathParams = PathParams()) -> np.ndarray:
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
    act = _sigmoid(params.beta * (np.where(np.isfinite(b), b, tau_low) - tau_low))
    g_src = np.maximum(act, params.delta_src)
    g_tgt = params.delta_tgt + (1.0 - params.delta_tgt) * act
    return params.w_base * g_src[graph.src] * g_tgt[graph.dst] + params.eps_w


# =================================================================================================
# Step 4: personalized PageRank (B.2.3)
# =================================================================================================
def personalized_pagerank(graph: SignedGraph, weights: np.ndarray, start_sets: Sequence[Sequence[int]],
                          params: PathParams = PathParams(), *, dtype=np.float64) -> np.ndarray:
    """PPR ``p = (1 - alpha) s + alpha P^T p`` for many personalisation vectors at once.

    Parameters
    ----------
    graph
        The graph.
    weights
        Edge weights (e.g. from :func:`gate_edge_weights`); ``P`` is their row-normalised matrix.
    start_sets
        One list of start nodes per column; each start node gets mass ``1/|S|``.
    params
        ``alpha``, ``ppr_max_iter``, ``ppr_tol``.

    Returns
    -------
    numpy.ndarray
        ``n_nodes x len(start_sets)``; each column sums to 1. The mass of dangling nodes (no
        out-edge) returns to the personalisation vector. Power iteration from ``s`` stops after
        ``ppr_max_iter`` steps or once every column changed by less than ``ppr_tol`` in L1.
    """
    n, m = graph.n_nodes, len(start_sets)
    rows, cols, vals = [], [], []
    for j, starts in enumerate(start_sets):
        starts = np.unique(np.asarray(starts, dtype=np.int64))
        if len(starts) == 0:
            raise ValueError(f"start set {j} is empty")
        rows.append(starts)
        cols.append(np.full(len(starts), j))
        vals.append(np.full(len(starts), 1.0 / len(starts)))
    rows, cols, vals = (np.concatenate(a) if a else np.zeros(0, dtype=int) for a in (rows, cols, vals))
    w = np.asarray(weights, dtype=float)
    out_sum = np.bincount(graph.src, weights=w, minlength=n)
    dangling = np.flatnonzero(out_sum == 0)
    inv = 1.0 / np.where(out_sum == 0, 1.0, out_sum)
    pt = sp.csr_matrix((w * inv[graph.src], (graph.dst, graph.src)), shape=(n, n)).astype(dtype)  # P^T
    x = np.zeros((n, m), dtype=dtype)
    x[rows, cols] = vals
    for _ in range(params.ppr_max_iter):
        lost = x[dangling].sum(axis=0)
        new = pt @ x
        new *= params.alpha
        # (1 - alpha) s + alpha s * lost: s is non-zero only at the start nodes
        new[rows, cols] += vals * (params.alpha * lost[cols] + (1.0 - params.alpha))
        x -= new
        np.abs(x, out=x)
        err = x.sum(axis=0).max() if m else 0.0
        x = new
        if err < params.ppr_tol:
            break
    return x


# =================================================================================================
# Step 5: hop-limited Dijkstra on the PPR-informed cost (B.2.3)
# =================================================================================================
def edge_flow(graph: SignedGraph, weights: np.ndarray, ppr: np.ndarray) -> np.ndarray:
    """``w_uv * p_u * p_v`` per edge (the quantity the cost inverts)."""
    return np.asarray(weights) * ppr[graph.src] * ppr[graph.dst]


def edge_costs(graph: SignedGraph, weights: np.ndarray, ppr: np.ndarray, eps_c: float = EPS_C) -> np.ndarray:
    """``cost_uv = 1 / (w_uv p_u p_v + eps_c)`` for every edge."""
    return 1.0 / (edge_flow(graph, weights, ppr) + eps_c)


@dataclasses.dataclass
class LayeredPaths:
    """Result of :func:`hop_limited_shortest_paths`: exact-``h``-hop distances and predecessors.

    ``dist[h, r, v]`` is the cheapest walk of exactly ``h`` edges from the start set to ``v`` under
    cost row ``r``; ``pred[h - 1, r, v]`` the edge entering ``v`` on it (-1 if none).
    """

    dist: np.ndarray
    pred: np.ndarray
    src: np.ndarray

    def best(self, row: int, target: int) -> tuple[float, int]:
        """Cost and hop count of the cheapest path with at most ``max_hops`` edges (inf, 0 if none)."""
        d = self.dist[1:, row, target]
        h = int(np.argmin(d))
        return float(d[h]), h + 1

    def path(self, row: int, target: int) -> tuple[int, ...] | None:
        """Edge indices of the cheapest path to ``target`` (fewest hops on equal cost), or None."""
        cost, hops = self.best(row, target)
        if not np.isfinite(cost):
            return None
        edges = []
        node = target
        for h in range(hops, 0, -1):
            e = int(self.pred[h - 1, row, node])
            edges.append(e)
            node = int(self.src[e])
        return tuple(reversed(edges))


def hop_limited_shortest_paths(src: np.ndarray, dst: np.ndarray, n_nodes: int, costs: np.ndarray,
                               starts: Sequence[int], max_hops: int) -> LayeredPaths:
    """Cheapest paths of at most ``max_hops`` edges from a start set, for several cost vectors.

    A layered Bellman-Ford recursion ``d_h(v) = min_(u->v) d_(h-1)(u) + c_uv``: exactly the
    shortest path Dijkstra finds on (node, depth) states, but vectorised over the edges and over the
    rows of ``costs``. With positive costs the cheapest walk of at most ``max_hops`` edges is a
    simple path (a cycle could be cut to make it cheaper and shorter).

    Parameters
    ----------
    src, dst
        Edge endpoints (node positions).
    n_nodes
        Number of nodes.
    costs
        ``(n_edges,)`` or ``(n_rows, n_edges)`` positive costs; each row is searched independently.
    starts
        Start nodes (distance 0).
    max_hops
        ``D_max``.
    """
    c = np.atleast_2d(np.asarray(costs, dtype=float))
    if c.shape[1] != len(src):
        raise ValueError(f"costs have {c.shape[1]} columns for {len(src)} edges")
    if (c <= 0).any():
        raise ValueError("costs must be positive")
    rows = c.shape[0]
    order = np.argsort(dst, kind="stable")
    src_o, dst_o = src[order], dst[order]
    c_o = c[:, order]
    group_dst, group_start, group_size = np.unique(dst_o, return_index=True, return_counts=True)
    pos = np.arange(len(order))
    dist = np.full((max_hops + 1, rows, n_nodes), np.inf)
    pred = np.full((max_hops, rows, n_nodes), -1, dtype=np.int64)
    dist[0][:, np.asarray(starts, dtype=np.int64)] = 0.0
    if len(order) == 0:
        return LayeredPaths(dist, pred, src)
    for h in range(1, max_hops + 1):
        cand = dist[h - 1][:, src_o] + c_o
        mins = np.minimum.reduceat(cand, group_start, axis=1)
        hit = cand == np.repeat(mins, group_size, axis=1)
        first = np.minimum.reduceat(np.where(hit, pos, len(order)), group_start, axis=1)
        finite = np.isfinite(mins)
        dist[h][:, group_dst] = mins
        pred[h - 1][:, group_dst] = np.where(finite, order[np.minimum(first, len(order) - 1)], -1)
    return LayeredPaths(dist, pred, src)


# =================================================================================================
# Step 6: iterative penalty diversification (B.2.3)
# =================================================================================================
def prune_paths(paths: Sequence[tuple[int, ...]], graph_src: np.ndarray, graph_dst: np.ndarray) -> list[tuple[int, ...]]:
    """Drop duplicate paths and paths whose node set strictly contains another path's node set.

    Order (extraction order) is kept among the survivors.
    """
    unique: list[tuple[int, ...]] = []
    for p in paths:
        if p not in unique:
            unique.append(p)
    node_sets = [frozenset([int(graph_src[p[0]])] + [int(graph_dst[e]) for e in p]) for p in unique]
    return [p for p, ns in zip(unique, node_sets) if not any(other < ns for other in node_sets)]


def diversified_paths(graph: SignedGraph, flow: np.ndarray, starts: Sequence[int], targets: Sequence[int],
                      params: PathParams = PathParams(), *, max_hops: int | None = None,
                      chunk_size: int = 128) -> dict[int, list[tuple[int, ...]]]:
    """Bag of up to ``n_paths`` diverse cheapest paths from a start set to each target.

    Round 1 is the hop-limited shortest path on ``cost = 1 / (flow + eps_c)``; after each round the
    weights of the path's edges are divided by ``penalty`` (cumulatively, in a copy per target, so
    ``flow`` is divided too) and the search is repeated, ``n_paths`` rounds in all. Duplicates and
    node-set supersets are pruned (:func:`prune_paths`).

    Parameters
    ----------
    graph
        The graph.
    flow
        ``w_uv p_u p_v`` per edge (:func:`edge_flow`).
    starts
        Start nodes of the perturbation.
    targets
        Effect-gene nodes.
    params
        ``eps_c``, ``max_hops``, ``n_paths``, ``penalty``.
    max_hops
        Overrides ``params.max_hops`` (e.g. 3 for chemicals after the drug-target edge).
    chunk_size
        Targets searched together (memory: about ``chunk_size x n_edges`` floats).

    Returns
    -------
    dict
        Target node -> list of paths (tuples of edge indices), cheapest first; targets with no path
        within the hop limit (and start nodes) are absent.
    """
    hops = params.max_hops if max_hops is None else int(max_hops)
    starts = np.unique(np.asarray(starts, dtype=np.int64))
    targets = np.asarray(targets, dtype=np.int64)
    fwd = hop_distances(graph, starts, hops)
    reachable = np.unique(targets[(fwd[targets] <= hops) & ~np.isin(targets, starts)])
    out: dict[int, list[tuple[int, ...]]] = {}
    if len(reachable) == 0:
        return out
    flow = np.asarray(flow, dtype=float)
    for lo in range(0, len(reachable), chunk_size):
        chunk = reachable[lo:lo + chunk_size]
        # Only edges on some walk start -> target of at most `hops` edges can be used.
        bwd = hop_distances(graph, chunk, hops, reverse=True)
        keep = fwd[graph.src] + 1 + bwd[graph.dst] <= hops
        e_idx = np.flatnonzero(keep)
        nodes = np.unique(np.concatenate([graph.src[e_idx], graph.dst[e_idx], starts]))
        local = np.full(graph.n_nodes, -1, dtype=np.int64)
        local[nodes] = np.arange(len(nodes))
        s_loc, d_loc = local[graph.src[e_idx]], local[graph.dst[e_idx]]
        f_loc = flow[e_idx]
        t_loc = local[chunk]
        st_loc = local[starts]
        found: list[list[tuple[int, ...]]] = [[] for _ in chunk]
        uses = np.zeros((len(chunk), len(e_idx)))
        for k in range(params.n_paths):
            if k == 0:  # every target shares the unpenalised costs: one row serves them all
                costs = (1.0 / (f_loc + params.eps_c))[None, :]
            else:
                costs = 1.0 / (f_loc[None, :] / params.penalty ** uses + params.eps_c)
            res = hop_limited_shortest_paths(s_loc, d_loc, len(nodes), costs, st_loc, hops)
            for r, t in enumerate(t_loc):
                path = res.path(0 if k == 0 else r, int(t))
                if path is None:
                    continue
                uses[r, list(path)] += 1
                found[r].append(tuple(int(e_idx[e]) for e in path))
        for t, paths in zip(chunk, found):
            if paths:
                out[int(t)] = prune_paths(paths, graph.src, graph.dst)
    return out


# =================================================================================================
# Step 7: label filters (B.2.4, Algorithms 1 and 2)
# =================================================================================================
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
        Basal state of the effect gene (:func:`basal_state` code): low = silent (``b = 0``), high =
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


# =================================================================================================
# The whole search for one cell
# =================================================================================================
def node_values(graph: SignedGraph, values: pd.Series) -> np.ndarray:
    """``values`` (indexed by gene symbol) aligned to the graph's nodes, NaN where absent."""
    return values.reindex(graph.nodes).to_numpy(dtype=float)


@dataclasses.dataclass
class CellSearch:
    """Label-free path search results for the queries of one cell (:func:`extract_paths`)."""

    paths: list[list[tuple[int, ...]]]  # per query: candidate paths (edge indices)
    ppr_target: np.ndarray  # per query: PPR of the effect gene from the perturbation (NaN if not in graph)
    best_cost: np.ndarray  # per query: cost of the cheapest path (inf if none; a drug-target edge costs 0)
    hop_distance: np.ndarray  # per query: directed hop distance p -> g (max_hops + 1 if farther)
    weights: np.ndarray  # gated edge weights of the cell


def extract_paths(graph: SignedGraph, node_basal: np.ndarray, tau_low: float, queries: pd.DataFrame,
                  params: PathParams = PathParams(), *, ppr_batch: int = 256) -> CellSearch:
    """Run gating, PPR and diversified hop-limited search for many queries of one cell.

    Parameters
    ----------
    graph
        The signed graph.
    node_basal
        Basal expression per graph node (NaN unknown).
    tau_low
        Low threshold of the cell.
    queries
        Columns ``perturbation`` (gene symbol, several joined by ``+`` for a combination, whose
        start set is all of them, or a compound of the graph, whose start set is its targets; see
        :meth:`SignedGraph.start_nodes`) and ``gene`` (effect gene).
    params
        Pipeline hyperparameters.
    ppr_batch
        Perturbations whose PPR vectors are computed in one sparse product.
    """
    n_q = len(queries)
    weights = gate_edge_weights(graph, node_basal, tau_low, params)
    paths: list[list[tuple[int, ...]]] = [[] for _ in range(n_q)]
    ppr_target = np.full(n_q, np.nan)
    best_cost = np.full(n_q, np.inf)
    hop_dist = np.full(n_q, params.max_hops + 1, dtype=np.int64)
    pert = queries["perturbation"].astype(str).to_numpy()
    gene_pos = graph.nodes.get_indexer(queries["gene"].astype(str))
    start_sets = {p: starts for p in pd.unique(pert) if (starts := graph.start_nodes(p)) is not None}
    perts = list(start_sets)
    rows_of = pd.Series(np.arange(n_q)).groupby(pert).apply(np.asarray).to_dict()
    for lo in range(0, len(perts), ppr_batch):
        batch = perts[lo:lo + ppr_batch]
        ppr = personalized_pagerank(graph, weights, [start_sets[p] for p in batch], params)
        for j, p in enumerate(batch):
            rows = rows_of[p]
            col = ppr[:, j]
            ok = gene_pos[rows] >= 0
            rows, genes = rows[ok], gene_pos[rows[ok]]
            ppr_target[rows] = col[genes]
            drug = graph.drug_targets(p)
            # A chemical's search runs from its targets with D_max - 1 hops; its edge is prepended.
            lead = 0 if drug is None else 1
            hops = params.max_hops - lead
            fwd = hop_distances(graph, start_sets[p], hops)
            hop_dist[rows] = np.minimum(fwd[genes] + lead, params.max_hops + 1)
            flow = edge_flow(graph, weights, col)
            found = diversified_paths(graph, flow, start_sets[p], genes, params, max_hops=hops)
            cost = 1.0 / (flow + params.eps_c)
            for r, g in zip(rows, genes):
                bag = found.get(int(g))
                if drug is not None:
                    if int(g) in drug:  # the effect gene is a target: the drug-target edge explains it
                        paths[r] = [(drug[int(g)],)]
                        best_cost[r] = 0.0
                        continue
                    bag = [(drug[int(graph.src[path[0]])], *path) for path in bag] if bag else None
                if bag:
                    paths[r] = bag
                    best_cost[r] = float(cost[list(bag[0][lead:])].sum())
    return CellSearch(paths=paths, ppr_target=ppr_target, best_cost=best_cost, hop_distance=hop_dist, weights=weights)


def filter_reference_paths(graph: SignedGraph, paths: Sequence[Sequence[tuple[int, ...]]], labels: Sequence[str],
                           perturbation_types: Sequence[str], target_states: Sequence[int],
                           budget: int = AMBIGUITY_BUDGET) -> list[list[tuple[int, ...]]]:
    """Keep, per query, the candidate paths that pass Algorithm 1 (up/down) or Algorithm 2 (unchanged)."""
    out = []
    for bag, label, kind, state in zip(paths, labels, perturbation_types, target_states):
        out.append([p for p in bag if path_is_reference(graph.sign[list(p)], label, kind, int(state), budget)])
    return out


# =================================================================================================
# Serialisation of paths and triplets
# =================================================================================================
Triplet = tuple[str, int, str]


def path_triplets(graph: SignedGraph, path: Sequence[int], with_databases: bool = False) -> list[list]:
    """``[[source, sign, target(, databases)], ...]`` of a path of edge indices."""
    out = []
    for e in path:
        row = [str(graph.nodes[graph.src[e]]), int(graph.sign[e]), str(graph.nodes[graph.dst[e]])]
        if with_databases:
            row.append(str(graph.databases[e]))
        out.append(row)
    return out


def paths_to_json(graph: SignedGraph, paths: Sequence[tuple[int, ...]]) -> str:
    """JSON list of paths, each a list of ``[source, sign, target, databases]``."""
    return json.dumps([path_triplets(graph, p, with_databases=True) for p in paths], separators=(",", ":"))


def paths_from_json(text: str, where: str = "paths") -> list[list[Triplet]]:
    """Parse :func:`paths_to_json` output into lists of ``(source, sign, target)``."""
    try:
        data = json.loads(text) if text else []
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: not valid JSON ({err})") from None
    if not isinstance(data, list):
        raise ValueError(f"{where}: expected a JSON list of paths")
    return [[_triplet(t, where) for t in path] for path in data]


def triplets_to_json(triplets: Iterable[Sequence]) -> str:
    """JSON list of ``[source, sign, target]``."""
    return json.dumps([[str(t[0]), int(t[1]), str(t[2])] for t in triplets], separators=(",", ":"))


def triplets_from_json(text: str, where: str = "triplets") -> list[Triplet]:
    """Parse a JSON list of ``[source, sign, target]`` (a fourth element is ignored)."""
    try:
        data = json.loads(text) if text else []
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: not valid JSON ({err})") from None
    if not isinstance(data, list):
        raise ValueError(f"{where}: expected a JSON list of triplets")
    return [_triplet(t, where) for t in data]


def _triplet(t, where: str) -> Triplet:
    if not isinstance(t, (list, tuple)) or len(t) < 3 or int(t[1]) not in (-1, 0, 1):
        raise ValueError(f"{where}: {t!r} is not a [source, sign (-1/0/1), target] triplet")
    return (str(t[0]), int(t[1]), str(t[2]))


def unique_triplets(paths: Iterable[Iterable[Triplet]]) -> list[Triplet]:
    """The distinct triplets of several paths, in first-seen order."""
    seen: dict[Triplet, None] = {}
    for path in paths:
        for t in path:
            seen.setdefault(t, None)
    return list(seen)


# =================================================================================================
# The <thinking>/<answer>/<triplets> answer format (section 3.1, C.1)
# =================================================================================================
class ResponseFormatError(ValueError):
    """A model response does not follow the ``<thinking>/<answer>/<triplets>`` format."""


#: A node name in a triplet: gene symbols, and compound names with spaces or brackets, but no comma.
_NAME = r"[^,\s](?:[^,\n]*[^,\s])?"
_TRIPLET_RE = re.compile(rf"^\(\s*({_NAME})\s*,\s*([+-]?1|0)\s*,\s*({_NAME})\s*\)$")
_BLOCK_RE = {tag: re.compile(rf"<{tag}>(.*?)</{tag}>", re.S) for tag in ("thinking", "answer", "triplets")}


def format_triplet(t: Sequence) -> str:
    """``(SOURCE, +1, TARGET)``: the canonical text of one triplet."""
    sign = {1: "+1", -1: "-1", 0: "0"}[int(t[1])]
    return f"({t[0]}, {sign}, {t[2]})"


def format_response(thinking: str, answer: str, triplets: Iterable[Sequence]) -> str:
    """A response in the task's format (what a model is asked to produce)."""
    body = "\n".join(format_triplet(t) for t in triplets)
    return f"<thinking>\n{thinking.strip()}\n</thinking>\n<answer>{answer}</answer>\n<triplets>\n{body}\n</triplets>"


def parse_response(text: str) -> tuple[str, str, list[Triplet]]:
    """Parse a response strictly.

    The text must contain exactly one ``<thinking>``, one ``<answer>`` and one ``<triplets>``
    block, in that order, and nothing else outside them but whitespace. The answer is one of
    ``up``, ``down``, ``unchanged`` (case-insensitive). The triplets block holds zero or more lines
    ``(SOURCE, SIGN, TARGET)`` with SIGN ``+1``, ``1``, ``-1`` or ``0``; blank lines are ignored.

    Returns
    -------
    thinking, answer, triplets

    Raises
    ------
    ResponseFormatError
        Naming the first rule broken.
    """
    if not isinstance(text, str):
        raise ResponseFormatError(f"response is not text: {type(text).__name__}")
    spans = {}
    for tag, pattern in _BLOCK_RE.items():
        found = list(pattern.finditer(text))
        if len(found) != 1:
            raise ResponseFormatError(f"expected exactly one <{tag}>...</{tag}> block, found {len(found)}")
        spans[tag] = found[0]
    if not spans["thinking"].end() <= spans["answer"].start() or not spans["answer"].end() <= spans["triplets"].start():
        raise ResponseFormatError("blocks must come in the order <thinking>, <answer>, <triplets>")
    outside = text[:spans["thinking"].start()] + text[spans["thinking"].end():spans["answer"].start()] + \
        text[spans["answer"].end():spans["triplets"].start()] + text[spans["triplets"].end():]
    if outside.strip():
        raise ResponseFormatError(f"text outside the blocks: {outside.strip()[:60]!r}")
    answer = spans["answer"].group(1).strip().lower()
    if answer not in LABELS:
        raise ResponseFormatError(f"answer must be one of {', '.join(LABELS)}, got {answer[:40]!r}")
    triplets: list[Triplet] = []
    for line in spans["triplets"].group(1).splitlines():
        line = line.strip()
        if not line:
            continue
        m = _TRIPLET_RE.match(line)
        if m is None:
            raise ResponseFormatError(f"not a (SOURCE, SIGN, TARGET) triplet: {line[:60]!r}")
        triplets.append((m.group(1), int(m.group(2)), m.group(3)))
    return spans["thinking"].group(1).strip(), answer, triplets


# =================================================================================================
# Mechanistic faithfulness (section 2.4)
# =================================================================================================
def start_names(perturbation: str, perturbation_type: str) -> list[str]:
    """Where a mechanism starts: the compound itself for a chemical, else the perturbed genes (``A+B`` -> A, B)."""
    if perturbation_type.lower() == "chemical":
        return [perturbation]
    return perturbation.split("+")


def _norm(gene: str) -> str:
    return str(gene).strip().upper()


def edge_recall(predicted: Iterable[Sequence], reference_paths: Sequence[Sequence[Sequence]]) -> float:
    """Fraction of the reference edges (union over reference paths) found in the predicted triplets.

    A reference edge ``(u, s, v)`` is recovered when the prediction has ``(u, s, v)`` with the same
    sign; a reference edge of unknown sign (0) is recovered by ``(u, *, v)`` with any sign. Gene
    symbols are compared case-insensitively. NaN when there is no reference edge.
    """
    ref = {(_norm(t[0]), int(t[1]), _norm(t[2])) for path in reference_paths for t in path}
    if not ref:
        return float("nan")
    pred = {(_norm(t[0]), int(t[1]), _norm(t[2])) for t in predicted}
    pairs = {(u, v) for u, _, v in pred}
    hit = sum(((u, v) in pairs) if s == 0 else ((u, s, v) in pred) for u, s, v in ref)
    return hit / len(ref)


def path_connectivity(predicted: Iterable[Sequence], starts: Iterable[str], target: str) -> float:
    """1.0 when the predicted triplets, read as directed edges, chain a start node to the target; else 0."""
    adj: dict[str, set[str]] = {}
    for t in predicted:
        adj.setdefault(_norm(t[0]), set()).add(_norm(t[2]))
    goal = _norm(target)
    frontier = [_norm(s) for s in starts]
    seen = set(frontier)
    while frontier:
        node = frontier.pop()
        if node == goal:
            return 1.0
        for nxt in adj.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return 0.0


def intermediate_genes(triplets: Iterable[Sequence], starts: Iterable[str], target: str) -> set[str]:
    """Genes named in triplets other than the start nodes and the effect gene."""
    ends = {_norm(s) for s in starts} | {_norm(target)}
    genes = {_norm(t[0]) for t in triplets} | {_norm(t[2]) for t in triplets}
    return genes - ends


@dataclasses.dataclass
class GOProfiles:
    """IDF-weighted GO-BP annotation: ``membership[gene, term]`` (sparse) and ``idf[term] = log(N / n_term)``.

    Rows follow ``genes``; look-ups compare symbols case-insensitively.
    """

    genes: pd.Index
    membership: sp.csr_matrix
    idf: np.ndarray

    def __post_init__(self) -> None:
        self.membership = sp.csr_matrix(self.membership)
        if self.membership.shape != (len(self.genes), len(self.idf)):
            raise ValueError(f"GO membership has shape {self.membership.shape}, expected ({len(self.genes)}, {len(self.idf)})")
        self._key = pd.Index([_norm(g) for g in self.genes])

    @classmethod
    def from_gene_sets(cls, sets: Mapping[str, Sequence[str]], genes: Iterable[str] | None = None) -> GOProfiles:
        """Build from a GMT mapping; ``idf`` counts over every annotated gene of ``sets``.

        ``genes`` gives the stored rows, in order (default: every annotated gene); the IDF still
        uses the whole collection.
        """
        names = list(sets)
        members = [{_norm(g) for g in sets[n]} for n in names]
        all_genes = sorted(set().union(*members)) if members else []
        sizes = np.array([len(m) for m in members], dtype=float)
        idf = np.log(len(all_genes) / sizes) if len(names) else np.zeros(0)
        index = pd.Index(all_genes if genes is None else list(dict.fromkeys(genes)))
        key = pd.Index([_norm(g) for g in index])
        rows, cols = [], []
        for j, m in enumerate(members):
            pos = key.get_indexer(sorted(m))
            pos = pos[pos >= 0]
            rows.append(pos)
            cols.append(np.full(len(pos), j))
        r = np.concatenate(rows) if rows else np.array([], dtype=np.int64)
        c = np.concatenate(cols) if cols else np.array([], dtype=np.int64)
        mat = sp.csr_matrix((np.ones(len(r)), (r, c)), shape=(len(index), len(names)))
        return cls(genes=index, membership=mat, idf=idf)

    def profile(self, genes: Iterable[str]) -> np.ndarray:
        """Sum of the IDF-weighted annotation vectors of ``genes`` (unknown genes add nothing)."""
        pos = self._key.get_indexer([_norm(g) for g in genes])
        pos = pos[pos >= 0]
        if len(pos) == 0:
            return np.zeros(len(self.idf))
        return np.asarray(self.membership[pos].sum(axis=0)).ravel() * self.idf


def go_similarity(predicted: Sequence[Sequence], reference_paths: Sequence[Sequence[Sequence]], starts: Iterable[str],
                  target: str, profiles: GOProfiles) -> float:
    """Cosine similarity of the IDF-weighted GO-BP profiles of predicted and reference intermediate genes.

    Conventions: no predicted triplet -> 0; same intermediate gene set (including both empty, i.e.
    a direct edge named as such) -> 1; exactly one side empty, or a profile with no annotated gene,
    -> 0. NaN when there is no reference path.
    """
    if not reference_paths:
        return float("nan")
    starts = list(starts)
    if not list(predicted):
        return 0.0
    pred = intermediate_genes(predicted, starts, target)
    ref = intermediate_genes([t for path in reference_paths for t in path], starts, target)
    if pred == ref:
        return 1.0
    if not pred or not ref:
        return 0.0
    a, b = profiles.profile(pred), profiles.profile(ref)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 0.0
    return float(a @ b / (na * nb))


def balanced_accuracy_items(truth: Sequence[str], predicted: Sequence[str]) -> np.ndarray:
    """Per-item influence values whose mean is the balanced accuracy over the classes in ``truth``.

    Item ``i`` of class ``k`` gets ``BA + N / (K n_k) * (1[correct_i] - recall_k)``: the delta-method
    linearisation of ``BA = (1/K) sum_k recall_k``. Their mean is exactly the balanced accuracy, and a
    bootstrap of their mean has the first-order variance of the balanced accuracy itself (a perfect
    prediction gives every item 1, so its interval is [1, 1]). Single values may leave [0, 1].
    """
    truth = np.asarray(truth, dtype=object)
    correct = (truth == np.asarray(predicted, dtype=object)).astype(float)
    classes, inverse, counts = np.unique(truth, return_inverse=True, return_counts=True)
    recall = np.bincount(inverse, weights=correct, minlength=len(classes)) / counts
    ba = recall.mean()
    return ba + len(truth) / (len(classes) * counts[inverse]) * (correct - recall[inverse])


# =================================================================================================
# Items: thresholds and reference paths of many (cell, perturbation, gene) items
# =================================================================================================
def cell_thresholds(items: pd.DataFrame, basal: pd.DataFrame, profile: pd.DataFrame) -> pd.DataFrame:
    """``tau_low`` and ``tau_high`` of every cell of ``items`` (B.2.1).

    Parameters
    ----------
    items
        ``cell``, ``gene``, ``label``: every labelled item of the cell (the background / signal
        samples of ``tau_low``, one value per item).
    basal
        Basal expression by gene symbol (genes x cells), on the pipeline's scale (log1p NX).
    profile
        The whole expression profile (all genes x cells, same scale) for ``tau_high``.

    Returns
    -------
    pandas.DataFrame
        Indexed by cell: ``tau_low``, ``tau_high``, ``n_background``, ``n_signal``.
    """
    rows = {}
    for cell, sub in items.groupby("cell", sort=True):
        if cell not in basal.columns or cell not in profile.columns:
            raise KeyError(f"no basal expression column for cell {cell!r}")
        x = sub["gene"].map(basal[cell]).to_numpy(dtype=float)
        ok = np.isfinite(x)
        unchanged = sub["label"].to_numpy() == "unchanged"
        tl = tau_low_ks(x[ok & unchanged], x[ok & ~unchanged])
        th = tau_high_ks(profile[cell].to_numpy(dtype=float), tl)
        rows[cell] = {"tau_low": tl, "tau_high": th, "n_background": int((ok & unchanged).sum()),
                      "n_signal": int((ok & ~unchanged).sum())}
    return pd.DataFrame.from_dict(rows, orient="index")


def search_items(items: pd.DataFrame, graph: SignedGraph, basal: pd.DataFrame, thresholds: pd.DataFrame,
                 params: PathParams = PathParams()) -> tuple[list[list[tuple[int, ...]]], pd.DataFrame]:
    """Label-free diversified path search for items of any cells (steps 3-6).

    Returns
    -------
    paths, features
        Per item (in ``items`` order) its candidate paths (edge indices), and a frame with
        ``ppr_target``, ``best_cost``, ``hop_distance`` and ``gene_state`` (basal state code).
    """
    paths: list[list[tuple[int, ...]]] = [[] for _ in range(len(items))]
    feats = pd.DataFrame({"ppr_target": np.nan, "best_cost": np.inf, "hop_distance": params.max_hops + 1,
                          "gene_state": STATE_UNKNOWN}, index=items.index)
    pos = np.arange(len(items))
    for cell, idx in pd.Series(pos).groupby(items["cell"].to_numpy()):
        sub = items.iloc[idx.to_numpy()]
        tl, th = float(thresholds.loc[cell, "tau_low"]), float(thresholds.loc[cell, "tau_high"])
        res = extract_paths(graph, node_values(graph, basal[cell]), tl, sub, params)
        for k, i in enumerate(idx.to_numpy()):
            paths[i] = res.paths[k]
        cols = ["ppr_target", "best_cost", "hop_distance", "gene_state"]
        feats.iloc[idx.to_numpy(), [feats.columns.get_loc(c) for c in cols[:3]]] = np.column_stack(
            [res.ppr_target, res.best_cost, res.hop_distance])
        feats.iloc[idx.to_numpy(), feats.columns.get_loc("gene_state")] = basal_state(
            sub["gene"].map(basal[cell]).to_numpy(dtype=float), tl, th)
    feats["hop_distance"] = feats["hop_distance"].astype(int)
    feats["gene_state"] = feats["gene_state"].astype(int)
    return paths, feats


def reference_paths_for_items(items: pd.DataFrame, graph: SignedGraph, basal: pd.DataFrame, thresholds: pd.DataFrame,
                              params: PathParams = PathParams()) -> pd.DataFrame:
    """Candidate and reference paths of labelled items (the whole B.2 pipeline).

    Parameters
    ----------
    items
        ``cell``, ``perturbation``, ``perturbation_type``, ``gene``, ``label``.
    graph
        The signed graph.
    basal
        Basal expression by gene symbol x cell (log1p NX; NaN unknown).
    thresholds
        :func:`cell_thresholds`.
    params
        Pipeline hyperparameters.

    Returns
    -------
    pandas.DataFrame
        Indexed like ``items``: ``candidate_paths`` and ``reference_paths`` (JSON, see
        :func:`paths_to_json`), ``n_candidate_paths``, ``n_reference_paths``, ``gene_state``.
    """
    paths, feats = search_items(items, graph, basal, thresholds, params)
    refs = filter_reference_paths(graph, paths, items["label"].to_numpy(), items["perturbation_type"].to_numpy(),
                                  feats["gene_state"].to_numpy(), params.ambiguity_budget)
    return pd.DataFrame({
        "candidate_paths": [paths_to_json(graph, p) for p in paths],
        "reference_paths": [paths_to_json(graph, p) for p in refs],
        "n_candidate_paths": [len(p) for p in paths],
        "n_reference_paths": [len(p) for p in refs],
        "gene_state": feats["gene_state"].to_numpy(),
    }, index=items.index)


def restrict_graph(graph: SignedGraph, perturbations: Iterable[str], genes: Iterable[str], max_hops: int = MAX_HOPS) -> SignedGraph:
    """Edges that lie on some walk of at most ``max_hops`` edges from a perturbation to a gene.

    Used to make small test resources: every path the search can return for those items survives.
    """
    # A compound starts at its own node: its drug-target edges are the first hop of its walks.
    names = [g for p in perturbations for g in ([str(p)] if graph.drug_targets(p) else str(p).split("+"))]
    starts = graph.nodes.get_indexer(names)
    ends = graph.nodes.get_indexer(list(genes))
    starts, ends = starts[starts >= 0], ends[ends >= 0]
    if len(starts) == 0 or len(ends) == 0:
        raise ValueError("restrict_graph: no perturbation or no gene is a node of the graph")
    fwd = hop_distances(graph, starts, max_hops)
    bwd = hop_distances(graph, ends, max_hops, reverse=True)
    return graph.subgraph(fwd[graph.src] + 1 + bwd[graph.dst] <= max_hops)


# =================================================================================================
# Task files
# =================================================================================================
ANSWERS = (*LABELS, "invalid")


def write_prediction(path: str | Path, test, answers: Sequence[str], triplets: Sequence[Sequence[Sequence]],
                     method_id: str, extra: Mapping[str, Sequence[str]] | None = None) -> None:
    """Write a PertReasonQA prediction (``answer``, ``triplets`` JSON per test item) as h5ad.

    Parameters
    ----------
    path
        Output file.
    test
        The test AnnData (its ``obs_names`` and ``uns['dataset_id']`` are used).
    answers
        One of :data:`ANSWERS` per item.
    triplets
        Per item, the mechanism's ``(source, sign, target)`` triplets.
    method_id
        Written to ``uns['method_id']``.
    extra
        Further string columns (``response``, ``parse_error``).
    """
    import anndata as ad

    answers = [str(a) for a in answers]
    bad = sorted(set(answers) - set(ANSWERS))
    if bad:
        raise ValueError(f"{path}: answers must be one of {ANSWERS}, got {bad[:3]}")
    if len(answers) != test.n_obs or len(triplets) != test.n_obs:
        raise ValueError(f"{path}: {len(answers)} answers and {len(triplets)} triplet lists for {test.n_obs} test items")
    obs = pd.DataFrame({"answer": answers, "triplets": [triplets_to_json(t) for t in triplets]}, index=test.obs_names.copy())
    for key, values in (extra or {}).items():
        obs[key] = [str(v) for v in values]
    ad.AnnData(obs=obs, uns={"dataset_id": str(test.uns["dataset_id"]), "method_id": method_id}).write_h5ad(path)


def read_context(adata) -> tuple[pd.DataFrame, pd.DataFrame, GOProfiles]:
    """Split a context AnnData into basal expression (genes x cells), thresholds (cells) and GO profiles."""
    import scipy.sparse as _sp

    x = adata.X.toarray() if _sp.issparse(adata.X) else np.asarray(adata.X, dtype=float)
    basal = pd.DataFrame(x.T, index=adata.var_names.copy(), columns=adata.obs_names.copy())
    thresholds = adata.obs[["tau_low", "tau_high"]].astype(float)
    go = GOProfiles(genes=adata.var_names.copy(), membership=adata.varm["go_bp"], idf=np.asarray(adata.uns["go_bp_idf"], dtype=float))
    return basal, thresholds, go


def read_graph(path: str | Path) -> SignedGraph:
    """The graph file of a dataset (``source, target, sign, databases``)."""
    return SignedGraph.from_frame(pd.read_csv(path), where=str(path))


def aligned_prediction(solution_obs: pd.DataFrame, prediction_obs: pd.DataFrame, where: str = "prediction") -> pd.DataFrame:
    """The prediction's rows in the solution's order, answers checked against :data:`ANSWERS`."""
    missing = solution_obs.index.difference(prediction_obs.index)
    if len(missing):
        raise ValueError(f"{where}: no prediction for {len(missing)} items, e.g. {list(missing[:3])}")
    pred = prediction_obs.loc[solution_obs.index].copy()
    pred["answer"] = pred["answer"].astype(str)
    bad = sorted(set(pred["answer"]) - set(ANSWERS))
    if bad:
        raise ValueError(f"{where}: answers must be one of {ANSWERS}, got {bad[:3]}")
    return pred


def faithfulness_table(solution_obs: pd.DataFrame, prediction_obs: pd.DataFrame, go: GOProfiles | None = None,
                       where: str = "prediction") -> pd.DataFrame:
    """Per-item outcome and faithfulness scores of a prediction.

    Parameters
    ----------
    solution_obs
        ``perturbation``, ``gene``, ``label``, ``reference_paths`` per item.
    prediction_obs
        ``answer`` and ``triplets`` per item (same index).
    go
        GO profiles; without them ``go_similarity`` is NaN.
    where
        Name of the prediction file, for error messages.

    Returns
    -------
    pandas.DataFrame
        Indexed like the solution: ``correct`` (bool), ``has_reference`` (bool), and for items with
        a reference path ``edge_recall``, ``path_connectivity``, ``go_similarity`` (NaN otherwise).
        The start nodes of a perturbation are its genes (``A+B`` -> A and B), or the compound
        (:func:`start_names`).
    """
    pred = aligned_prediction(solution_obs, prediction_obs, where)
    answers = pred["answer"].to_numpy()
    rows = []
    for item, sol, ans, trip in zip(solution_obs.index, solution_obs.itertuples(index=False), answers, pred["triplets"].astype(str)):
        refs = paths_from_json(str(sol.reference_paths), f"solution reference_paths of {item}")
        triplets = triplets_from_json(trip, f"{where}: triplets of {item}")
        starts = start_names(str(sol.perturbation), str(getattr(sol, "perturbation_type", "")))
        row = {"correct": ans == str(sol.label), "has_reference": bool(refs),
               "edge_recall": np.nan, "path_connectivity": np.nan, "go_similarity": np.nan}
        if refs:
            row["edge_recall"] = edge_recall(triplets, refs)
            row["path_connectivity"] = path_connectivity(triplets, starts, str(sol.gene))
            if go is not None:
                row["go_similarity"] = go_similarity(triplets, refs, starts, str(sol.gene), go)
        rows.append(row)
    return pd.DataFrame(rows, index=solution_obs.index)


def failure_modes(table: pd.DataFrame, edge_recall_threshold: float = 0.5) -> pd.DataFrame:
    """Per-item failure modes of the items of :func:`faithfulness_table` that have a reference path.

    A reason is right when the triplets chain the perturbation to the effect gene and recover at
    least ``edge_recall_threshold`` of the reference edges.

    Returns
    -------
    pandas.DataFrame
        ``right_answer_wrong_reason`` and ``wrong_answer_right_reason`` (0/1 floats).
    """
    scored = table[table["has_reference"]]
    reason = (scored["path_connectivity"] == 1) & (scored["edge_recall"] >= edge_recall_threshold)
    correct = scored["correct"].astype(bool)
    return pd.DataFrame({"right_answer_wrong_reason": (correct & ~reason).astype(float),
                         "wrong_answer_right_reason": (~correct & reason).astype(float)}, index=scored.index)


# =================================================================================================
# Language-model prompts (section 3, appendix B.2.5) and the answer loop
# =================================================================================================
#: Short description of each cell line, for prompts.
CELL_DESCRIPTIONS = {
    "K562": "K562, a chronic myelogenous leukemia cell line of erythroleukemic character",
    "RPE1": "hTERT-RPE1, a telomerase-immortalised retinal pigment epithelial cell line",
    "B cells": "B cells, primary human B lymphocytes of peripheral blood (PBMC)",
    "Myeloid cells": "myeloid cells, primary human monocytes and dendritic cells of peripheral blood (PBMC)",
    "NK cells": "NK cells, primary human natural killer cells of peripheral blood (PBMC)",
    "T cells CD4+": "CD4+ T cells, primary human helper T lymphocytes of peripheral blood (PBMC)",
    "T cells CD8+": "CD8+ T cells, primary human cytotoxic T lymphocytes of peripheral blood (PBMC)",
    "T regulatory cells": "regulatory T cells, primary human CD4+ FOXP3+ T lymphocytes of peripheral blood (PBMC)",
}

SYSTEM_PROMPT = (
    "You are an expert molecular biologist who explains perturbation experiments mechanistically. "
    "Reason about signed regulatory paths and the cell's basal expression state: an inhibitory edge (-1) "
    "inverts a signal, an activating edge (+1) keeps it; a decrease cannot lower a gene that is already "
    "silent (low), and an increase cannot raise a gene that is already saturated (high).\n"
    "Answer in exactly this format and nothing else:\n"
    "<thinking>\nyour step-by-step mechanistic reasoning\n</thinking>\n"
    "<answer>up|down|unchanged</answer>\n"
    "<triplets>\n(SOURCE, SIGN, TARGET)\n...\n</triplets>\n"
    "where each triplet is one regulatory edge of your mechanism, SIGN is +1 (activates), -1 (inhibits) or 0 "
    "(unknown), one triplet per line, chaining the perturbed gene (or the compound, through its targets) to the "
    "effect gene."
)

_PATH_LINE = re.compile(r"^\s*\d+\.\s+(.*)$")
_PATH_STEP = re.compile(r"^(\S.*?)\s+\[(\w+)\]$")
_PATH_ARROW = re.compile(r"\s+--\(([+-]?1|0)\)-->\s+")
_PERTURBATION_TEXT = {"crispri": "CRISPRi knockdown", "knockdown": "knockdown", "knockout": "knockout",
                      "crispra": "CRISPRa activation", "inhibitor": "inhibition", "activator": "activation",
                      "chemical": "treatment with the compound"}


def state_name(value: float, tau_low: float, tau_high: float) -> str:
    """``low``, ``medium``, ``high`` or ``unknown`` (B.2.5's discretisation)."""
    return STATE_NAMES[int(basal_state(np.array([value]), tau_low, tau_high)[0])]


def serialize_paths(paths: Sequence[Sequence[Sequence]], states: Mapping[str, str]) -> list[str]:
    """One line per path, ``A [state] --(+1)--> B [state] ...``, paths in breadth-first order.

    The paths all start at the perturbation; ordering them by length, then by their gene sequence,
    lists upstream events before the downstream ones (the flat BFS serialisation of B.2.5).
    """
    ordered = sorted(paths, key=lambda p: (len(p), [t[2] for t in p]))
    lines = []
    for i, path in enumerate(ordered, 1):
        text = f"{path[0][0]} [{states.get(str(path[0][0]), 'unknown')}]"
        for t in path:
            sign = {1: "+1", -1: "-1", 0: "0"}[int(t[1])]
            text += f" --({sign})--> {t[2]} [{states.get(str(t[2]), 'unknown')}]"
        lines.append(f"{i}. {text}")
    return lines


def parse_serialized_paths(text: str) -> list[tuple[list[tuple[str, int, str]], dict[str, str]]]:
    """Inverse of :func:`serialize_paths` on the numbered lines of ``text``: (triplets, gene states) per path."""
    out = []
    for line in text.splitlines():
        m = _PATH_LINE.match(line)
        if not m or "-->" not in m.group(1):
            continue
        parts = _PATH_ARROW.split(m.group(1).strip())  # step, sign, step, sign, ..., step
        steps = [_PATH_STEP.match(p) for p in parts[0::2]]
        if len(parts) < 3 or any(st is None for st in steps):
            continue
        names = [st.group(1) for st in steps]
        triplets = [(names[i], int(parts[2 * i + 1]), names[i + 1]) for i in range(len(names) - 1)]
        out.append((triplets, {st.group(1): st.group(2) for st in steps}))
    return out


def question_prompt(cell: str, perturbation: str, perturbation_type: str, gene: str, states: Mapping[str, str],
                    paths: Sequence[Sequence[Sequence]] | None, extra: str = "",
                    targets: Sequence[tuple[str, int]] | None = None) -> str:
    """The user message of one question.

    Parameters
    ----------
    cell, perturbation, perturbation_type, gene
        The item.
    states
        Basal state (low/medium/high/unknown) of every gene named in the prompt.
    paths
        Candidate paths (the cell-conditioned context), or None for the no-path setting.
    extra
        Further context (retrieved examples) inserted before the question.
    targets
        A compound's known targets with the sign of its action (:func:`compound_targets`).
    """
    event = perturbation_phrase(perturbation, perturbation_type)
    chemical = perturbation_type.lower() == "chemical"
    if chemical:
        states = {**states, perturbation: "compound"}
        action = {1: "activates", -1: "inhibits", 0: "acts on"}
        known = ", ".join(f"{action[int(s)]} {t}" for t, s in (targets or [])) or "none known"
        subject = f"Perturbation: {event} (known targets: {known})."
    else:
        subject = f"Perturbation: {event} (basal expression: {states.get(perturbation, 'unknown')})."
    lines = [
        f"Cell line: {CELL_DESCRIPTIONS.get(cell, cell)}.",
        subject,
        f"Effect gene: {gene} (basal expression: {states.get(gene, 'unknown')}).",
        "Basal expression states: low = silent (at or below the cell's low threshold), high = saturated "
        "(at or above its high threshold), medium in between.",
    ]
    if paths is not None:
        lines.append("")
        if paths:
            lines.append("Candidate regulatory paths from the knowledge graph, conditioned on the cell's basal state "
                         "(sign +1 activates, -1 inhibits, 0 unknown; [state] = basal expression):")
            lines.extend(serialize_paths(paths, states))
        else:
            lines.append("No regulatory path of at most four edges links the perturbation to the effect gene in the "
                         "cell-conditioned knowledge graph.")
    if extra:
        lines.extend(["", extra.strip()])
    cells = cell if cell.endswith("cells") else f"{cell} cells"
    lines.extend(["", f"Question: after {event} in {cells}, does {gene} go up, go down, or stay "
                  "unchanged? Give the mechanism as signed triplets."])
    return "\n".join(lines)


def perturbation_phrase(perturbation: str, perturbation_type: str) -> str:
    """``CRISPRi knockdown of A`` or ``treatment with the compound X``: the perturbation in prose."""
    kind = _PERTURBATION_TEXT.get(perturbation_type.lower(), perturbation_type)
    return f"{kind} {perturbation}" if perturbation_type.lower() == "chemical" else f"{kind} of {perturbation}"


def compound_targets(graph: SignedGraph, perturbation: str) -> list[tuple[str, int]]:
    """A compound's targets with the signs of its drug-target edges (empty for a gene)."""
    edges = graph.drug_targets(perturbation) or {}
    return [(str(graph.nodes[t]), int(graph.sign[e])) for t, e in sorted(edges.items(), key=lambda kv: str(graph.nodes[kv[0]]))]


def gene_states(genes: Iterable[str], cell: str, basal: pd.DataFrame, thresholds: pd.DataFrame) -> dict[str, str]:
    """Basal state name of each gene in one cell (``unknown`` without a value)."""
    tl, th = float(thresholds.loc[cell, "tau_low"]), float(thresholds.loc[cell, "tau_high"])
    col = basal[cell] if cell in basal.columns else pd.Series(dtype=float)
    return {g: state_name(float(col.get(g, np.nan)), tl, th) for g in genes}


def answer_with_llm(client, prompts: Sequence[str], sampling) -> pd.DataFrame:
    """Send every prompt (with :data:`SYSTEM_PROMPT`) and parse each response strictly.

    Returns
    -------
    pandas.DataFrame
        ``answer`` (``invalid`` when the response breaks the format), ``triplets`` (list),
        ``response``, ``parse_error`` ('' when parsed), one row per prompt.
    """
    conversations = [[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": p}] for p in prompts]
    texts = client.generate(conversations, sampling)
    rows = []
    for completions in texts:
        text = completions[0]
        try:
            _, answer, triplets = parse_response(text)
            error = ""
        except ResponseFormatError as err:
            answer, triplets, error = "invalid", [], str(err)
        rows.append({"answer": answer, "triplets": triplets, "response": text, "parse_error": error})
    return pd.DataFrame(rows)
