"""Graph models of PerturbQA's pair subtasks: an MLP and a graph attention network (GAT).

PerturbQA (Wu et al., ICLR 2025, section 5.1 and appendix A.4) trains a GAT "with a ternary (up,
down, no change) classification objective over the same knowledge graphs used to generate the
prompts", which "quantifies the information content contained in graph adjacencies alone". This
module holds both that model and an MLP ablation without message passing, sharing everything
else:

* :func:`build_graph` turns the knowledge-graph edge table into a node index (genes and set
  nodes: complexes, pathways, GO terms), an edge list read in both directions with self-loops,
  an edge type per edge (the source database, so the GAT learns edge attributes as in appendix
  A.4), and a pooling matrix from the task's entities (perturbations, downstream genes, and the
  downstream gene sets of K562-set, pooled as the mean of their members, appendix A.4) to nodes.
* :func:`spectral_features` gives every node fixed features from the graph alone: the leading
  singular vectors of the symmetrically normalised adjacency (a spectral embedding), its log
  degree and whether it is in the graph at all. Test perturbations are unseen in training, so
  node features must come from the graph rather than from learned per-entity embeddings.
* :class:`GATLayer` is a multi-head graph attention layer (Velickovic et al. 2018) with a learned
  bias per edge type in the attention logits; :class:`PairModel` encodes nodes (MLP or GAT),
  pools entities, and classifies a pair (p, g) from ``[h_p, h_g, h_p * h_g]`` into
  unchanged / down / up.
* :func:`fit_predict` trains on the training pairs' ternary responses with cross-entropy and
  scores test pairs with :func:`subtask_scores`: for ``de`` P(up) + P(down) = 1 - P(unchanged),
  for ``dir`` P(up) / (P(up) + P(down)).

Choices the paper leaves open, made here: fixed node features are spectral (the paper does not
say which node features it used); training runs a fixed number of epochs instead of selecting
models on a 10% validation split; one model answers both pair subtasks (it is trained on the
ternary response, from which both follow).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp
import torch
from torch import nn

from perturbqa_lib.task_items import RESPONSES

__all__ = ["Graph", "build_graph", "spectral_features", "ternary_targets", "subtask_scores",
           "GATLayer", "PairModel", "fit_predict", "predict_proba", "pair_item_scores", "device"]

#: Edge type of the self-loops every node gets (so that it attends to itself).
SELF_LOOP = "self"


def device() -> torch.device:
    """The GPU when one is available, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@dataclasses.dataclass
class Graph:
    """A knowledge graph ready for the models.

    Attributes
    ----------
    nodes : pandas.Index
        Node names (knowledge-graph nodes, then entities absent from the graph).
    edge_index : numpy.ndarray, shape (2, n_edges)
        ``(source, target)`` node positions; every edge in both directions plus a self-loop per node.
    edge_type : numpy.ndarray, shape (n_edges,)
        Position of each edge's type in ``edge_types``.
    edge_types : list of str
        Source databases, then :data:`SELF_LOOP`.
    entities : pandas.Index
        The task's entities (perturbations, downstream genes or gene sets).
    pool : scipy.sparse.csr_matrix, shape (n_entities, n_nodes)
        Row-stochastic: an entity is its node, or the mean of its set's member nodes.
    in_graph : numpy.ndarray of bool, shape (n_nodes,)
        Whether a node has any knowledge-graph edge.
    """

    nodes: pd.Index
    edge_index: np.ndarray
    edge_type: np.ndarray
    edge_types: list[str]
    entities: pd.Index
    pool: sp.csr_matrix
    in_graph: np.ndarray


def build_graph(edges: pd.DataFrame, entities: Sequence[str], sets: Mapping[str, Sequence[str]] | None = None) -> Graph:
    """Build the model graph of a knowledge-graph edge table and the task's entities.

    Parameters
    ----------
    edges : pandas.DataFrame
        ``source, target, database`` (the task's ``kg_edges.parquet``).
    entities : sequence of str
        Perturbations and downstream entities to embed.
    sets : mapping, optional
        Downstream gene sets (K562-set): set name -> member genes. Such an entity pools the mean
        of its members (members absent from the graph count as isolated nodes).

    Returns
    -------
    Graph
    """
    missing = {"source", "target", "database"} - set(edges.columns)
    if missing:
        raise ValueError(f"knowledge-graph edges lack column(s) {sorted(missing)}")
    sets = dict(sets or {})
    src = edges["source"].astype(str).to_numpy()
    dst = edges["target"].astype(str).to_numpy()
    kg_nodes = pd.Index(sorted(set(src) | set(dst)))
    entities = pd.Index(pd.unique(pd.Series([str(e) for e in entities], dtype=object)))
    wanted = [m for e in entities for m in (sets[e] if e in sets else [e])]
    extra = sorted(set(wanted) - set(kg_nodes))
    nodes = kg_nodes.append(pd.Index(extra))
    n = len(nodes)
    i, j = nodes.get_indexer(src), nodes.get_indexer(dst)
    edge_types = sorted(edges["database"].astype(str).unique()) + [SELF_LOOP]
    t = pd.Index(edge_types).get_indexer(edges["database"].astype(str))
    loops = np.arange(n)
    # Messages flow both ways along every edge: a directed signalling edge still relates its genes.
    edge_index = np.vstack([np.concatenate([i, j, loops]), np.concatenate([j, i, loops])]).astype(np.int64)
    edge_type = np.concatenate([t, t, np.full(n, len(edge_types) - 1)]).astype(np.int64)
    rows, cols, vals = [], [], []
    for r, e in enumerate(entities):
        members = nodes.get_indexer(list(sets[e]) if e in sets else [e])
        members = np.unique(members[members >= 0])
        if members.size == 0:
            raise ValueError(f"gene set {e!r} has no members")
        rows.extend([r] * members.size)
        cols.extend(members.tolist())
        vals.extend([1.0 / members.size] * members.size)
    pool = sp.csr_matrix((vals, (rows, cols)), shape=(len(entities), n))
    in_graph = np.zeros(n, bool)
    in_graph[: len(kg_nodes)] = True
    return Graph(nodes, edge_index, edge_type, edge_types, entities, pool, in_graph)


def spectral_features(graph: Graph, dim: int = 64, seed: int = 0) -> np.ndarray:
    """Fixed node features from graph structure alone.

    The ``dim`` leading singular vectors (scaled by their singular values) of
    ``D^-1/2 A D^-1/2``, with ``A`` the undirected adjacency without self-loops, followed by
    log(1 + degree) and an in-graph flag; columns standardised. Nodes outside the graph get zeros
    (and flag 0).

    Parameters
    ----------
    graph : Graph
    dim : int
        Number of spectral components (capped at ``n_nodes - 1``).
    seed : int
        Seed of the randomised SVD.

    Returns
    -------
    numpy.ndarray, shape (n_nodes, dim + 2), float32
    """
    from sklearn.utils.extmath import randomized_svd

    n = len(graph.nodes)
    src, dst = graph.edge_index
    keep = src != dst
    adj = sp.csr_matrix((np.ones(int(keep.sum())), (src[keep], dst[keep])), shape=(n, n))
    adj.data[:] = 1.0  # duplicated edges (several databases) count once
    deg = np.asarray(adj.sum(axis=1)).ravel()
    inv = np.divide(1.0, np.sqrt(deg), out=np.zeros_like(deg), where=deg > 0)
    norm = sp.diags(inv) @ adj @ sp.diags(inv)
    k = int(max(1, min(dim, n - 1)))
    u, s, _ = randomized_svd(norm, n_components=k, n_iter=5, random_state=seed)
    # Fix each component's sign so features do not depend on the solver's arbitrary choice.
    signs = np.sign(u[np.abs(u).argmax(axis=0), np.arange(k)])
    u = u * np.where(signs == 0, 1.0, signs) * s
    feats = np.hstack([u, np.log1p(deg)[:, None], graph.in_graph[:, None].astype(float)])
    sd = feats.std(axis=0)
    feats = (feats - feats.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    return feats.astype(np.float32)


def ternary_targets(responses: Sequence[str] | pd.Series) -> np.ndarray:
    """Class index of each ternary response, in the order of :data:`RESPONSES` (unchanged, down, up)."""
    r = pd.Series(np.asarray(responses).astype(str))
    idx = pd.Index(RESPONSES).get_indexer(r)
    if (idx < 0).any():
        raise ValueError(f"unknown responses {sorted(set(r[idx < 0]))}; expected {RESPONSES}")
    return idx.astype(np.int64)


def subtask_scores(proba: np.ndarray, subtask: str) -> np.ndarray:
    """Binary score of a pair subtask from ternary probabilities (columns unchanged, down, up).

    ``de``: P(up) + P(down) = 1 - P(unchanged). ``dir``: P(up) / (P(up) + P(down)), 0.5 when
    both are 0.
    """
    proba = np.asarray(proba, dtype=np.float64)
    if proba.ndim != 2 or proba.shape[1] != len(RESPONSES):
        raise ValueError(f"expected probabilities of shape (n, {len(RESPONSES)}), got {proba.shape}")
    changed = proba[:, 1] + proba[:, 2]
    if subtask == "de":
        return changed
    if subtask == "dir":
        return np.divide(proba[:, 2], changed, out=np.full(len(proba), 0.5), where=changed > 0)
    raise ValueError(f"subtask {subtask!r} is not a pair subtask (de, dir)")


class GATLayer(nn.Module):
    """Multi-head graph attention (Velickovic et al. 2018) with learned edge-type attention biases.

    For node i with incoming edges j -> i of type t:
    ``e_ij = LeakyReLU(a_dst . W h_i + a_src . W h_j + b_t)`` per head,
    ``alpha_ij = softmax_j(e_ij)`` over i's incoming edges, and
    ``h'_i = concat_heads(sum_j alpha_ij W h_j)``.

    Parameters
    ----------
    in_dim, out_dim : int
        Input and output widths; ``out_dim`` is split evenly over ``heads``.
    heads : int
    n_edge_types : int
        Number of edge types (source databases, self-loops).
    dropout : float
        Dropout on attention weights during training.
    """

    def __init__(self, in_dim: int, out_dim: int, heads: int = 4, n_edge_types: int = 1, dropout: float = 0.0):
        super().__init__()
        if out_dim % heads:
            raise ValueError(f"out_dim {out_dim} is not divisible by heads {heads}")
        self.heads, self.head_dim = heads, out_dim // heads
        self.linear = nn.Linear(in_dim, out_dim, bias=False)
        self.att_src = nn.Parameter(torch.empty(heads, self.head_dim))
        self.att_dst = nn.Parameter(torch.empty(heads, self.head_dim))
        self.edge_bias = nn.Embedding(max(1, n_edge_types), heads)
        self.bias = nn.Parameter(torch.zeros(out_dim))
        self.dropout = nn.Dropout(dropout)
        nn.init.xavier_uniform_(self.att_src)
        nn.init.xavier_uniform_(self.att_dst)
        nn.init.zeros_(self.edge_bias.weight)

    def attention(self, x: torch.Tensor, edge_index: torch.Tensor, edge_type: torch.Tensor | None = None):
        """Projected features ``(n, heads, head_dim)`` and attention weights ``(n_edges, heads)``."""
        n = x.shape[0]
        src, dst = edge_index
        h = self.linear(x).view(n, self.heads, self.head_dim)
        logits = (h * self.att_src).sum(-1)[src] + (h * self.att_dst).sum(-1)[dst]
        if edge_type is not None:
            logits = logits + self.edge_bias(edge_type)
        logits = nn.functional.leaky_relu(logits, 0.2)
        # Softmax over each target's incoming edges, shifted by the per-target maximum for stability.
        index = dst.unsqueeze(1).expand(-1, self.heads)
        peak = torch.full((n, self.heads), -torch.inf, dtype=logits.dtype, device=x.device)
        peak = peak.scatter_reduce(0, index, logits.detach(), reduce="amax", include_self=True)
        weights = torch.exp(logits - peak[dst])
        total = torch.zeros((n, self.heads), dtype=logits.dtype, device=x.device).index_add(0, dst, weights)
        return h, weights / total[dst].clamp_min(1e-16)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_type: torch.Tensor | None = None) -> torch.Tensor:
        h, alpha = self.attention(x, edge_index, edge_type)
        src, dst = edge_index
        messages = h[src] * self.dropout(alpha).unsqueeze(-1)
        out = torch.zeros_like(h).index_add(0, dst, messages)
        return out.reshape(x.shape[0], -1) + self.bias


class PairModel(nn.Module):
    """Node encoder (MLP or GAT), entity pooling and a ternary pair classifier.

    Parameters
    ----------
    in_dim : int
        Node feature width.
    kind : {"mlp", "gat"}
        ``mlp`` encodes each node from its own features; ``gat`` adds graph attention layers.
    hidden : int
        Node embedding width.
    layers : int
        Residual blocks of the encoder (MLP blocks or GAT layers).
    heads : int
        Attention heads (GAT).
    ffn : int
        Width of the classifier's hidden layer.
    n_edge_types : int
    dropout : float
    """

    def __init__(self, in_dim: int, kind: str = "gat", hidden: int = 64, layers: int = 2, heads: int = 4,
                 ffn: int = 256, n_edge_types: int = 1, dropout: float = 0.1):
        super().__init__()
        if kind not in ("mlp", "gat"):
            raise ValueError(f"kind must be 'mlp' or 'gat', got {kind!r}")
        self.kind = kind
        self.input = nn.Linear(in_dim, hidden)
        if kind == "gat":
            self.blocks = nn.ModuleList([GATLayer(hidden, hidden, heads, n_edge_types, dropout) for _ in range(layers)])
        else:
            self.blocks = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(layers)])
        self.norms = nn.ModuleList([nn.LayerNorm(hidden) for _ in range(layers)])
        self.act, self.drop = nn.GELU(), nn.Dropout(dropout)
        self.head = nn.Sequential(nn.Linear(3 * hidden, ffn), nn.GELU(), nn.Dropout(dropout), nn.Linear(ffn, len(RESPONSES)))

    def encode(self, x: torch.Tensor, edge_index: torch.Tensor, edge_type: torch.Tensor) -> torch.Tensor:
        """Node embeddings: input projection, then residual blocks (GELU, dropout, layer norm)."""
        h = self.input(x)
        for block, norm in zip(self.blocks, self.norms):
            out = block(h, edge_index, edge_type) if self.kind == "gat" else block(h)
            h = norm(h + self.drop(self.act(out)))
        return h

    def classify(self, entity_h: torch.Tensor, pert: torch.Tensor, gene: torch.Tensor) -> torch.Tensor:
        """Ternary logits of pairs (entity positions of p and g)."""
        hp, hg = entity_h[pert], entity_h[gene]
        return self.head(torch.cat([hp, hg, hp * hg], dim=1))


def _pool(pool: tuple[torch.Tensor, torch.Tensor, torch.Tensor, int], h: torch.Tensor) -> torch.Tensor:
    """Entity embeddings: each entity the weighted sum (mean over a set's members) of its nodes' rows."""
    rows, cols, vals, n = pool
    return torch.zeros((n, h.shape[1]), dtype=h.dtype, device=h.device).index_add(0, rows, h[cols] * vals[:, None])


def _tensors(graph: Graph, features: np.ndarray, dev: torch.device, kind: str):
    """Tensors of a graph; without message passing (MLP) only the nodes entities pool are kept."""
    coo = graph.pool.tocoo()
    cols = coo.col
    if kind == "mlp":
        # Each node is encoded on its own, so the thousands of set nodes no entity uses are skipped.
        used, cols = np.unique(cols, return_inverse=True)
        features = features[used]
    pool = (torch.as_tensor(coo.row, dtype=torch.long, device=dev), torch.as_tensor(cols, dtype=torch.long, device=dev),
            torch.as_tensor(coo.data, dtype=torch.float32, device=dev), graph.pool.shape[0])
    return (torch.as_tensor(features, device=dev), torch.as_tensor(graph.edge_index, device=dev),
            torch.as_tensor(graph.edge_type, device=dev), pool)


def predict_proba(model: PairModel, graph: Graph, features: np.ndarray, perts: Sequence[str], genes: Sequence[str]) -> np.ndarray:
    """Ternary probabilities (unchanged, down, up) of pairs, in evaluation mode."""
    dev = next(model.parameters()).device
    x, ei, et, pool = _tensors(graph, features, dev, model.kind)
    p = torch.as_tensor(graph.entities.get_indexer(list(perts)), device=dev)
    g = torch.as_tensor(graph.entities.get_indexer(list(genes)), device=dev)
    if (p < 0).any() or (g < 0).any():
        raise ValueError("pairs name entities missing from the graph's entities")
    model.eval()
    with torch.no_grad():
        ent = _pool(pool, model.encode(x, ei, et))
        return torch.softmax(model.classify(ent, p, g), dim=1).cpu().numpy().astype(np.float64)


def fit_predict(train_obs: pd.DataFrame, test_pairs: pd.DataFrame, edges: pd.DataFrame,
                sets: Mapping[str, Sequence[str]] | None = None, *, kind: str = "gat", feature_dim: int = 64,
                hidden: int = 64, layers: int = 2, heads: int = 4, ffn: int = 256, dropout: float = 0.1,
                epochs: int = 10, batch_size: int = 4096, lr: float = 1e-3, weight_decay: float = 1e-6,
                seed: int = 0, threads: int = 1, verbose: bool = True) -> np.ndarray:
    """Train a pair model on the ternary responses and predict test pairs' probabilities.

    Parameters
    ----------
    train_obs : pandas.DataFrame
        Training pairs: ``pert, gene, response`` (unchanged, down, up).
    test_pairs : pandas.DataFrame
        ``pert, gene`` of the pairs to predict.
    edges : pandas.DataFrame
        Knowledge-graph edges (``source, target, database``).
    sets : mapping, optional
        Downstream gene sets (name -> members), pooled as the mean of their members.
    kind : {"mlp", "gat"}
    feature_dim : int
        Spectral components of the node features (:func:`spectral_features`).
    hidden, layers, heads, ffn, dropout
        Architecture (:class:`PairModel`).
    epochs, batch_size, lr, weight_decay
        AdamW on the cross-entropy over unchanged / down / up, mini-batches of training pairs;
        the GAT re-encodes the whole graph at every step.
    seed : int
        Seeds features, initialisation, dropout and batch order (deterministic on CPU).
    threads : int
        Torch CPU threads (0 keeps torch's default). One is the default because on shared,
        oversubscribed cores the threads of these small operations mostly wait for each other.

    Returns
    -------
    numpy.ndarray, shape (n_test, 3)
        Probabilities of unchanged, down, up.
    """
    torch.manual_seed(seed)
    if threads > 0:
        torch.set_num_threads(threads)
    dev = device()
    entities = pd.unique(pd.concat([train_obs["pert"], train_obs["gene"], test_pairs["pert"], test_pairs["gene"]]).astype(str))
    start = time.perf_counter()
    graph = build_graph(edges, entities, sets)
    features = spectral_features(graph, feature_dim, seed)
    x, ei, et, pool = _tensors(graph, features, dev, kind)
    y = torch.as_tensor(ternary_targets(train_obs["response"]), device=dev)
    p = torch.as_tensor(graph.entities.get_indexer(train_obs["pert"].astype(str)), device=dev)
    g = torch.as_tensor(graph.entities.get_indexer(train_obs["gene"].astype(str)), device=dev)
    model = PairModel(features.shape[1], kind, hidden, layers, heads, ffn, len(graph.edge_types), dropout).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    order_gen = torch.Generator().manual_seed(seed)
    if verbose:
        print(f"{kind}: {len(graph.nodes)} nodes, {graph.edge_index.shape[1]} edges (with self-loops), "
              f"{len(train_obs)} training pairs, {len(test_pairs)} test pairs, device {dev}; "
              f"graph and features in {time.perf_counter() - start:.1f} s")
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(y), generator=order_gen).to(dev)
        total = 0.0
        for first in range(0, len(y), batch_size):
            batch = order[first : first + batch_size]
            ent = _pool(pool, model.encode(x, ei, et))
            loss = loss_fn(model.classify(ent, p[batch], g[batch]), y[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(batch)
        if verbose:
            print(f"epoch {epoch + 1}/{epochs}: cross-entropy {total / max(1, len(y)):.4f} "
                  f"({time.perf_counter() - start:.1f} s)")
    return predict_proba(model, graph, features, test_pairs["pert"].astype(str), test_pairs["gene"].astype(str))


def pair_item_scores(train_obs: pd.DataFrame, test_obs: pd.DataFrame, edges: pd.DataFrame,
                     sets: Mapping[str, Sequence[str]] | None = None, **kwargs) -> pd.Series:
    """Train once on the ternary responses and score every ``de`` / ``dir`` item of a test file.

    Cluster items are not addressed (absent from the result). Keyword arguments go to
    :func:`fit_predict`.

    Returns
    -------
    pandas.Series
        Score per pair item (see :func:`subtask_scores`), indexed like ``test_obs``.
    """
    pairs = test_obs[test_obs["subtask"].isin(["de", "dir"])]
    if pairs.empty:
        return pd.Series(dtype=float)
    proba = fit_predict(train_obs, pairs, edges, sets, **kwargs)
    scores = np.empty(len(pairs))
    for subtask in ("de", "dir"):
        rows = (pairs["subtask"] == subtask).to_numpy()
        scores[rows] = subtask_scores(proba[rows], subtask)
    return pd.Series(scores, index=pairs.index, dtype=float)
