"""SUMMER-style retrieval of training outcomes of knowledge-graph neighbours for PertReasonQA (Wu et al. 2025, section 4.2).

:class:`Retriever` draws training items whose perturbation and effect gene are graph neighbours
(:func:`shared_neighbour_sets`) of a question's; :func:`examples_text` writes them into the prompt.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from pertreasonqa_lib.answer_parsing import format_triplet
from pertreasonqa_lib.path_serialisation import paths_from_json
from pertreasonqa_lib.prompts import perturbation_phrase
from pertreasonqa_lib.signed_graph import SignedGraph


def shared_neighbour_sets(graph: SignedGraph, genes: Iterable[str], k: int = 10,
                          candidates: Iterable[str] | None = None) -> dict[str, list[str]]:
    """N(v): the ``k`` nodes sharing the most (undirected) neighbours with ``v``; ties by name.

    Genes outside the graph, and nodes sharing no neighbour, are left out. ``candidates`` limits
    the neighbours to those nodes (e.g. the training perturbations: compounds that share targets).
    """
    adj = graph.reach_matrix("undirected")
    adj = (adj > 0).astype(np.float64)
    genes = [g for g in dict.fromkeys(genes) if g in graph.nodes]
    if not genes:
        return {}
    rows = graph.nodes.get_indexer(genes)
    allowed = None if candidates is None else graph.nodes.isin(list(candidates))
    shared = (adj[rows] @ adj.T).tocsr()  # shared[i, j]: common neighbours of genes[i] and node j
    out: dict[str, list[str]] = {}
    for i, g in enumerate(genes):
        start, end = shared.indptr[i], shared.indptr[i + 1]
        cols, counts = shared.indices[start:end], shared.data[start:end]
        keep = cols != rows[i]
        if allowed is not None:
            keep &= allowed[cols]
        cols, counts = cols[keep], counts[keep]
        names = graph.nodes[cols].to_numpy()
        order = np.lexsort((names, -counts))[:k]
        out[g] = [str(n) for n in names[order]]
    return out


class Retriever:
    """Training items related to a question by knowledge-graph proximity (SUMMER's three criteria).

    For (p, g): up to ``per_group`` training items with p' in N(p) and g' in N(g) + {g}; then with
    p' in N(p) and any g'; then with any p' and g' in N(g) + {g}. Drawn at random (seeded per
    question) without repeats. g itself is added to N(g) because a test perturbation is unseen but
    its effect gene usually was measured in training.
    """

    def __init__(self, train: pd.DataFrame, graph: SignedGraph, k: int = 10, per_group: int = 5, seed: int = 0):
        self.train = train.reset_index(drop=True)
        self.by_pert = self.train.groupby("perturbation", observed=True).indices
        self.by_gene = self.train.groupby("gene", observed=True).indices
        self.graph, self.k, self.per_group, self.seed = graph, k, per_group, seed
        self.neighbours: dict[str, list[str]] = {}
        self.pert_neighbours: dict[str, list[str]] = {}

    def prepare(self, perturbations: Iterable[str], genes: Iterable[str]) -> None:
        """Compute N(p) among the training perturbations and N(g) among all nodes for the questions' p and g."""
        self.pert_neighbours.update(shared_neighbour_sets(
            self.graph, [p for p in perturbations if p not in self.pert_neighbours], self.k, candidates=list(self.by_pert)))
        self.neighbours.update(shared_neighbour_sets(self.graph, [g for g in genes if g not in self.neighbours], self.k))

    def _rows(self, index: dict, keys: Sequence[str]) -> np.ndarray:
        found = [index[k] for k in keys if k in index]
        return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)

    def retrieve(self, perturbation: str, gene: str) -> pd.DataFrame:
        """The retrieved training rows (columns of the training table), in group order."""
        rng = np.random.default_rng([self.seed, zlib.crc32(f"{perturbation}|{gene}".encode())])  # stable across processes
        n_p = self.pert_neighbours.get(perturbation, [])
        n_g = [gene] + [g for g in self.neighbours.get(gene, []) if g != gene]
        by_p, by_g = self._rows(self.by_pert, n_p), self._rows(self.by_gene, n_g)
        chosen: list[int] = []
        for pool in (np.intersect1d(by_p, by_g), by_p, by_g):
            pool = np.setdiff1d(pool, chosen)
            if len(pool):
                chosen.extend(rng.choice(pool, size=min(self.per_group, len(pool)), replace=False).tolist())
        return self.train.iloc[chosen]


def examples_text(rows: pd.DataFrame, with_mechanism: bool = True) -> str:
    """Retrieved outcomes as prompt text, each with its first reference path when it has one."""
    if rows.empty:
        return "Related experiments: none found in the training data."
    lines = ["Related experiments from the training data (observed outcomes):"]
    for i, row in enumerate(rows.itertuples(), 1):
        event = perturbation_phrase(str(row.perturbation), str(row.perturbation_type))
        line = f"Example {i}: {event} in {row.cell}: {row.gene} {_verb(str(row.label))}."
        if with_mechanism:
            refs = paths_from_json(str(row.reference_paths))
            if refs:
                line += " Mechanism: " + "; ".join(format_triplet(t) for t in refs[0])
        lines.append(line)
    return "\n".join(lines)


def _verb(label: str) -> str:
    return {"up": "went up", "down": "went down", "unchanged": "stayed unchanged"}[label]
