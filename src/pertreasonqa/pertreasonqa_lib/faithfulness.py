"""Mechanistic faithfulness of an answer's triplets (PertReasonQA, Kim et al. 2026, section 2.4).

Per item (:func:`faithfulness_table`), against the item's reference paths and the task's graph:

- :func:`path_coverage` — the paper's faithfulness score, "the fraction of reference
  paths correctly covered by the generated reasoning paths" (section 2.4), read at the level of
  paths as defined: a reference path is covered when the triplets name every one of its signed
  edges. The prediction is a mechanism, not a list: every triplet on a chain from the
  perturbation to the effect gene must be a reference edge (a route the cell state or the outcome
  rules out makes the mechanism wrong), so listing alternatives never pays. The task's headline
  (``path_coverage`` of :func:`faithfulness_table`) counts it only on items answered right, the
  "right answer, right reason" quadrant of section 4 / Table 3; the answer-blind value is kept as
  ``path_coverage_any_answer``;
- :func:`edge_scores` — edge-level precision, recall and F1 (diagnostic: what the paper's column
  name "edge recall" suggests);
- :func:`path_connectivity` — every triplet an edge of the task's graph with a compatible sign,
  and every triplet on an unbroken chain from the perturbation to the effect gene;
- :func:`go_similarity` — cosine of IDF-weighted GO BP profiles (:class:`GOProfiles`);

and the two failure modes of Table 3 (:func:`failure_modes`).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from pertreasonqa_lib.path_params import MAX_HOPS
from pertreasonqa_lib.path_serialisation import paths_from_json, triplets_from_json
from pertreasonqa_lib.prediction_files import aligned_prediction
from pertreasonqa_lib.signed_graph import SignedGraph

#: Faithfulness scores of :func:`faithfulness_table`, in the order the metric reports them.
FAITHFULNESS_METRICS = ("path_coverage", "path_coverage_any_answer", "edge_precision", "edge_recall", "edge_f1",
                        "path_connectivity", "go_similarity")


def start_names(perturbation: str, perturbation_type: str) -> list[str]:
    """Where a mechanism starts: the compound itself for a chemical, else the perturbed genes (``A+B`` -> A, B)."""
    if perturbation_type.lower() == "chemical":
        return [perturbation]
    return perturbation.split("+")


def _norm(gene: str) -> str:
    return str(gene).strip().upper()


def _signed(triplets: Iterable[Sequence]) -> list[tuple[str, int, str]]:
    """Distinct normalised ``(source, sign, target)`` triplets, in first-seen order."""
    return list(dict.fromkeys((_norm(t[0]), int(t[1]), _norm(t[2])) for t in triplets))


def _edge_matches(predicted: tuple[str, int, str], reference: tuple[str, int, str]) -> bool:
    """A predicted triplet recovers a reference edge: same pair, same sign (a reference of unknown sign 0: any)."""
    return predicted[0] == reference[0] and predicted[2] == reference[2] and (reference[1] == 0 or predicted[1] == reference[1])


def edge_scores(predicted: Iterable[Sequence], reference_paths: Sequence[Sequence[Sequence]]) -> tuple[float, float, float]:
    """Edge-level precision, recall and F1 of the predicted triplets against the reference edges.

    Reference edges are the distinct signed edges of the union of the reference paths. A predicted
    triplet is correct when it recovers a reference edge (:func:`_edge_matches`: same pair and
    sign; a reference edge of unknown sign is recovered by either sign). Gene symbols are compared
    case-insensitively.

    Returns
    -------
    precision, recall, f1
        All NaN when there is no reference edge; precision and F1 are 0 for an empty prediction.
    """
    ref = _signed(t for path in reference_paths for t in path)
    if not ref:
        return float("nan"), float("nan"), float("nan")
    pred = _signed(predicted)
    recall = sum(any(_edge_matches(p, r) for p in pred) for r in ref) / len(ref)
    precision = sum(any(_edge_matches(p, r) for r in ref) for p in pred) / len(pred) if pred else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return precision, recall, f1


def edge_recall(predicted: Iterable[Sequence], reference_paths: Sequence[Sequence[Sequence]]) -> float:
    """Fraction of the reference edges (union over reference paths) recovered by the predicted triplets (:func:`edge_scores`)."""
    return edge_scores(predicted, reference_paths)[1]


def predicted_paths(predicted: Iterable[Sequence], starts: Iterable[str], target: str, max_hops: int = MAX_HOPS,
                    limit: int | None = None) -> list[tuple[tuple[str, int, str], ...]]:
    """The signed simple paths the triplets chain from a start node to the target, of at most ``max_hops`` edges.

    A pair named with both signs gives two paths. Depth-first, in the order of the triplets;
    stops once ``limit + 1`` paths are found (enough to tell that there are more than ``limit``).
    """
    out_edges: dict[str, list[tuple[str, int, str]]] = {}
    for t in _signed(predicted):
        out_edges.setdefault(t[0], []).append(t)
    goal = _norm(target)
    found: list[tuple[tuple[str, int, str], ...]] = []
    cap = None if limit is None else limit + 1

    def walk(node: str, visited: set[str], path: list[tuple[str, int, str]]) -> bool:
        for edge in out_edges.get(node, ()):
            nxt = edge[2]
            if nxt in visited:
                continue
            if nxt == goal:
                found.append((*path, edge))
                if cap is not None and len(found) >= cap:
                    return True
            elif len(path) + 1 < max_hops and walk(nxt, visited | {nxt}, [*path, edge]):
                return True
        return False

    for start in dict.fromkeys(_norm(s) for s in starts):
        if start != goal and walk(start, {start}, []):
            break
    return found


def path_coverage(predicted: Iterable[Sequence], reference_paths: Sequence[Sequence[Sequence]], starts: Iterable[str],
                  target: str) -> float:
    """Fraction of the reference paths the prediction covers, path by path (section 2.4's faithfulness).

    Parameters
    ----------
    predicted
        The answer's triplets.
    reference_paths
        The item's reference paths (each a list of ``(source, sign, target, ...)``).
    starts, target
        Start nodes (:func:`start_names`) and effect gene.

    Returns
    -------
    float
        The share of reference paths covered: a reference path is covered when the triplets name
        each of its edges with its sign (a reference edge of unknown sign matches either sign), so
        the path is one of the chains the triplets form. 0 when the triplets chain nothing from a
        start to the effect gene, or when a triplet on such a chain is no reference edge (the
        mechanism asserts a route the cell state or the outcome rules out, or a wrong sign); NaN
        without a reference path. Whenever every chain the answer names is made of reference
        edges, this is the paper's fraction of reference paths covered.

    Notes
    -----
    Why a wrong route voids the item: the reference paths are the label-free candidates that pass
    the label filter, and the candidates follow from the graph and the cell context, which every
    method has. If extra routes were only diluted, naming every graph path from p to g would cover
    every reference path and score about ``n_reference / n_graph_paths``, above what a path drawn
    at random from the graph scores (``1 / n_graph_paths``); with the rule, such a list scores
    only where every edge of every graph path is a reference edge, and no more than chance on the
    test resources. Triplets off every chain (dangling pieces) are left to path connectivity and
    edge precision.
    """
    refs = [_signed(path) for path in reference_paths]
    refs = [r for r in refs if r]
    if not refs:
        return float("nan")
    trip = _signed(predicted)
    reached, reaching = _chain_reach(trip, starts, target)
    on_chain = [t for t in trip if t[0] in reached and t[2] in reaching]
    if _norm(target) not in reached or not on_chain:
        return 0.0
    ref_edges = {t for r in refs for t in r}
    if not all(any(_edge_matches(t, r) for r in ref_edges) for t in on_chain):
        return 0.0
    return sum(all(any(_edge_matches(t, e) for t in on_chain) for e in r) for r in refs) / len(refs)


def graph_signs(graph: SignedGraph) -> dict[tuple[str, str], int]:
    """``(source, target) -> sign`` of every edge of the graph, symbols normalised as the metrics compare them."""
    names = [_norm(n) for n in graph.nodes]  # each node's symbol normalised once, not once per edge
    src, dst = np.asarray(graph.src).tolist(), np.asarray(graph.dst).tolist()
    return {(names[u], names[v]): s for u, v, s in zip(src, dst, np.asarray(graph.sign).astype(np.int64).tolist())}


def path_connectivity(predicted: Iterable[Sequence], starts: Iterable[str], target: str,
                      edges: Mapping[tuple[str, str], int]) -> float:
    """1.0 when the triplets form an unbroken, grounded chain from the perturbation to the effect gene, else 0.

    Three conditions (section 2.4: "the generated intermediate nodes do not form a broken chain"):
    every triplet is an edge of the task's graph with a compatible sign (the graph's sign, or any
    sign where the graph's edge is ambiguous, 0: resolving it is the model's job, appendix C.1);
    the triplets, read as directed edges, reach the effect gene from a start node; and every
    triplet lies on such a chain (no disconnected or dangling piece).

    Parameters
    ----------
    predicted
        The answer's triplets.
    starts, target
        Start nodes (:func:`start_names`) and effect gene.
    edges
        :func:`graph_signs` of the task's graph.
    """
    trip = _signed(predicted)
    if not trip:
        return 0.0
    for u, s, v in trip:
        known = edges.get((u, v))
        if known is None or (known != 0 and s != known):
            return 0.0
    reached, reaching = _chain_reach(trip, starts, target)
    if _norm(target) not in reached:
        return 0.0
    return float(all(u in reached and v in reaching for u, _, v in trip))


def _chain_reach(trip: Iterable[Sequence], starts: Iterable[str], target: str) -> tuple[set[str], set[str]]:
    """Nodes the triplets reach from the start nodes, and nodes from which they reach the target."""
    forward: dict[str, set[str]] = {}
    backward: dict[str, set[str]] = {}
    for u, _, v in trip:
        forward.setdefault(u, set()).add(v)
        backward.setdefault(v, set()).add(u)
    return _reach([_norm(s) for s in starts], forward), _reach([_norm(target)], backward)


def _reach(seeds: Iterable[str], adjacency: Mapping[str, set[str]]) -> set[str]:
    seen = set(seeds)
    frontier = list(seen)
    while frontier:
        for nxt in adjacency.get(frontier.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return seen


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
        # float64 whatever the file stored (0/1 memberships convert exactly): profiles sum its entries as they are.
        self.membership = sp.csr_matrix(self.membership, dtype=np.float64)
        if self.membership.shape != (len(self.genes), len(self.idf)):
            raise ValueError(f"GO membership has shape {self.membership.shape}, expected ({len(self.genes)}, {len(self.idf)})")
        self._key = pd.Index([_norm(g) for g in self.genes])
        self._row: dict[str, int] | None = None  # symbol -> row, built on the first look-up

    @classmethod
    def from_gene_sets(cls, sets: Mapping[str, Sequence[str]], genes: Iterable[str] | None = None) -> GOProfiles:
        """Build from a GMT mapping; ``idf`` counts over every annotated gene of ``sets``.

        ``genes`` gives the stored rows, in order (default: every annotated gene); the IDF still
        uses the whole collection.
        """
        names = list(sets)
        # Every (term, gene) membership as integer codes: each distinct symbol is normalised once,
        # and a term's genes are counted once per normalised symbol.
        listed = [list(sets[name]) for name in names]
        flat = list(itertools.chain.from_iterable(listed))
        codes: dict[str, int] = {}  # normalised symbol -> code
        raw_codes = {g: codes.setdefault(_norm(g), len(codes)) for g in dict.fromkeys(flat)}  # symbol as given -> code
        code_of = np.fromiter(map(raw_codes.__getitem__, flat), dtype=np.int64, count=len(flat))
        term_of = np.repeat(np.arange(len(names), dtype=np.int64), [len(m) for m in listed])
        pairs = np.unique(term_of * max(len(codes), 1) + code_of)
        term, code = np.divmod(pairs, max(len(codes), 1))
        all_genes = sorted(codes) if names else []
        sizes = np.bincount(term, minlength=len(names)).astype(float)
        idf = np.log(len(all_genes) / sizes) if len(names) else np.zeros(0)
        index = pd.Index(all_genes if genes is None else list(dict.fromkeys(genes)))
        key = pd.Index([_norm(g) for g in index])
        row_of_code = key.get_indexer(list(codes)) if names else np.zeros(0, dtype=np.int64)
        r = row_of_code[code] if len(code) else np.array([], dtype=np.int64)
        keep = r >= 0
        mat = sp.csr_matrix((np.ones(int(keep.sum())), (r[keep], term[keep])), shape=(len(index), len(names)))
        return cls(genes=index, membership=mat, idf=idf)

    def profile(self, genes: Iterable[str]) -> np.ndarray:
        """Sum of the IDF-weighted annotation vectors of ``genes`` (unknown genes add nothing)."""
        if self._row is None:
            # A dictionary look-up per gene: the profiles are read a few genes at a time, per item.
            if not self._key.is_unique:
                twice = sorted(set(self._key[self._key.duplicated()]))[:5]
                raise ValueError(f"GO genes name one symbol twice (compared case-insensitively): {twice}")
            self._row = dict(zip(self._key, range(len(self._key))))
        pos = [r for r in (self._row.get(_norm(g), -1) for g in genes) if r >= 0]
        if len(pos) == 0:
            return np.zeros(len(self.idf))
        m = self.membership
        # The rows' entries added column by column in row order, as the sparse row sum adds them.
        cols = np.concatenate([m.indices[m.indptr[p]:m.indptr[p + 1]] for p in pos])
        vals = np.concatenate([m.data[m.indptr[p]:m.indptr[p + 1]] for p in pos])
        return np.bincount(cols, weights=vals, minlength=m.shape[1]) * self.idf


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


def faithfulness_table(solution_obs: pd.DataFrame, prediction_obs: pd.DataFrame, graph: SignedGraph,
                       go: GOProfiles | None = None, where: str = "prediction") -> pd.DataFrame:
    """Per-item outcome and faithfulness scores of a prediction.

    Parameters
    ----------
    solution_obs
        ``perturbation``, ``perturbation_type``, ``gene``, ``label``, ``reference_paths`` per item.
    prediction_obs
        ``answer`` and ``triplets`` per item (same index).
    graph
        The task's graph (the dataset's graph file): path connectivity checks the triplets against it.
    go
        GO profiles; without them ``go_similarity`` is NaN.
    where
        Name of the prediction file, for error messages.

    Returns
    -------
    pandas.DataFrame
        Indexed like the solution: ``correct`` (bool), ``has_reference`` (bool), and for items with
        a reference path each of :data:`FAITHFULNESS_METRICS` (NaN otherwise). The start nodes of
        a perturbation are its genes (``A+B`` -> A and B), or the compound (:func:`start_names`).
        ``path_coverage_any_answer`` is :func:`path_coverage` whatever the answer;
        ``path_coverage`` is the same value on items answered right and 0 on the others.

    Notes
    -----
    Why the headline needs the right answer: a reason supports an answer, and the reference paths
    of an item are the paths that explain its label (the label filter, appendix B.2). A path given
    for a wrong answer is the paper's "wrong answer, right reason" failure mode (section 4, Table
    3), not a faithful mechanism; counting it would let an answer that never models the outcome
    (always "unchanged", with the graph's most plausible path) collect faithfulness credit on
    every item whose label is up or down. Only the "right answer, right reason" quadrant pays.
    """
    pred = aligned_prediction(solution_obs, prediction_obs, where)
    answers = pred["answer"].to_numpy()
    edges = graph_signs(graph)
    rows = []
    for item, sol, ans, trip in zip(solution_obs.index, solution_obs.itertuples(index=False), answers, pred["triplets"].astype(str)):
        refs = paths_from_json(str(sol.reference_paths), f"solution reference_paths of {item}")
        triplets = triplets_from_json(trip, f"{where}: triplets of {item}")
        starts = start_names(str(sol.perturbation), str(getattr(sol, "perturbation_type", "")))
        row = {"correct": ans == str(sol.label), "has_reference": bool(refs), **dict.fromkeys(FAITHFULNESS_METRICS, np.nan)}
        if refs:
            coverage = path_coverage(triplets, refs, starts, str(sol.gene))
            row["path_coverage_any_answer"] = coverage
            row["path_coverage"] = coverage if row["correct"] else 0.0
            row["edge_precision"], row["edge_recall"], row["edge_f1"] = edge_scores(triplets, refs)
            row["path_connectivity"] = path_connectivity(triplets, starts, str(sol.gene), edges)
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
