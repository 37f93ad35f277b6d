"""Text-similarity metrics shared by tasks that score generated text.

Three families, from surface overlap to meaning:

* :func:`rouge1` / :func:`rouge1_recall` -- unigram overlap (ROUGE-1, Lin 2004),
  equal to torchmetrics' ``ROUGEScore``, which PerturbQA's code scores with;
* :func:`cosine_similarity_texts` -- cosine of sentence embeddings
  (all-MiniLM-L6-v2, see :mod:`pertsci.embeddings`);
* :func:`rouge1_beyond_context` -- ROUGE-1 on the words two texts do not
  share with their context (the question both answer), so that repeating
  the question earns nothing;
* :func:`bertscore` -- greedy matching of contextual token embeddings
  (BERTScore, Zhang et al. 2020).

Empty text
    A text with nothing to compare (no word for ROUGE, only whitespace for the
    cosine, no word piece for BERTScore) scores 0 against anything, including
    another empty text. An empty answer is a failed answer, and 0 keeps
    averages over a benchmark defined, where 0/0 would give NaN.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from pertsci import embeddings as _embed

__all__ = ["tokenize", "rouge1", "rouge1_recall", "cosine_similarity_texts", "words_outside", "rouge1_beyond_context",
           "bertscore"]

# ROUGE's words: runs of the ASCII letters and digits left after lowercasing (see tokenize).
_WORD = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Words of ``text`` as ROUGE counts them.

    The text is lowercased (Python's :meth:`str.lower`) and split into maximal
    runs of ``a-z`` and ``0-9``; every other character separates words and is
    dropped. This is the tokenisation of the original ROUGE script (Lin 2004),
    of Google's ``rouge-score`` and of torchmetrics' ``ROUGEScore`` with its
    defaults, which PerturbQA's code scores with (``perturbqa/eval.py``,
    ``rouge1_recall``), so the project's ROUGE values equal the papers'.

    On biology text this drops what is not ASCII: ``"NF-κB"`` gives
    ``["nf", "b"]``, ``"TNF-α"`` gives ``["tnf"]``, ``"Ca²⁺"`` gives
    ``["ca"]`` and ``"IL-6"`` gives ``["il", "6"]``; ``"TNF-α"`` and
    ``"TNF-β"`` are the same word. Underscores separate words too. No
    stemming and no stop-word removal.

    Parameters
    ----------
    text : str

    Returns
    -------
    list of str
    """
    return _WORD.findall(text.lower())


def rouge1(candidate: str, reference: str) -> tuple[float, float, float]:
    """ROUGE-1 precision, recall and F1 of ``candidate`` against ``reference``.

    With word counts :math:`c(w)` in the candidate and :math:`r(w)` in the
    reference (words from :func:`tokenize`), the overlap is
    :math:`\\sum_w \\min(c(w), r(w))`: a word repeated in the candidate is
    credited at most as often as it occurs in the reference (clipped counts,
    Lin 2004). Precision divides the overlap by the candidate's length, recall
    by the reference's, and F1 is their harmonic mean.

    Parameters
    ----------
    candidate : str
        Generated text.
    reference : str
        Reference text.

    Returns
    -------
    tuple of float
        ``(precision, recall, f1)``, each in [0, 1]; all 0 when either text
        has no word (see the module docstring).
    """
    cand = Counter(tokenize(candidate))
    ref = Counter(tokenize(reference))
    n_cand = sum(cand.values())
    n_ref = sum(ref.values())
    if n_cand == 0 or n_ref == 0:
        return 0.0, 0.0, 0.0
    overlap = sum(min(count, ref[word]) for word, count in cand.items())
    precision = overlap / n_cand
    recall = overlap / n_ref
    f1 = 0.0 if overlap == 0 else 2 * precision * recall / (precision + recall)
    return precision, recall, f1


def rouge1_recall(candidate: str, reference: str) -> float:
    """ROUGE-1 recall: the share of reference words found in ``candidate``, counts clipped.

    See :func:`rouge1`; 0 when either text has no word.
    """
    return rouge1(candidate, reference)[1]


def _check_pairs(candidates: Sequence[str], references: Sequence[str]) -> tuple[list[str], list[str]]:
    if isinstance(candidates, str) or isinstance(references, str):
        raise TypeError("pass lists of texts, not single strings")
    candidates, references = list(candidates), list(references)
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates but {len(references)} references; they are paired")
    return candidates, references


def cosine_similarity_texts(
    candidates: Sequence[str], references: Sequence[str], **embed_kwargs
) -> np.ndarray:
    """Cosine similarity of the sentence embeddings of paired texts.

    Parameters
    ----------
    candidates, references : sequence of str
        Equal-length lists; candidate ``i`` is compared with reference ``i``.
    **embed_kwargs
        Passed to :func:`pertsci.embeddings.embed` (``cache_dir``, ``batch_size``).

    Returns
    -------
    numpy.ndarray
        ``float64`` array of length ``len(candidates)``, values in [-1, 1];
        0 where either text is empty or only whitespace.
    """
    candidates, references = _check_pairs(candidates, references)
    scores = np.zeros(len(candidates), dtype=np.float64)
    usable = [i for i, (c, r) in enumerate(zip(candidates, references)) if c.strip() and r.strip()]
    if not usable:
        return scores
    embed_kwargs["normalize"] = True
    # One call for both sides: shared texts are embedded once.
    vectors = _embed.embed([candidates[i] for i in usable] + [references[i] for i in usable], **embed_kwargs)
    cand, ref = vectors[: len(usable)], vectors[len(usable) :]
    scores[usable] = np.clip(np.einsum("ij,ij->i", cand.astype(np.float64), ref.astype(np.float64)), -1.0, 1.0)
    return scores


def words_outside(text: str, context: str) -> str:
    """The words of ``text`` that do not occur in ``context``, in order, joined by single spaces.

    Words are those of :func:`tokenize` (lower-cased runs of ``a-z`` and
    ``0-9``), so ``"IL-6"`` in the context removes ``il`` and ``6``.

    Parameters
    ----------
    text : str
    context : str

    Returns
    -------
    str
    """
    excluded = set(tokenize(context))
    return " ".join(w for w in tokenize(text) if w not in excluded)


def rouge1_beyond_context(candidate: str, reference: str, context: str) -> tuple[float, float, float]:
    """ROUGE-1 precision, recall and F1 on the words neither text shares with their context.

    Every word that occurs in ``context`` (the question both texts answer:
    a prompt with its entities, pathway and instructions) is removed from
    the candidate and the reference (:func:`words_outside`) before
    :func:`rouge1`. An answer that only repeats the question keeps no word
    and scores 0; a fixed template around the question keeps only its
    connecting words. What is left of the reference is what the literature
    adds to the question (intermediate genes, processes, directions), and
    F1 rewards saying it without padding: recall alone would reward a dump
    of every likely word, precision alone a single safe one. The words the
    prompt is written in (articles, prepositions) are mostly in the context
    too, so no stop-word list is needed.

    Parameters
    ----------
    candidate, reference, context : str

    Returns
    -------
    tuple of float
        ``(precision, recall, f1)``; all 0 when either text has no word
        outside the context.
    """
    return rouge1(words_outside(candidate, context), words_outside(reference, context))


def bertscore(
    candidates: Sequence[str], references: Sequence[str], *, batch_size: int = 64
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BERTScore precision, recall and F1 of paired texts.

    Each text becomes the contextual embeddings of its word pieces
    (all-MiniLM-L6-v2, special tokens removed, see
    :func:`pertsci.embeddings.token_embeddings`). Every candidate token is matched
    to its most cosine-similar reference token and precision is the mean of
    these maxima; recall does the same from the reference side; F1 is their
    harmonic mean (Zhang et al. 2020, "BERTScore: Evaluating Text Generation
    with BERT").

    Differences from the reference implementation: all tokens weigh the same
    (no idf weighting, which would need corpus statistics that change with
    the benchmark's content), the scores are not rescaled with a baseline
    (so unrelated texts score well above 0 and only differences between
    methods are meaningful), and the model is all-MiniLM-L6-v2 rather than a
    large BERT/RoBERTa.

    Parameters
    ----------
    candidates, references : sequence of str
        Equal-length lists; candidate ``i`` is compared with reference ``i``.
    batch_size : int
        Texts per forward pass.

    Returns
    -------
    tuple of numpy.ndarray
        ``(precision, recall, f1)``, ``float64`` arrays of length
        ``len(candidates)``; all 0 for a pair where either text has no word
        piece (e.g. empty).
    """
    candidates, references = _check_pairs(candidates, references)
    n = len(candidates)
    precision, recall, f1 = (np.zeros(n, dtype=np.float64) for _ in range(3))
    if n == 0:
        return precision, recall, f1
    # Embed each distinct text once: references are often repeated across
    # methods and samples.
    unique = list(dict.fromkeys(candidates + references))
    index = {text: k for k, text in enumerate(unique)}
    tokens = _embed.token_embeddings(unique, batch_size=batch_size)
    unit = []
    for matrix in tokens:
        matrix = matrix.astype(np.float64)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        unit.append(matrix / np.where(norms > 0, norms, 1.0))
    for i, (cand_text, ref_text) in enumerate(zip(candidates, references)):
        cand, ref = unit[index[cand_text]], unit[index[ref_text]]
        if len(cand) == 0 or len(ref) == 0:
            continue
        similarity = cand @ ref.T
        p = float(similarity.max(axis=1).mean())
        r = float(similarity.max(axis=0).mean())
        precision[i], recall[i] = p, r
        # With cosines a sum can be <= 0 (opposed texts); F1 is then 0 rather than undefined.
        f1[i] = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return precision, recall, f1
