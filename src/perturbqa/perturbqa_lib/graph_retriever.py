"""SUMMER's graph-based retrieval of training examples (Wu et al., ICLR 2025, section 4.2).

SUMMER answers a question about a pair (p, g) with examples (p', g') from the training set chosen
by knowledge-graph proximity. With N(v) the k = 10 nodes sharing the most neighbours with v, it
takes

1. up to 5 pairs with p' in N(p) and g' in N(g);
2. up to 5 pairs with p' in N(p) and any g';
3. up to 5 pairs with any p' and g' in N(g).

:class:`Retriever` implements this. Choices the paper leaves open, made here:

* Candidates of N(p) are the training perturbations and candidates of N(g) the training downstream
  entities: only they can contribute examples.
* v counts as its own closest node (it shares all its neighbours), so pairs with g' = g are found
  when g was measured in training (the prompt asks for similar genes "including {gene} itself").
* Only nodes sharing at least one neighbour are close; ties are broken by name, so retrieval is
  deterministic given the seed of the sampling.
* A downstream gene set (K562-set) has as neighbours the union of its members' neighbours and
  the members themselves.
* Pairs are sampled uniformly without replacement within each criterion, and a pair is used once.

:func:`contrasting_examples` picks from the retrieved examples the two of LLM (No CoT)'s prompt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from pertsci import knowledge_graphs as kg

__all__ = ["neighbour_matrix", "closest_nodes", "Example", "Retriever", "contrasting_examples"]


def neighbour_matrix(edges: pd.DataFrame, entities: Sequence[str],
                     sets: Mapping[str, Sequence[str]] | None = None) -> sp.csr_matrix:
    """Binary matrix entities x knowledge-graph nodes: which nodes neighbour each entity.

    Edges are read as undirected (a signalling edge links its two genes either way); a gene's
    neighbours are the genes it interacts with and the sets (complex, pathway, GO term) it belongs
    to. An entity that is a set in ``sets`` gets the union of its members' rows plus the members.
    """
    adj, index = kg.adjacency(edges, symmetric=True)
    adj = (adj != 0).astype(np.float64).tocsr()
    sets = dict(sets or {})
    rows = []
    for entity in entities:
        if entity in sets:
            members = index.get_indexer(list(sets[entity]))
            members = members[members >= 0]
            row = sp.csr_matrix(adj[members].sum(axis=0)) if members.size else sp.csr_matrix((1, len(index)))
            row = row + sp.csr_matrix((np.ones(members.size), (np.zeros(members.size, int), members)), shape=(1, len(index)))
            rows.append((row != 0).astype(np.float64))
        else:
            i = index.get_indexer([entity])[0]
            rows.append(adj[i] if i >= 0 else sp.csr_matrix((1, len(index))))
    if not rows:
        return sp.csr_matrix((0, len(index)))
    return sp.vstack(rows).tocsr()


def closest_nodes(queries: Sequence[str], query_rows: sp.csr_matrix, candidates: Sequence[str],
                  candidate_rows: sp.csr_matrix, k: int = 10, include_self: bool = True) -> dict[str, list[str]]:
    """The ``k`` candidates sharing the most neighbours with each query.

    Parameters
    ----------
    queries, candidates : sequence of str
        Names of the rows of ``query_rows`` and ``candidate_rows`` (from :func:`neighbour_matrix`).
    k : int
        How many to keep.
    include_self : bool
        A query that is also a candidate comes first.

    Returns
    -------
    dict
        Query -> closest candidates, most shared neighbours first (ties by name); only candidates
        sharing at least one neighbour.
    """
    cand = pd.Index(list(candidates))
    order_by_name = np.argsort(np.asarray(cand, dtype=str), kind="stable")
    rank_of_name = np.empty(len(cand), dtype=np.int64)
    rank_of_name[order_by_name] = np.arange(len(cand))
    out: dict[str, list[str]] = {}
    step = 512
    ct = candidate_rows.T.tocsc()
    for start in range(0, len(queries), step):
        shared = (query_rows[start : start + step] @ ct).toarray()
        for r, q in enumerate(queries[start : start + step]):
            row = shared[r]
            chosen: list[str] = []
            self_pos = cand.get_indexer([q])[0] if include_self else -1
            if self_pos >= 0:
                chosen.append(q)
                row = row.copy()
                row[self_pos] = 0
            hits = np.flatnonzero(row > 0)
            if hits.size:
                # Most shared first; equal counts in name order.
                order = hits[np.lexsort((rank_of_name[hits], -row[hits]))]
                chosen.extend(cand[order[: max(0, k - len(chosen))]])
            out[q] = chosen[:k]
    return out


@dataclasses.dataclass(frozen=True)
class Example:
    """A retrieved training pair and its outcome."""

    pert: str
    gene: str
    label: int
    criterion: int  # 1: both close, 2: perturbation close, 3: gene close


class Retriever:
    """Retrieve training examples for (perturbation, gene) questions (section 4.2).

    Parameters
    ----------
    train : pandas.DataFrame
        Training pairs with columns ``pert``, ``gene`` and ``label`` (0/1) of the subtask.
    edges : pandas.DataFrame
        Knowledge graph (:data:`pertsci.knowledge_graphs.EDGE_COLUMNS`).
    sets : mapping, optional
        Downstream gene sets (name -> members) when the downstream entities are sets.
    k : int
        Size of N(v).
    per_criterion : int
        Examples per criterion.
    include_self : bool
        See the module docstring.
    """

    def __init__(self, train: pd.DataFrame, edges: pd.DataFrame, sets: Mapping[str, Sequence[str]] | None = None, *,
                 k: int = 10, per_criterion: int = 5, include_self: bool = True):
        missing = {"pert", "gene", "label"} - set(train.columns)
        if missing:
            raise ValueError(f"training pairs need columns pert, gene, label; missing {sorted(missing)}")
        self.edges = edges
        self.sets = dict(sets or {})
        self.k, self.per_criterion, self.include_self = k, per_criterion, include_self
        self.train_perts = pd.Index(pd.unique(train["pert"].astype(str)))
        self.train_genes = pd.Index(pd.unique(train["gene"].astype(str)))
        p_idx = self.train_perts.get_indexer(train["pert"].astype(str))
        g_idx = self.train_genes.get_indexer(train["gene"].astype(str))
        self._n_genes = len(self.train_genes)
        keys = p_idx.astype(np.int64) * self._n_genes + g_idx
        labels = train["label"].to_numpy(dtype=np.int64)
        # Pairs sorted by perturbation and by gene, with the slice of each.
        by_p = np.argsort(p_idx, kind="stable")
        by_g = np.argsort(g_idx, kind="stable")
        self._p_keys, self._p_labels = keys[by_p], labels[by_p]
        self._g_keys, self._g_labels = keys[by_g], labels[by_g]
        self._p_bounds = np.searchsorted(p_idx[by_p], np.arange(len(self.train_perts) + 1))
        self._g_bounds = np.searchsorted(g_idx[by_g], np.arange(len(self.train_genes) + 1))
        self._pert_rows = neighbour_matrix(edges, list(self.train_perts))
        self._gene_rows = neighbour_matrix(edges, list(self.train_genes), self.sets)
        self.close_perts: dict[str, list[str]] = {}
        self.close_genes: dict[str, list[str]] = {}
        # Per perturbation: its pool's pair keys, labels and genes; per gene: keys, labels, their
        # sorting order and the sorted keys (to find pairs by key), and the mask of N(g).
        self._pool_p: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._pool_g: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._close_g_mask: dict[str, np.ndarray] = {}

    def prepare(self, perts: Sequence[str], genes: Sequence[str]) -> None:
        """Compute N(p) and N(g) for the queries to come (done once for all their pairs)."""
        perts = [p for p in pd.unique(np.asarray(perts, dtype=str)) if p not in self.close_perts]
        genes = [g for g in pd.unique(np.asarray(genes, dtype=str)) if g not in self.close_genes]
        if perts:
            rows = neighbour_matrix(self.edges, perts)
            self.close_perts.update(closest_nodes(perts, rows, self.train_perts, self._pert_rows, self.k, self.include_self))
        if genes:
            rows = neighbour_matrix(self.edges, genes, self.sets)
            self.close_genes.update(closest_nodes(genes, rows, self.train_genes, self._gene_rows, self.k, self.include_self))

    def _pool(self, names: list[str], index: pd.Index, keys: np.ndarray, labels: np.ndarray, bounds: np.ndarray):
        pos = index.get_indexer(names)
        parts = [np.arange(bounds[i], bounds[i + 1]) for i in pos if i >= 0]
        take = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return keys[take], labels[take]

    def retrieve(self, pert: str, gene: str, rng: np.random.Generator) -> list[Example]:
        """Up to ``3 * per_criterion`` training examples for the pair, criterion 1 first."""
        keys, labels, criteria = self._draw(pert, gene, rng, 1)[0]
        return [Example(str(self.train_perts[key // self._n_genes]), str(self.train_genes[key % self._n_genes]),
                        int(label), int(crit)) for key, label, crit in zip(keys, labels, criteria)]

    def retrieved_labels(self, pert: str, gene: str, rng: np.random.Generator, n_runs: int = 1) -> list[np.ndarray]:
        """The labels of the examples :meth:`retrieve` would return, for ``n_runs`` calls in a row.

        The same draws from ``rng`` as that many calls of :meth:`retrieve`, without building the
        examples: what Retrieval (No LLM) averages, for every test pair.
        """
        return [labels for _, labels, _ in self._draw(pert, gene, rng, n_runs)]

    def _draw(self, pert: str, gene: str, rng: np.random.Generator, n_runs: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``n_runs`` draws of (pair keys, labels, criteria), criterion 1 first in each.

        Each criterion draws ``per_criterion`` of its candidates uniformly without replacement
        (all of them when there are no more), as ``rng.choice(candidates, per_criterion,
        replace=False)`` would: ``choice`` draws positions by the number of candidates alone, so
        the positions are drawn among the candidates' count and mapped to the candidates, without
        listing the tens of thousands of pairs of a pool at every draw.
        """
        if pert not in self.close_perts or gene not in self.close_genes:
            self.prepare([pert], [gene])
        if pert not in self._pool_p:
            keys, labels = self._pool(self.close_perts[pert], self.train_perts, self._p_keys, self._p_labels, self._p_bounds)
            self._pool_p[pert] = (keys, labels, keys % self._n_genes)
        if gene not in self._pool_g:
            keys, labels = self._pool(self.close_genes[gene], self.train_genes, self._g_keys, self._g_labels, self._g_bounds)
            order = np.argsort(keys, kind="stable")
            self._pool_g[gene] = (keys, labels, order, keys[order])
            mask = np.zeros(self._n_genes, dtype=bool)
            mask[self.train_genes.get_indexer(self.close_genes[gene])] = True
            self._close_g_mask[gene] = mask
        keys_p, labels_p, genes_p = self._pool_p[pert]
        keys_g, labels_g, order_g, sorted_g = self._pool_g[gene]
        # Criterion 1 (the perturbation's neighbours' pairs with the gene's neighbours) is the same every run.
        both_close = np.flatnonzero(self._close_g_mask[gene][genes_p])
        draws = []
        for _ in range(n_runs):
            first = both_close[self._positions(both_close.size, rng)]
            # A pool holds each training pair once, so "not yet chosen" is "not at a chosen position".
            second = _outside(self._positions(keys_p.size - first.size, rng), first)
            from_p = np.concatenate([first, second])
            # The gene pool's positions of the pairs already chosen from the perturbation pool.
            chosen_keys = keys_p[from_p]
            starts = np.searchsorted(sorted_g, chosen_keys, side="left")
            ends = np.searchsorted(sorted_g, chosen_keys, side="right")
            taken = np.unique(np.concatenate([order_g[a:b] for a, b in zip(starts, ends)] or [np.zeros(0, np.int64)]))
            third = _outside(self._positions(keys_g.size - taken.size, rng), taken)
            keys = np.concatenate([chosen_keys, keys_g[third]])
            labels = np.concatenate([labels_p[from_p], labels_g[third]])
            criteria = np.repeat([1, 2, 3], [first.size, second.size, third.size])
            draws.append((keys, labels, criteria))
        return draws

    def _positions(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Sorted positions among ``n`` candidates: ``per_criterion`` drawn without replacement, or all."""
        if n <= self.per_criterion:
            return np.arange(n)
        return np.sort(rng.choice(n, size=self.per_criterion, replace=False))


def _outside(ranks: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    """The positions of rank ``ranks`` among the non-negative integers not in sorted ``excluded``.

    The rank-r integer left after removing e_0 < e_1 < ... is r plus the number of j with
    e_j - j <= r (``e_j - j`` counts the integers left below e_j).
    """
    if excluded.size == 0:
        return ranks
    return ranks + np.searchsorted(excluded - np.arange(excluded.size), ranks, side="right")


def contrasting_examples(examples: Sequence[Example], train: pd.DataFrame, rng: np.random.Generator) -> list[Example]:
    """One retrieved example of each label (label 0 first), for the No CoT prompt.

    The retrieved examples come first; a label none of them has is drawn uniformly from the
    training pairs with that label (and left out when no training pair has it).
    """
    out = []
    for label in (0, 1):
        found = next((e for e in examples if e.label == label), None)
        if found is None:
            pool = np.flatnonzero(train["label"].to_numpy() == label)
            if pool.size:
                i = int(rng.choice(pool))
                found = Example(str(train["pert"].iloc[i]), str(train["gene"].iloc[i]), label, 0)
        if found is not None:
            out.append(found)
    return out
