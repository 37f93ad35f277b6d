"""The language model's answers parsed by rule (appendix A.3), and a question's score from its samples.

A sample that commits to exactly one label gets it; one that gives neither or both abstains
(:data:`ABSTAIN`). A question is answered several times; its score is the mean label over the
non-abstaining samples (:func:`sample_score`), or the training prevalence of its gene when all
abstain (:func:`question_scores`). :func:`parse_gene_set_description` reads the sections of a
gene-set description.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = ["ABSTAIN", "parse_summer_answer", "parse_option_answer", "parse_gene_set_description", "sample_score",
           "question_scores"]

#: Parsed value of an answer that gives no usable label.
ABSTAIN = -1
_SECTION = re.compile(r"(?:^|\n)\s*(?:\d\)\s*)?(?:\*\*)?(Brief overview of gene set|Upstream pathways may affect this gene set|Name of gene set)(?:\*\*)?\s*:\s*",
                      re.IGNORECASE)
_FLAGS = re.IGNORECASE | re.MULTILINE
# Any text, newlines included: stands for a gene in the phrases matched before the gene's own.
_ANY_TEXT = "(?s:.*)"


def _clean_answer(text: str) -> str:
    """Drop what follows the answer: a trailing note line, the end marker, an echoed prompt."""
    lines = text.strip().split("\n")
    if lines and "Note" in lines[-1]:
        lines = lines[:-1]
    text = "\n".join(lines)
    return text.split("[End of Output]")[0].split("Output:")[0]


def _phrases(subtask: str, label: int, pert: str, gene: str) -> tuple[list[str], list[str]]:
    """Phrases that commit an answer to ``label`` (after removing "in <cell line> cells ").

    ``pert`` and ``gene`` are regular expressions put where the phrases name the genes (the
    escaped symbols, or any text for :func:`_fixed_phrases`). Returns the phrases naming the genes
    and those that do not.
    """
    p, g = pert, gene
    if subtask == "de":
        if label == 0:
            return ([rf"knockdown of {p} does not (?:impact|affect|result in differential expression of) {g}",
                     rf"knockdown of {p} (?:is|would be) (?:unlikely|not likely) to result in differential expression of {g}",
                     rf"unlikely that (?:a )?crispri knockdown of {p}", rf"unlikely that knocking down {p}"],
                    [r"(?:final )?answer:\s*(?:\*\*)?no\b", r"^\W*no\.", r"\*\*no\*\*"])
        return ([rf"knockdown of {p} results in differential expression of {g}",
                 rf"knockdown of {p} (?:is|would be) likely to result in differential expression of {g}",
                 rf"(?<!un)likely that (?:a )?crispri knockdown of {p} (?:will|would) result in differential expression of {g}"],
                [r"(?:final )?answer:\s*(?:\*\*)?yes\b", r"^\W*yes\.", r"\*\*yes\*\*"])
    if label == 0:
        return ([rf"knockdown of {p} results in a decrease in (?:the )?expression of {g}",
                 rf"(?<!un)likely (?:that )?(?:a )?crispri knockdown of {p} (?:will|would) result in a decrease"],
                [r"(?:final )?answer:\s*(?:\*\*)?decrease\b", r"^\W*decrease\.", r"\*\*decrease\*\*"])
    return ([rf"knockdown of {p} results in an increase in (?:the )?expression of {g}",
             rf"(?<!un)likely (?:that )?(?:a )?crispri knockdown of {p} (?:will|would) result in an increase"],
            [r"(?:final )?answer:\s*(?:\*\*)?increase\b", r"^\W*increase\.", r"\*\*increase\*\*"])


@functools.cache
def _fixed_phrases(subtask: str, label: int) -> tuple[re.Pattern, re.Pattern]:
    """The phrases of ``label`` that name no gene, and those that do with any text for the genes.

    Both are compiled once. The second matches wherever a phrase naming the actual genes could:
    when it does not match, no such phrase does, and the phrases of the pair need not be compiled
    (compiling them for every question took most of the parsing time).
    """
    named, generic = _phrases(subtask, label, _ANY_TEXT, _ANY_TEXT)
    return (re.compile("|".join(f"(?:{pat})" for pat in generic), _FLAGS),
            re.compile("|".join(f"(?:{pat})" for pat in named), _FLAGS))


def _commits(body: str, subtask: str, label: int, pert: str, gene: str) -> bool:
    """Whether ``body`` contains a phrase committing to ``label``."""
    generic, named_any = _fixed_phrases(subtask, label)
    if generic.search(body):
        return True
    if not named_any.search(body):
        return False
    named, _ = _phrases(subtask, label, re.escape(pert), re.escape(gene))
    return any(re.search(pat, body, flags=_FLAGS) for pat in named)


def parse_summer_answer(text: str, subtask: str, pert: str, gene: str, cell_line: str = "K562") -> int:
    """Label of a SUMMER (or No CoT) answer: 0, 1, or :data:`ABSTAIN`.

    As in the paper's rule-based parsing, the answer is searched for phrases committing to each
    label (the answer options and their usual rewordings); a text with phrases of exactly one
    label gets that label, any other text (both, neither, or "insufficient evidence") abstains.
    """
    body = _clean_answer(text).replace(f"in {cell_line} cells ", "")
    hits = [_commits(body, subtask, label, pert, gene) for label in (0, 1)]
    if hits[0] and not hits[1]:
        return 0
    if hits[1] and not hits[0]:
        return 1
    return ABSTAIN


#: The wording of options A (no effect, or down) and B (differential expression, or up) of the
#: option prompts (appendix C.2), per subtask.
_OPTION_WORDING = {"de": (("does not impact",), ("in differential expression of",)),
                   "dir": (("down-regulation of",), ("up-regulation of",))}


def parse_option_answer(text: str, subtask: str) -> int:
    """Label of an answer to the option prompts (No CoT, No retrieval): 0, 1 or :data:`ABSTAIN`.

    The text after ``4) Answer:`` (when present) is searched for option A's and option B's
    wording (or their letters, ``A) Knockdown``/``B) Knockdown``); exactly one of them gives the
    label. An answer that only uses the other subtask's option wording abstains, whatever its
    letter: it answers another question.
    """
    body = _clean_answer(text)
    if "4) Answer:" in body:
        body = body.split("4) Answer:", 1)[1]
    low = body.lower()
    if subtask not in _OPTION_WORDING:
        raise ValueError(f"subtask must be 'de' or 'dir', got {subtask!r}")
    (neg_words, pos_words), other = _OPTION_WORDING[subtask], _OPTION_WORDING["dir" if subtask == "de" else "de"]
    mine = [*neg_words, *pos_words]
    if not any(s in low for s in mine) and any(s in low for s in (*other[0], *other[1])):
        # An option of the other subtask ("B) ... differential expression" to a direction
        # question): its letter answers a question that was not asked.
        return ABSTAIN
    found0 = any(s in low for s in [*neg_words, "a) knockdown"])
    found1 = any(s in low for s in [*pos_words, "b) knockdown"])
    if found0 and not found1:
        return 0
    if found1 and not found0:
        return 1
    return ABSTAIN


def parse_gene_set_description(text: str) -> dict[str, str]:
    """The sections of a gene-set description answer.

    Returns
    -------
    dict
        ``description`` ("Brief overview of gene set") and ``name`` ("Name of gene set"), each
        ``""`` when the answer lacks the section (the paper parses these two for evaluation).
    """
    text = text.split("[End of Output]")[0]
    parts = _SECTION.split(text)
    found: dict[str, str] = {}
    # split() alternates text and captured section titles: [pre, title, body, title, body, ...]
    for title, body in zip(parts[1::2], parts[2::2]):
        found.setdefault(title.lower(), body.strip())
    return {"description": found.get("brief overview of gene set", ""), "name": found.get("name of gene set", "")}


def sample_score(labels: Sequence[int]) -> float:
    """Score of a question from its parsed samples: the mean label over non-abstaining samples.

    Appendix A.3: each question is answered several times and the mean predicted label is kept
    "after removing all abstaining outputs" (unparseable samples abstain too). NaN when every
    sample abstains; the caller then substitutes the gene's training prevalence.
    """
    kept = [int(v) for v in labels if v != ABSTAIN]
    return float(np.mean(kept)) if kept else float("nan")


def question_scores(labels: Sequence[Sequence[int]], genes: Sequence[str],
                    prevalence: Mapping[str, float] | pd.Series, overall: float) -> tuple[np.ndarray, dict[str, int]]:
    """Score of each question from its parsed samples, or its gene's training prevalence.

    Parameters
    ----------
    labels : sequence of sequence of int
        Per question, the parsed label (0, 1 or :data:`ABSTAIN`) of each of its samples.
    genes : sequence of str
        The downstream gene of each question.
    prevalence, overall
        Training prevalence of each gene, and of all training pairs (for genes unseen in
        training), e.g. from :func:`perturbqa_lib.training_prevalence.gene_prevalence`.

    Returns
    -------
    scores : numpy.ndarray
        :func:`sample_score` per question; when every sample abstained or was unparseable, the
        gene's training prevalence (appendix A.3).
    stats : dict
        ``samples``, ``abstained`` (samples) and ``fallback`` (questions).
    """
    scores = np.array([sample_score(v) for v in labels], dtype=float)
    missing = np.isnan(scores)
    scores[missing] = [float(prevalence.get(genes[i], overall)) for i in np.flatnonzero(missing)]
    stats = {"samples": sum(len(v) for v in labels), "abstained": sum(list(v).count(ABSTAIN) for v in labels),
             "fallback": int(missing.sum())}
    return scores, stats
