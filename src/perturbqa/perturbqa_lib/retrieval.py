"""Graph-based retrieval of training examples, and the question-answering prompts that use them.

SUMMER (Wu et al., ICLR 2025, section 4.2, "Graph-based retrieval of relevant training samples")
answers a question about a pair (p, g) with examples (p', g') from the training set chosen by
knowledge-graph proximity. With N(v) the k = 10 nodes sharing the most neighbours with v, it takes

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

The second part holds the question-answering prompts of appendix C.2 (SUMMER, LLM without chain of
thought, LLM without retrieval) and their rule-based answer parsing (appendix A.3: a sample that
gives neither or both answers abstains).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from pertsci import knowledge_graphs as kg

__all__ = [
    "neighbour_matrix", "closest_nodes", "Example", "Retriever",
    "summer_prompt", "no_cot_prompt", "no_retrieval_prompt", "outcome_text",
    "parse_summer_answer", "parse_option_answer", "ABSTAIN", "LLM_METHODS", "sample_score", "llm_pair_scores", "llm_prediction",
]

#: Parsed value of an answer that gives no usable label.
ABSTAIN = -1


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
        self._pool_p: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._pool_g: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._close_g_idx: dict[str, np.ndarray] = {}

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
        if pert not in self.close_perts or gene not in self.close_genes:
            self.prepare([pert], [gene])
        if pert not in self._pool_p:
            self._pool_p[pert] = self._pool(self.close_perts[pert], self.train_perts, self._p_keys, self._p_labels, self._p_bounds)
        if gene not in self._pool_g:
            self._pool_g[gene] = self._pool(self.close_genes[gene], self.train_genes, self._g_keys, self._g_labels, self._g_bounds)
            self._close_g_idx[gene] = self.train_genes.get_indexer(self.close_genes[gene])
        keys_p, labels_p = self._pool_p[pert]
        keys_g, labels_g = self._pool_g[gene]
        chosen: list[tuple[int, int, int]] = []  # (key, label, criterion)

        def take(candidates: np.ndarray, keys: np.ndarray, labels: np.ndarray, criterion: int) -> None:
            if candidates.size > self.per_criterion:
                candidates = np.sort(rng.choice(candidates, size=self.per_criterion, replace=False))
            chosen.extend((int(keys[i]), int(labels[i]), criterion) for i in candidates)

        in_close_g = np.isin(keys_p % self._n_genes, self._close_g_idx[gene])
        take(np.flatnonzero(in_close_g), keys_p, labels_p, 1)
        used = np.array([c[0] for c in chosen], dtype=np.int64)
        take(np.flatnonzero(~np.isin(keys_p, used)), keys_p, labels_p, 2)
        used = np.array([c[0] for c in chosen], dtype=np.int64)
        take(np.flatnonzero(~np.isin(keys_g, used)), keys_g, labels_g, 3)
        return [Example(str(self.train_perts[key // self._n_genes]), str(self.train_genes[key % self._n_genes]), label, crit)
                for key, label, crit in chosen]


# --- question answering (appendix C.2) ------------------------------------------------------------
def outcome_text(subtask: str, pert: str, gene: str, label: int) -> str:
    """The outcome line of an example: ``A) Knockdown of p does not impact g.`` and so on."""
    if subtask == "de":
        return f"A) Knockdown of {pert} does not impact {gene}." if label == 0 else \
            f"B) Knockdown of {pert} results in differential expression of {gene}."
    if subtask == "dir":
        return f"A) Knockdown of {pert} results in a decrease in expression of {gene}." if label == 0 else \
            f"B) Knockdown of {pert} results in an increase in expression of {gene}."
    raise ValueError(f"subtask must be 'de' or 'dir', got {subtask!r}")


def _final_options(subtask: str, pert: str, gene: str) -> list[str]:
    if subtask == "de":
        return [f"No. Knockdown of {pert} does not impact {gene}.",
                f"Yes. Knockdown of {pert} results in differential expression of {gene}.",
                f"There is insufficient evidence to determine how knockdown of {pert} affects {gene}."]
    return [f"Decrease. Knockdown of {pert} results in a decrease in expression of {gene}.",
            f"Increase. Knockdown of {pert} results in an increase in expression of {gene}.",
            f"There is insufficient evidence to determine how knockdown of {pert} affects {gene}."]


def summer_prompt(subtask: str, pert: str, gene: str, pert_summary: str, gene_summary: str, cell_line: str,
                  cell_line_description: str, examples: Sequence[tuple[str, str, str, str, int]]) -> str:
    """SUMMER's question prompt (appendix C.2), laid out as the published prompts are.

    Parameters
    ----------
    subtask : {"de", "dir"}
    pert, gene : str
        The pair asked about; ``pert_summary``/``gene_summary`` their summaries (as perturbation,
        as downstream gene).
    cell_line, cell_line_description : str
        E.g. ``"K562"`` and the sentence of appendix D.3.
    examples : sequence of tuple
        ``(pert', gene', summary of pert', summary of gene', label)`` of the retrieved pairs.
    """
    if subtask == "de":
        goal = f"Does a CRISPRi knockdown of {pert} in {cell_line} cells result in differential expression of {gene}?"
        q2 = f"When perturbing {pert} or similar genes, what downstream pathways or genes are differentially expressed?"
        q4 = f"What perturbations of upstream pathways or genes result in differential expression of {gene} or similar genes (if any)?"
        q5 = f"Is a CRISPRi knockdown of {pert} in {cell_line} cells likely to result in differential expression of {gene}?"
        why = ("For example, if 2) and 4) are unrelated or only indirectly related, it is unlikely we will observe "
               "differential expression. On the other hand, if 2) and 4) significantly overlap in specific genes or "
               "pathways, we may observe differential expression.")
    elif subtask == "dir":
        goal = f"Does a CRISPRi knockdown of {pert} in {cell_line} cells result in an increase or a decrease in expression of {gene}?"
        q2 = f"When perturbing {pert} or similar genes, which downstream pathways or genes increase or decrease in expression?"
        q4 = f"What perturbations of upstream pathways or genes result in an increase or a decrease in expression of {gene} or similar genes (if any)?"
        q5 = f"Is a CRISPRi knockdown of {pert} in {cell_line} cells likely to result in an increase or a decrease in expression of {gene}?"
        why = ("For example, if 2) and 4) point in the same direction for specific genes or pathways, expression likely "
               "changes in that direction.")
    else:
        raise ValueError(f"subtask must be 'de' or 'dir', got {subtask!r}")
    options = "\n".join(f"    - {o}" for o in _final_options(subtask, pert, gene))
    listing = "".join(
        f"     Example {i}: Impact of knocking down {p2} on {g2}\n"
        f"    Description of perturbed gene {p2}: {sp2}\n\n"
        f"    Description of gene of interest {g2}: {sg2}\n\n"
        f"    Outcome: {outcome_text(subtask, p2, g2, y)}\n"
        for i, (p2, g2, sp2, sg2, y) in enumerate(examples, 1)
    )
    return f"""[Start of Prompt]
    You are an expert molecular biologist who studies how genes are related using Perturb-seq. Your goal is to determine: {goal}

    You are given as input:
    - Description of perturbed gene ({pert}): description of gene that is perturbed via CRISPRi knockdown
    - Description of gene of interest ({gene}): description of gene, the impact on which you wish to infer
    - Context: description of cell line in which the genes are expressed
    - Examples: set of experimental observations that describe the impact of CRISPRi perturbations on related genes, to contextualize your answer

    Output: Please extract the most relevant parts of the examples that address these five questions. Be specific.

    1) Which of the observed perturbed genes are most similar to {pert} (if any, including {pert} itself)?
    2) {q2} Justify your answer with the observed outcomes.
    3) Which of the observed genes of interest are most similar to {gene} (if any, including {gene} itself)?
    4) {q4} Justify your answer with the observed outcomes.
    5) {q5} {why} Your final answer should end with one of these three options and nothing else.
{options}
    [End of Prompt]

    [Start of Input]
    - Description of perturbed gene ({pert}): {pert_summary}

    - Description of gene of interest ({gene}): {gene_summary}

    - Context: {cell_line_description}

    - Examples: \n{listing}    \n    [End of Input]"""


def _option_lines(subtask: str) -> tuple[str, str]:
    if subtask == "de":
        return ("A) Knockdown of the perturbed gene does not impact the gene of interest.",
                "B) Knockdown of the perturbed gene results in differential expression of the gene of interest.")
    if subtask == "dir":
        return ("A) Knockdown of the perturbed gene results in down-regulation of the gene of interest.",
                "B) Knockdown of the perturbed gene results in up-regulation of the gene of interest.")
    raise ValueError(f"subtask must be 'de' or 'dir', got {subtask!r}")


def no_cot_prompt(subtask: str, pert_summary: str, gene_summary: str, cell_line_description: str,
                  examples: Sequence[tuple[str, str, int]]) -> str:
    """LLM (No CoT) prompt: two solved examples (one of each label), then the question (C.2).

    ``examples`` holds ``(summary of pert', summary of gene', label)`` for Examples 1 and 2.
    """
    a, b = _option_lines(subtask)
    blocks = []
    for i, (sp2, sg2, y) in enumerate(examples, 1):
        blocks.append(f"Example {i}.\nInput:\n- Perturbed gene: {sp2}\n- Gene of interest: {sg2}\nAnswer: {b if y else a}")
    n = len(examples) + 1
    blocks.append(f"Example {n}.\nInput:\n- Perturbed gene: {pert_summary}\n- Gene of interest: {gene_summary}\nAnswer:")
    return f"""You are an expert molecular biologist who studies how genes are related using Perturb-seq.
You are given as Input:
- Perturbed gene: description of gene that is perturbed via CRISPRi knockdown
- Gene of interest: description of gene, the impact on which you wish to infer
Context: {cell_line_description}
Question: If you knockdown the perturbed gene using CRISPRi, how does the gene of interest's expression change?
Answer: Your answer must end with one of these two choices and nothing else.
{a}
{b}
Format: Follow the same format as Examples 1 and {n - 1}, and complete Example {n}.

""" + "\n\n".join(blocks)


def no_retrieval_prompt(subtask: str, pert_summary: str, gene_summary: str, cell_line_description: str,
                        hypothesis: int) -> str:
    """LLM (No retrieval) prompt: find evidence for or against a hypothesis (C.2).

    ``hypothesis`` is the label stated as the hypothesis (0 for option A, 1 for option B); the
    paper asks each option twice, whatever the truth.
    """
    a, b = _option_lines(subtask)
    return f"""You are an expert molecular biologist who studies how genes are related using Perturb-seq.
You are given as Input:
- Perturbed gene: description of gene that is perturbed via CRISPRi knockdown
- Gene of interest: description of gene, the impact on which you wish to infer
- Hypothesis: hypothesis regarding how the specified perturbation affects the gene of interest
Context: {cell_line_description}
Question: If you knockdown the perturbed gene using CRISPRi, how does the gene of interest's expression change?
Task: Your goal is to identify evidence in the input that supports or refutes the hypothesis, and explain whether the hypothesis is likely to be true.
Output format: Please fill in the following four sections. Preserve the formatting and add the corresponding content.
1) Supporting evidence: Identify all relevant parts of the input that support the hypothesis.
2) Refuting evidence: Identify all relevant parts of the input that refute the hypothesis.
3) Explanation: Based on the evidence, explain how to answer the question, step by step. In particular,
- if there is a causal relationship from the perturbed gene to the gene of interest, explain how biological mechanisms relate the perturbed gene to the gene of interest.
- if there is no causal relationship from the perturbed gene to the gene of interest, explain why. For example, the perturbed gene may be downstream of the gene of interest, or there may be no relationship between the two genes.
- if there is insufficient evidence to answer the question, say so.
4) Answer: Your answer must end with one of these three choices and nothing else.
{a}
{b}
C) There is insufficient evidence to determine how knockdown of the perturbed gene affects the gene of interest.
Input:
- Perturbed gene: {pert_summary}
- Gene of interest: {gene_summary}
- Hypothesis: {b if hypothesis else a}"""


def _clean_answer(text: str) -> str:
    """Drop what follows the answer: a trailing note line, the end marker, an echoed prompt."""
    lines = text.strip().split("\n")
    if lines and "Note" in lines[-1]:
        lines = lines[:-1]
    text = "\n".join(lines)
    return text.split("[End of Output]")[0].split("Output:")[0]


def _phrases(subtask: str, label: int, pert: str, gene: str) -> list[str]:
    """Phrases that commit an answer to ``label`` (after removing "in <cell line> cells ")."""
    p, g = re.escape(pert), re.escape(gene)
    if subtask == "de":
        if label == 0:
            return [rf"knockdown of {p} does not (?:impact|affect|result in differential expression of) {g}",
                    rf"knockdown of {p} (?:is|would be) (?:unlikely|not likely) to result in differential expression of {g}",
                    rf"unlikely that (?:a )?crispri knockdown of {p}", rf"unlikely that knocking down {p}",
                    r"(?:final )?answer:\s*(?:\*\*)?no\b", r"^\W*no\.", r"\*\*no\*\*"]
        return [rf"knockdown of {p} results in differential expression of {g}",
                rf"knockdown of {p} (?:is|would be) likely to result in differential expression of {g}",
                rf"(?<!un)likely that (?:a )?crispri knockdown of {p} (?:will|would) result in differential expression of {g}",
                r"(?:final )?answer:\s*(?:\*\*)?yes\b", r"^\W*yes\.", r"\*\*yes\*\*"]
    if label == 0:
        return [rf"knockdown of {p} results in a decrease in (?:the )?expression of {g}",
                rf"(?<!un)likely (?:that )?(?:a )?crispri knockdown of {p} (?:will|would) result in a decrease",
                r"(?:final )?answer:\s*(?:\*\*)?decrease\b", r"^\W*decrease\.", r"\*\*decrease\*\*"]
    return [rf"knockdown of {p} results in an increase in (?:the )?expression of {g}",
            rf"(?<!un)likely (?:that )?(?:a )?crispri knockdown of {p} (?:will|would) result in an increase",
            r"(?:final )?answer:\s*(?:\*\*)?increase\b", r"^\W*increase\.", r"\*\*increase\*\*"]


def parse_summer_answer(text: str, subtask: str, pert: str, gene: str, cell_line: str = "K562") -> int:
    """Label of a SUMMER (or No CoT) answer: 0, 1, or :data:`ABSTAIN`.

    As in the paper's rule-based parsing, the answer is searched for phrases committing to each
    label (the answer options and their usual rewordings); a text with phrases of exactly one
    label gets that label, any other text (both, neither, or "insufficient evidence") abstains.
    """
    body = _clean_answer(text).replace(f"in {cell_line} cells ", "")
    hits = []
    for label in (0, 1):
        found = any(re.search(pat, body, flags=re.IGNORECASE | re.MULTILINE) for pat in _phrases(subtask, label, pert, gene))
        hits.append(found)
    if hits[0] and not hits[1]:
        return 0
    if hits[1] and not hits[0]:
        return 1
    return ABSTAIN


def parse_option_answer(text: str, subtask: str) -> int:
    """Label of an answer to the option prompts (No CoT, No retrieval): 0, 1 or :data:`ABSTAIN`.

    The text after ``4) Answer:`` (when present) is searched for option A's and option B's
    wording; exactly one of them gives the label.
    """
    body = _clean_answer(text)
    if "4) Answer:" in body:
        body = body.split("4) Answer:", 1)[1]
    low = body.lower()
    if subtask == "de":
        neg, pos = ["does not impact", "a) knockdown"], ["in differential expression of", "b) knockdown"]
    elif subtask == "dir":
        neg, pos = ["down-regulation of", "a) knockdown"], ["up-regulation of", "b) knockdown"]
    else:
        raise ValueError(f"subtask must be 'de' or 'dir', got {subtask!r}")
    found0 = any(s in low for s in neg)
    found1 = any(s in low for s in pos)
    if found0 and not found1:
        return 0
    if found1 and not found0:
        return 1
    return ABSTAIN


# --- language-model methods (section 4.2, section 5.1, appendix A.3) -------------------------------
#: The LLM methods of the paper answered by :func:`llm_pair_scores`.
LLM_METHODS = ("summer", "no_cot", "no_retrieval")


def sample_score(labels: Sequence[int]) -> float:
    """Score of a question from its parsed samples: the mean label over non-abstaining samples.

    Appendix A.3: each question is answered several times and the mean predicted label is kept
    "after removing all abstaining outputs" (unparseable samples abstain too). NaN when every
    sample abstains; the caller then substitutes the gene's training prevalence.
    """
    kept = [int(v) for v in labels if v != ABSTAIN]
    return float(np.mean(kept)) if kept else float("nan")


def _contrasting_examples(examples: Sequence[Example], train: pd.DataFrame, rng: np.random.Generator) -> list[Example]:
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


def llm_pair_scores(method: str, client, subtask: str, items: pd.DataFrame, train: pd.DataFrame, edges: pd.DataFrame,
                    descriptions: pd.DataFrame, *, cell_line: str, cell_line_description: str,
                    prevalence: Mapping[str, float], overall: float, sampling, summary_sampling,
                    sets: Mapping[str, Sequence[str]] | None = None, seed: int = 0, k: int = 10,
                    per_criterion: int = 5) -> tuple[pd.Series, dict[str, int]]:
    """Scores of pair questions answered by a language model: SUMMER and its two LLM ablations.

    Parameters
    ----------
    method : {"summer", "no_cot", "no_retrieval"}
        ``summer`` (section 4.2): the chain-of-thought prompt of :func:`summer_prompt` with up to
        ``3 * per_criterion`` retrieved examples, parsed by :func:`parse_summer_answer`.
        ``no_cot`` (LLM (No CoT), section 5.1): :func:`no_cot_prompt` with two examples, one of
        each label (the first retrieved example of each label, else a random training pair of
        that label). ``no_retrieval`` (LLM (No retrieval)): :func:`no_retrieval_prompt` asked once
        with each answer option as the hypothesis. Both ablations are parsed with
        :func:`parse_option_answer`.
    client : pertsci.llm.LLMClient
    subtask : {"de", "dir"}
    items : pandas.DataFrame
        The questions: columns ``pert``, ``gene``; its index names the result.
    train : pandas.DataFrame
        Training pairs of the subtask (``pert, gene, label``): the retrieval corpus.
    edges, descriptions : pandas.DataFrame
        Knowledge graph and STRING descriptions, summarised by
        :func:`perturbqa_lib.knowledge_text.summarise_entities`.
    cell_line, cell_line_description : str
    prevalence, overall : mapping, float
        Training prevalence of each gene, and of all pairs (for genes unseen in training).
    sampling : pertsci.llm.SamplingParams
        Sampling of the answers (``n`` samples per prompt).
    summary_sampling : pertsci.llm.SamplingParams
        Sampling of the gene summaries.
    sets : mapping, optional
        Downstream gene sets (K562-set).
    seed, k, per_criterion : int
        Retrieval sampling seed, size of N(v), examples per criterion.

    Returns
    -------
    scores : pandas.Series
        Per item, :func:`sample_score` over all its samples (for ``no_retrieval`` the samples of
        both hypotheses), or the gene's training prevalence when every sample abstained or was
        unparseable (appendix A.3).
    stats : dict
        ``prompts``, ``samples``, ``abstained`` (samples) and ``fallback`` (items).
    """
    from perturbqa_lib.knowledge_text import summarise_entities

    if method not in LLM_METHODS:
        raise ValueError(f"method must be one of {LLM_METHODS}, got {method!r}")
    perts = items["pert"].astype(str).tolist()
    genes = items["gene"].astype(str).tolist()
    examples: list[list[Example]] = [[] for _ in perts]
    if method in ("summer", "no_cot"):
        retriever = Retriever(train, edges, sets, k=k, per_criterion=per_criterion)
        retriever.prepare(perts, genes)
        rng = np.random.default_rng(seed)
        examples = [retriever.retrieve(p, g, rng) for p, g in zip(perts, genes)]
        if method == "no_cot":
            examples = [_contrasting_examples(ex, train, rng) for ex in examples]
    need_p = perts + [e.pert for ex in examples for e in ex]
    need_g = genes + [e.gene for ex in examples for e in ex]
    s_p = summarise_entities(client, need_p, "pert", descriptions, edges, summary_sampling, sets)
    s_g = summarise_entities(client, need_g, "gene", descriptions, edges, summary_sampling, sets)
    prompts: list[str] = []
    owner: list[int] = []
    for i, (p, g) in enumerate(zip(perts, genes)):
        if method == "summer":
            listing = [(e.pert, e.gene, s_p[e.pert], s_g[e.gene], e.label) for e in examples[i]]
            prompts.append(summer_prompt(subtask, p, g, s_p[p], s_g[g], cell_line, cell_line_description, listing))
            owner.append(i)
        elif method == "no_cot":
            listing = [(s_p[e.pert], s_g[e.gene], e.label) for e in examples[i]]
            prompts.append(no_cot_prompt(subtask, s_p[p], s_g[g], cell_line_description, listing))
            owner.append(i)
        else:
            for hypothesis in (0, 1):
                prompts.append(no_retrieval_prompt(subtask, s_p[p], s_g[g], cell_line_description, hypothesis))
                owner.append(i)
    answers = client.generate(prompts, sampling)
    parsed: list[list[int]] = [[] for _ in perts]
    for i, texts in zip(owner, answers):
        if method == "summer":
            parsed[i].extend(parse_summer_answer(t, subtask, perts[i], genes[i], cell_line) for t in texts)
        else:
            parsed[i].extend(parse_option_answer(t, subtask) for t in texts)
    scores = np.array([sample_score(v) for v in parsed], dtype=float)
    missing = np.isnan(scores)
    scores[missing] = [float(prevalence.get(genes[i], overall)) for i in np.flatnonzero(missing)]
    stats = {"prompts": len(prompts), "samples": sum(len(v) for v in parsed),
             "abstained": sum(v.count(ABSTAIN) for v in parsed), "fallback": int(missing.sum())}
    return pd.Series(scores, index=items.index, dtype=float), stats


def llm_prediction(method: str, client, train, test, edges: pd.DataFrame, descriptions: pd.DataFrame, *, sampling,
                   summary_sampling, seed: int = 0, k: int = 10, per_criterion: int = 5,
                   gene_sets: bool = False) -> tuple[pd.Series, dict[str, str], dict[str, dict[str, int]]]:
    """What an LLM method of the task writes: a score per pair item and, optionally, a text per cluster.

    Parameters
    ----------
    method : {"summer", "no_cot", "no_retrieval"}
        See :func:`llm_pair_scores`.
    client : pertsci.llm.LLMClient
    train, test : anndata.AnnData
        As read by :func:`perturbqa_lib.labels.read_dataset`.
    edges, descriptions : pandas.DataFrame
    sampling, summary_sampling : pertsci.llm.SamplingParams
    seed, k, per_criterion : int
    gene_sets : bool
        Also describe the gse clusters (SUMMER's hierarchical summarisation, section 4.2 and
        appendix C.1) with :func:`perturbqa_lib.knowledge_text.describe_clusters`: gene clusters from their
        members' summaries as downstream genes, perturbation clusters as perturbations.

    Returns
    -------
    scores : pandas.Series
        Per pair item (de and dir items of ``test``).
    texts : dict
        Per cluster item, when ``gene_sets``.
    stats : dict
        Per subtask, the counts of :func:`llm_pair_scores` (``clusters`` for gse subtasks).
    """
    from perturbqa_lib.knowledge_text import describe_clusters, summarise_entities
    from perturbqa_lib.labels import gene_prevalence, training_pairs

    obs = test.obs
    cell_line = str(train.uns["cell_line"])
    context = str(train.uns["cell_line_description"])
    sets = train.uns.get("sets") or {}
    parts, texts, stats = [], {}, {}
    for subtask in ("de", "dir"):
        items = obs[obs["subtask"] == subtask]
        if items.empty:
            continue
        prevalence, overall = gene_prevalence(train.obs, subtask)
        scores, stats[subtask] = llm_pair_scores(
            method, client, subtask, items, training_pairs(train.obs, subtask), edges, descriptions,
            cell_line=cell_line, cell_line_description=context, prevalence=prevalence.to_dict(), overall=overall,
            sampling=sampling, summary_sampling=summary_sampling, sets=sets, seed=seed, k=k,
            per_criterion=per_criterion)
        parts.append(scores)
    if gene_sets:
        for subtask, role, kind in (("gse_gene", "gene", "gene"), ("gse_pert", "pert", "pert")):
            items = obs[obs["subtask"] == subtask]
            if items.empty:
                continue
            clusters = [[m for m in str(v).split(";") if m] for v in items["members"]]
            summaries = summarise_entities(client, [m for c in clusters for m in c], role, descriptions, edges,
                                           summary_sampling)
            texts.update(zip(items.index, describe_clusters(client, clusters, kind, summaries, summary_sampling)))
            stats[subtask] = {"clusters": len(clusters)}
    scores = pd.concat(parts) if parts else pd.Series(dtype=float)
    return scores, texts, stats


def run_llm_method(par: Mapping, method: str, method_id: str, *, gene_sets: bool = False) -> None:
    """The whole of a perturbqa language-model component: read, ask, write.

    Parameters
    ----------
    par
        The component's parameters: ``input_train``, ``input_test``, ``input_kg_edges``,
        ``input_gene_descriptions``, ``output``, the sampling parameters (``n_samples``,
        ``temperature``, ``top_p``, ``max_tokens``, ``seed``), the LLM arguments of
        :func:`pertsci.llm.client_from_params` and, for the retrieving methods, ``k`` and
        ``per_criterion``.
    method
        ``summer``, ``no_cot`` or ``no_retrieval`` (:func:`llm_prediction`).
    method_id
        Written to the prediction.
    gene_sets
        Also describe the gse clusters.
    """
    from pertsci.llm import SamplingParams, client_from_params
    from perturbqa_lib.labels import read_dataset, write_prediction

    train, test = read_dataset(par["input_train"], par["input_test"])
    edges = pd.read_parquet(par["input_kg_edges"])
    descriptions = pd.read_parquet(par["input_gene_descriptions"])
    client = client_from_params(par)
    # Appendix A.3: several samples per question; summaries are written once per gene and role.
    answers = SamplingParams(temperature=par["temperature"], top_p=par["top_p"], max_tokens=par["max_tokens"],
                             n=par["n_samples"], seed=par["seed"])
    summaries = dataclasses.replace(answers, n=1)
    retrieval = {key: par[key] for key in ("k", "per_criterion") if key in par}
    scores, texts, stats = llm_prediction(method, client, train, test, edges, descriptions, sampling=answers,
                                          summary_sampling=summaries, seed=par["seed"], gene_sets=gene_sets, **retrieval)
    for subtask, counts in stats.items():
        print(f"{subtask}: {counts}")
    print(f"LLM client: {client.stats}")
    write_prediction(par["output"], test.obs, test.uns["dataset_id"], method_id, scores=scores, texts=texts or None)
