"""Paths and triplets as text: JSON in the task's files, numbered lines in prompts (PertReasonQA, Kim et al. 2026).

A path is a list of signed edges ``(source, sign, target)``: triplets. The train, test and solution
files hold paths as JSON lists of ``[source, sign, target, databases]`` (:func:`paths_to_json`),
predictions their triplets as ``[source, sign, target]`` (:func:`triplets_to_json`); prompts list
paths one per numbered line ``A [state] --(+1)--> B [state] ...`` in breadth-first order
(:func:`serialize_paths`, the flat BFS serialisation of appendix B.2.5).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence

from pertreasonqa_lib.signed_graph import SignedGraph

#: One signed edge of a mechanism: ``(source, sign, target)``, sign +1, -1 or 0.
Triplet = tuple[str, int, str]

#: A numbered path line of a prompt, one step ``NAME [state]`` of it, and the signed arrow between steps.
_PATH_LINE = re.compile(r"^\s*\d+\.\s+(.*)$")
_PATH_STEP = re.compile(r"^(\S.*?)\s+\[(\w+)\]$")
_PATH_ARROW = re.compile(r"\s+--\(([+-]?1|0)\)-->\s+")


# =================================================================================================
# JSON of the task's files
# =================================================================================================
def path_triplets(graph: SignedGraph, path: Sequence[int], with_databases: bool = False) -> list[list]:
    """``[[source, sign, target(, databases)], ...]`` of a path of edge indices."""
    names = graph.nodes.to_numpy()  # the index's own array: an element of it costs less than one of the Index
    out = []
    for e in path:
        row = [str(names[graph.src[e]]), int(graph.sign[e]), str(names[graph.dst[e]])]
        if with_databases:
            row.append(str(graph.databases[e]))
        out.append(row)
    return out


def paths_to_json(graph: SignedGraph, paths: Sequence[tuple[int, ...]]) -> str:
    """JSON list of paths, each a list of ``[source, sign, target, databases]``."""
    return json.dumps([path_triplets(graph, p, with_databases=True) for p in paths], separators=(",", ":"))


def paths_from_json(text: str, where: str = "paths") -> list[list[Triplet]]:
    """Parse :func:`paths_to_json` output into lists of ``(source, sign, target)``."""
    try:
        data = json.loads(text) if text else []
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: not valid JSON ({err})") from None
    if not isinstance(data, list):
        raise ValueError(f"{where}: expected a JSON list of paths")
    return [[_triplet(t, where) for t in path] for path in data]


def triplets_to_json(triplets: Iterable[Sequence]) -> str:
    """JSON list of ``[source, sign, target]``."""
    return json.dumps([[str(t[0]), int(t[1]), str(t[2])] for t in triplets], separators=(",", ":"))


def triplets_from_json(text: str, where: str = "triplets") -> list[Triplet]:
    """Parse a JSON list of ``[source, sign, target]`` (a fourth element is ignored)."""
    try:
        data = json.loads(text) if text else []
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: not valid JSON ({err})") from None
    if not isinstance(data, list):
        raise ValueError(f"{where}: expected a JSON list of triplets")
    return [_triplet(t, where) for t in data]


def _triplet(t, where: str) -> Triplet:
    if not isinstance(t, (list, tuple)) or len(t) < 3 or int(t[1]) not in (-1, 0, 1):
        raise ValueError(f"{where}: {t!r} is not a [source, sign (-1/0/1), target] triplet")
    return (str(t[0]), int(t[1]), str(t[2]))


def unique_triplets(paths: Iterable[Iterable[Triplet]]) -> list[Triplet]:
    """The distinct triplets of several paths, in first-seen order."""
    seen: dict[Triplet, None] = {}
    for path in paths:
        for t in path:
            seen.setdefault(t, None)
    return list(seen)


# =================================================================================================
# Numbered lines of prompts (B.2.5)
# =================================================================================================
def serialize_paths(paths: Sequence[Sequence[Sequence]], states: Mapping[str, str]) -> list[str]:
    """One line per path, ``A [state] --(+1)--> B [state] ...``, paths in breadth-first order.

    The paths all start at the perturbation; ordering them by length, then by their gene sequence,
    lists upstream events before the downstream ones (the flat BFS serialisation of B.2.5).
    """
    ordered = sorted(paths, key=lambda p: (len(p), [t[2] for t in p]))
    lines = []
    for i, path in enumerate(ordered, 1):
        text = f"{path[0][0]} [{states.get(str(path[0][0]), 'unknown')}]"
        for t in path:
            sign = {1: "+1", -1: "-1", 0: "0"}[int(t[1])]
            text += f" --({sign})--> {t[2]} [{states.get(str(t[2]), 'unknown')}]"
        lines.append(f"{i}. {text}")
    return lines


def parse_serialized_paths(text: str) -> list[tuple[list[tuple[str, int, str]], dict[str, str]]]:
    """Inverse of :func:`serialize_paths` on the numbered lines of ``text``: (triplets, gene states) per path."""
    out = []
    for line in text.splitlines():
        m = _PATH_LINE.match(line)
        if not m or "-->" not in m.group(1):
            continue
        parts = _PATH_ARROW.split(m.group(1).strip())  # step, sign, step, sign, ..., step
        steps = [_PATH_STEP.match(p) for p in parts[0::2]]
        if len(parts) < 3 or any(st is None for st in steps):
            continue
        names = [st.group(1) for st in steps]
        triplets = [(names[i], int(parts[2 * i + 1]), names[i + 1]) for i in range(len(names) - 1)]
        out.append((triplets, {st.group(1): st.group(2) for st in steps}))
    return out
