"""The signed, directed knowledge graph of PertReasonQA (Kim et al. 2026, appendix B.2.2, B.2.3).

:func:`build_signed_graph` merges OmniPath, DoRothEA and TRRUST into one signed, directed edge per
gene pair, each edge keeping the databases it comes from (B.2.2, B.2.4 "evidence augmentation");
:class:`SignedGraph` holds it, with compounds as nodes whose out-edges are their drug-target
edges (B.2.3). The graph queries the pipeline shares live here too: start sets ``S(p)``, hop
distances, values aligned to nodes, a compound's targets, and the cut-down graph of small test
resources (:func:`restrict_graph`).

Choices the paper leaves open
-----------------------------
- **Sign consensus** (stand-in for INDRA CoGEx, which is not available offline): each database row
  votes its sign; unsigned rows abstain; the majority of signed votes wins; a tie, or no signed vote,
  leaves the edge ambiguous (sign 0).
- **Chemical perturbations**: a compound is a node of the graph whose out-edges are its
  drug-target edges (``interaction == "drug_target"``, signed +1 for an activator, -1 for an
  inhibitor, 0 when unknown). Its start set ``S(p)`` is its targets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from pertreasonqa_lib.path_params import MAX_HOPS
from pertsci import knowledge_graphs as kg

#: ``interaction`` of an edge from a compound to one of its targets (graph files, :class:`SignedGraph`).
DRUG_TARGET = "drug_target"
#: ``interaction`` of an edge between two genes.
REGULATION = "regulation"


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
        idx = self.node_positions(str(perturbation).split("+"))
        return idx if (idx >= 0).all() else None

    def node_positions(self, names: Iterable[str]) -> np.ndarray:
        """Position of each name among the nodes, -1 where it is none (as ``nodes.get_indexer``).

        A cached dictionary: the per-item queries of the controls and the path search name a few
        nodes at a time, where an index look-up costs more than the search itself.
        """
        lookup = self.__dict__.get("_node_positions")
        if lookup is None:
            lookup = self.__dict__["_node_positions"] = dict(zip(self.nodes, range(len(self.nodes))))
        return np.fromiter((lookup.get(n, -1) for n in names), dtype=np.int64)

    def out_edges(self) -> dict[int, list[tuple[int, int]]]:
        """Cached node -> ``(edge, target node)`` of its out-edges, in edge order (nodes without one are absent)."""
        out = self.__dict__.get("_out_edges")
        if out is None:
            out = {}
            for e, (u, v) in enumerate(zip(np.asarray(self.src).tolist(), np.asarray(self.dst).tolist())):
                out.setdefault(u, []).append((e, v))
            self.__dict__["_out_edges"] = out
        return out

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
    # The set of databases of a pair as a bit mask (a sum over its distinct databases), named once
    # per mask: a handful of masks where a string join per pair would run tens of thousands of times.
    database = df["database"].astype(str)
    names = sorted(database.unique())
    if len(names) > 62:
        raise ValueError(f"edge table: {len(names)} databases; at most 62 can be merged")
    bits = pd.Series(np.left_shift(1, pd.Categorical(database, categories=names).codes.astype(np.int64)), index=df.index)
    distinct = ~df.duplicated(["source", "target", "database"])
    masks = bits[distinct].groupby([df.loc[distinct, "source"], df.loc[distinct, "target"]], sort=True).sum()
    labels = {int(m): ";".join(n for i, n in enumerate(names) if m >> i & 1) for m in np.unique(masks.to_numpy())}
    merged["databases"] = masks.reindex(merged.index).map(labels)
    merged = merged.reset_index()
    return SignedGraph.from_frame(merged)


def load_signed_graph(kg_dir: str | Path) -> SignedGraph:
    """OmniPath signed signalling + DoRothEA A-C + TRRUST, from :mod:`pertsci.knowledge_graphs`.

    Parameters
    ----------
    kg_dir
        The knowledge-graph folder holding the three databases' files (the shared data folder's
        ``knowledge_graphs/``).
    """
    edges = pd.concat([kg.omnipath_edges(kg_dir), kg.dorothea_edges(kg_dir), kg.trrust_edges(kg_dir)],
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

    Returns
    -------
    numpy.ndarray
        Read-only: the graph keeps the last answer of each direction for the next call with the same
        start set and depth (a perturbation's items are answered one after the other, each from its
        start nodes).
    """
    direction = "undirected" if undirected else "reverse" if reverse else "forward"
    key = (max_hops, tuple(np.asarray(starts, dtype=np.int64).tolist()))
    last = graph.__dict__.setdefault("_last_hop_distances", {})
    if direction in last and last[direction][0] == key:
        return last[direction][1]
    step = graph.reach_matrix(direction)
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
    dist.flags.writeable = False
    last[direction] = (key, dist)
    return dist


def node_values(graph: SignedGraph, values: pd.Series) -> np.ndarray:
    """``values`` (indexed by gene symbol) aligned to the graph's nodes, NaN where absent."""
    return values.reindex(graph.nodes).to_numpy(dtype=float)


def compound_targets(graph: SignedGraph, perturbation: str) -> list[tuple[str, int]]:
    """A compound's targets with the signs of its drug-target edges (empty for a gene)."""
    edges = graph.drug_targets(perturbation) or {}
    return [(str(graph.nodes[t]), int(graph.sign[e])) for t, e in sorted(edges.items(), key=lambda kv: str(graph.nodes[kv[0]]))]


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
    on_walk = fwd[graph.src] + 1 + bwd[graph.dst] <= max_hops
    # A compound keeps its drug-target edges even where no walk reaches an item's gene: what a
    # compound targets is part of its question, not only of its answer.
    own_targets = graph.drug_edge & np.isin(graph.src, starts)
    return graph.subgraph(on_walk | own_targets)
