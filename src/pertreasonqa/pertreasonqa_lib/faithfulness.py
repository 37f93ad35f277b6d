"""Mechanistic faithfulness of an answer's triplets (PertReasonQA, Kim et al. 2026, section 2.4).

Edge recall, path connectivity and GO similarity (cosine of IDF-weighted GO BP profiles,
:class:`GOProfiles`) of the predicted triplets against an item's reference paths, per item
(:func:`faithfulness_table`), and the two failure modes of Table 3 (:func:`failure_modes`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from pertreasonqa_lib.path_serialisation import paths_from_json, triplets_from_json
from pertreasonqa_lib.prediction_files import aligned_prediction


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
