"""The ``<thinking>/<answer>/<triplets>`` answer format and its strict parser (PertReasonQA, Kim et al. 2026, section 3.1, C.1).

A response holds the model's reasoning, one of :data:`LABELS`, and the mechanism as one
``(SOURCE, SIGN, TARGET)`` triplet per line. :func:`format_response` writes one;
:func:`parse_response` reads one strictly, raising :class:`ResponseFormatError` on any deviation
(a method then answers ``invalid``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from pertreasonqa_lib.path_serialisation import Triplet

#: The three answers to a question: how the effect gene moves.
LABELS = ("up", "down", "unchanged")

#: A node name in a triplet: gene symbols, and compound names with spaces or brackets, but no comma.
_NAME = r"[^,\s](?:[^,\n]*[^,\s])?"
_TRIPLET_RE = re.compile(rf"^\(\s*({_NAME})\s*,\s*([+-]?1|0)\s*,\s*({_NAME})\s*\)$")
_BLOCK_RE = {tag: re.compile(rf"<{tag}>(.*?)</{tag}>", re.S) for tag in ("thinking", "answer", "triplets")}


class ResponseFormatError(ValueError):
    """A model response does not follow the ``<thinking>/<answer>/<triplets>`` format."""


def format_triplet(t: Sequence) -> str:
    """``(SOURCE, +1, TARGET)``: the canonical text of one triplet."""
    sign = {1: "+1", -1: "-1", 0: "0"}[int(t[1])]
    return f"({t[0]}, {sign}, {t[2]})"


def format_response(thinking: str, answer: str, triplets: Iterable[Sequence]) -> str:
    """A response in the task's format (what a model is asked to produce)."""
    body = "\n".join(format_triplet(t) for t in triplets)
    return f"<thinking>\n{thinking.strip()}\n</thinking>\n<answer>{answer}</answer>\n<triplets>\n{body}\n</triplets>"


def parse_response(text: str) -> tuple[str, str, list[Triplet]]:
    """Parse a response strictly.

    The text must contain exactly one ``<thinking>``, one ``<answer>`` and one ``<triplets>``
    block, in that order, and nothing else outside them but whitespace. The answer is one of
    ``up``, ``down``, ``unchanged`` (case-insensitive). The triplets block holds zero or more lines
    ``(SOURCE, SIGN, TARGET)`` with SIGN ``+1``, ``1``, ``-1`` or ``0``; blank lines are ignored.

    Returns
    -------
    thinking, answer, triplets

    Raises
    ------
    ResponseFormatError
        Naming the first rule broken.
    """
    if not isinstance(text, str):
        raise ResponseFormatError(f"response is not text: {type(text).__name__}")
    spans = {}
    for tag, pattern in _BLOCK_RE.items():
        found = list(pattern.finditer(text))
        if len(found) != 1:
            raise ResponseFormatError(f"expected exactly one <{tag}>...</{tag}> block, found {len(found)}")
        spans[tag] = found[0]
    if not spans["thinking"].end() <= spans["answer"].start() or not spans["answer"].end() <= spans["triplets"].start():
        raise ResponseFormatError("blocks must come in the order <thinking>, <answer>, <triplets>")
    outside = text[:spans["thinking"].start()] + text[spans["thinking"].end():spans["answer"].start()] + \
        text[spans["answer"].end():spans["triplets"].start()] + text[spans["triplets"].end():]
    if outside.strip():
        raise ResponseFormatError(f"text outside the blocks: {outside.strip()[:60]!r}")
    answer = spans["answer"].group(1).strip().lower()
    if answer not in LABELS:
        raise ResponseFormatError(f"answer must be one of {', '.join(LABELS)}, got {answer[:40]!r}")
    triplets: list[Triplet] = []
    for line in spans["triplets"].group(1).splitlines():
        line = line.strip()
        if not line:
            continue
        m = _TRIPLET_RE.match(line)
        if m is None:
            raise ResponseFormatError(f"not a (SOURCE, SIGN, TARGET) triplet: {line[:60]!r}")
        triplets.append((m.group(1), int(m.group(2)), m.group(3)))
    return spans["thinking"].group(1).strip(), answer, triplets
