"""Reading model answers: reasoning blocks, the relation label of a Task A answer, judge and coverage JSON.

:func:`extract_relation` reads a relation from free text as the reference evaluation does:
case-folded, markdown emphasis and backticks and ``<think>`` tags removed; first the last non-empty
line that is exactly a label (or ends in ``: <label>``), otherwise the last occurrence of a label in
the whole text, where a label only counts when it is not part of a longer word. An answer with no
label is unparseable and counts as wrong (paper section 3.4.1). :func:`parse_judge_answer` and
:func:`parse_kg_answer` read the JSON answers of the judge and of the closed-set knowledge-graph
evaluation (section 3.4.2), strictly, from one place, the answer's last JSON object: anything out of
range is dropped, never guessed, and an answer whose last object is not a verdict is unreadable.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from biome_bench_lib.vocabulary import JUDGE_DIMENSIONS, RELATION_INDEX, RELATIONS, TASK_RELATION

__all__ = [
    "strip_think",
    "normalize_answer",
    "extract_relation",
    "answer_is_readable",
    "last_json_object",
    "parse_judge_answer",
    "parse_kg_answer",
]

# Think tags alone (normalising keeps what a block says) and whole blocks (explanations drop them).
_THINK_TAG = re.compile(r"<\s*/?\s*think\s*>", re.IGNORECASE)
_THINK_BLOCK = re.compile(r"<\s*think\s*>.*?(<\s*/\s*think\s*>|$)", re.IGNORECASE | re.DOTALL)
# Longest labels first, and never inside a longer word: "regulates" is not in "upregulates_expression".
_LABEL = re.compile("|".join(rf"(?<![a-z0-9_]){re.escape(r)}(?![a-z0-9_])" for r in sorted(RELATIONS, key=len, reverse=True)))
# What may surround a label on its own line: quotes, brackets, list and sentence punctuation.
_EDGE_PUNCT = " \t\r\n\"'\u201c\u201d\u2018\u2019`.,;:()[]{}<>"


def _strip_edges(text: str) -> str:
    """Whitespace, then the punctuation of :data:`_EDGE_PUNCT`, then whitespace again, off both ends.

    The outer strips are ``str.strip()``: every Unicode whitespace (a no-break space, an em space,
    a line separator...), not only the ASCII of the punctuation set, so that ``"activates.\u00a0"``
    and ``":\u00a0activates"`` read as the reference evaluation reads them.
    """
    return text.strip().strip(_EDGE_PUNCT).strip()


def strip_think(text: str) -> str:
    """Text without its ``<think>...</think>`` reasoning blocks (an unclosed block runs to the end).

    Parameters
    ----------
    text
        A model's answer (``None`` or ``""`` gives ``""``).

    Returns
    -------
    str
        The rest of the text, stripped.
    """
    return _THINK_BLOCK.sub(" ", text or "").strip()


def normalize_answer(text: str) -> str:
    """Case-fold and remove markdown bold, backticks and think tags (their content stays); squeeze spaces.

    Parameters
    ----------
    text
        A model's answer or one of its lines.

    Returns
    -------
    str
        Newlines are kept; runs of other whitespace become one space.
    """
    t = (text or "").strip().lower().replace("**", " ").replace("`", " ")
    t = _THINK_TAG.sub(" ", t)
    return re.sub(r"[ \t\r\f\v]+", " ", t).strip()


def extract_relation(text: str | None) -> str | None:
    """The relation label a free-text answer gives, by the reference evaluation's rules.

    1. From the last non-empty line upwards: a line that, normalised (:func:`normalize_answer`)
       and stripped of surrounding whitespace (any Unicode whitespace) and punctuation, is exactly a label, or whose part after its last
       colon is (``"Relation: binds"``), gives that label.
    2. Otherwise the last label occurring anywhere in the normalised text, where an occurrence
       preceded or followed by a letter, digit or underscore is part of another word and does not
       count (``regulates`` is not found in ``upregulates_expression`` or ``downregulates``).

    Parameters
    ----------
    text
        The model's answer.

    Returns
    -------
    str or None
        A label of :data:`RELATIONS`, or ``None`` when the answer names none (it then counts as
        wrong).
    """
    if not text:
        return None
    for line in reversed([ln for ln in text.splitlines() if ln.strip()]):
        candidate = _strip_edges(normalize_answer(line))
        if candidate in RELATION_INDEX:
            return candidate
        if ":" in candidate:
            tail = _strip_edges(candidate.rsplit(":", 1)[1])
            if tail in RELATION_INDEX:
                return tail
    flat = normalize_answer(text).replace("\n", " ")
    matches = _LABEL.findall(flat)
    return matches[-1] if matches else None


def answer_is_readable(text: str | None, task: str) -> bool:
    """Whether a method's answer gives what its task asks: a relation label (Task A) or any explanation (Task B).

    A Task A answer without a label (:func:`extract_relation` is ``None``) counts as wrong in the
    metrics; a Task B answer that is empty once its reasoning blocks are removed has nothing to judge.
    """
    if task == TASK_RELATION:
        return extract_relation(text) is not None
    return bool(strip_think(text or "").strip())


def last_json_object(text: str | None) -> dict | None:
    """The last top-level JSON object in a model's answer (reasoning blocks and code fences ignored).

    The verdict is read from one place, the end: a grader that quotes a graded text's ready-made
    verdict before giving its own is read for its own. Objects nested in another object (the
    ``scores`` of a verdict) or inside one of its strings are part of it, never a verdict of their own.

    Parameters
    ----------
    text
        A model's answer.

    Returns
    -------
    dict or None
        ``None`` when no ``{`` of the answer starts a JSON object.
    """
    if not text:
        return None
    body = strip_think(text)
    decoder = json.JSONDecoder()
    last, position = None, 0
    while (start := body.find("{", position)) >= 0:
        try:
            obj, end = decoder.raw_decode(body, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        # A decoded object is skipped whole, so the braces inside it never start another candidate.
        last, position = obj, end
    return last


def _as_number(value: Any) -> float | None:
    """A JSON number, or a string holding one, as a float; anything else (booleans too) is ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def parse_judge_answer(text: str | None) -> dict[str, float] | None:
    """The four scores of a judge answer, or ``None`` when it cannot be read.

    The verdict is the answer's last JSON object (:func:`last_json_object`). A dimension whose
    value is missing, not a number or outside [1, 5] is NaN; the answer is unreadable (``None``)
    when that object holds no valid score.

    Parameters
    ----------
    text
        The judge's answer: ``{"critique": ..., "scores": {<dimension>: <1-5>, ...}}`` (the scores
        may also be at the top level).

    Returns
    -------
    dict or None
        Dimension of :data:`~biome_bench_lib.vocabulary.JUDGE_DIMENSIONS` -> score or NaN.
    """
    obj = last_json_object(text)
    if obj is None:
        return None
    scores = obj.get("scores", obj)
    if not isinstance(scores, dict):
        return None
    out = {}
    for dim in JUDGE_DIMENSIONS:
        value = _as_number(scores.get(dim))
        out[dim] = value if value is not None and 1.0 <= value <= 5.0 else float("nan")
    if all(np.isnan(v) for v in out.values()):
        return None
    return out


def parse_kg_answer(text: str | None, n_triples: int) -> list[int] | None:
    """Supported triple ids of an extraction answer (closed set: ids outside ``[0, n)`` are dropped).

    Parameters
    ----------
    text
        The extraction model's answer: ``{"reasoning": ..., "supported_relation_ids": [...]}``.
    n_triples
        How many reference triples the model was shown.

    Returns
    -------
    list of int or None
        Sorted distinct ids; ``None`` when the answer has no ``supported_relation_ids`` list.
    """
    obj = last_json_object(text)
    if obj is None or not isinstance(obj.get("supported_relation_ids"), list):
        return None
    ids: set[int] = set()
    for value in obj["supported_relation_ids"]:
        number = _as_number(value)
        if number is not None and number == int(number) and 0 <= int(number) < n_triples:
            ids.add(int(number))
    return sorted(ids)
