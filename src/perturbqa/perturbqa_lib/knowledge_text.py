"""A gene's knowledge as text: its database description and its knowledge-graph relations (appendix D.1).

:func:`describe_gene` and :func:`relations_text` serialise a gene in the style of the paper's
appendix D.1, the ``Domain knowledge`` and ``Relations`` that SUMMER's summarisation prompts
(:mod:`perturbqa_lib.summary_prompts`) read; :func:`set_display_name`, :func:`set_annotation` and
:func:`set_description` name gene sets.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

__all__ = ["set_display_name", "set_annotation", "set_description", "describe_gene", "relations_text", "local_edges"]

_GO_ID = re.compile(r"\s*\(GO:\d+\)\s*$")
#: Relations with a line of their own in :func:`relations_text`; the others are listed by name.
_NAMED_RELATIONS = frozenset({"go_bp", "pathway", "complex", "physical", "signalling", "regulon"})


def set_display_name(name: str, relation: str) -> str:
    """Readable set names: GO terms without their id, Reactome names with spaces."""
    if relation == "go_bp":
        return _GO_ID.sub("", name)
    if relation == "pathway":
        return name.replace("-", " ")
    return name


def set_annotation(name: str) -> str:
    """The manual annotation of a downstream gene set named ``<id>-<annotation>`` (K562-set)."""
    return name.split("-", 1)[1] if re.match(r"^\d+-", name) else name


def set_description(name: str, members: Sequence[str], max_items: int | None = 60) -> str:
    """A downstream gene set as text: its name (the manual annotation) and its members."""
    return f"Gene set {name} ({set_annotation(name)}): {len(members)} genes, {_listing(list(members), max_items)}."


def _listing(items: Sequence[str], max_items: int | None) -> str:
    items = list(dict.fromkeys(items))
    if max_items is not None and len(items) > max_items:
        return ", ".join(items[:max_items]) + f" and {len(items) - max_items} more"
    return ", ".join(items)


def describe_gene(gene: str, description: str | None) -> str:
    """The database description of a gene, as the ``{description}`` of the single-node prompt.

    STRING descriptions start with the protein name, then ``;`` and the function; they become
    ``Gene products`` and ``Functions`` as in appendix D.1.
    """
    text = (description or "").strip()
    if not text:
        return f"Description of gene: {gene}\n\nNo description is available."
    product, sep, functions = text.partition(";")
    lines = [f"Description of gene: {gene}", "", f"Gene products: {product.strip()}"]
    if sep and functions.strip():
        lines += ["", f"Functions: {functions.strip()}"]
    return "\n".join(lines)


def relations_text(gene: str, edges: pd.DataFrame, *, max_items: int | None = 40) -> str:
    """The knowledge-graph relations of ``gene``, one line per relation type (appendix D.1).

    Parameters
    ----------
    gene : str
    edges : pandas.DataFrame
        Edge table (:data:`pertsci.knowledge_graphs.EDGE_COLUMNS`).
    max_items : int or None
        Longest list per line; the rest is counted ("and 12 more") so prompts stay bounded.

    Returns
    -------
    str
        ``"Relations to other genes:"`` followed by lines such as ``- X is involved in ...``,
        ``- Based on evidence from experimental evidence in humans (HuRI), X may physically
        interact with ...``, ``- X may form a complex with ... (<complex>)``, ``- X activates
        ...``; every line names what it rests on. Empty when the gene has no relation.
    """
    # Plain Python over the rows: a gene has few edges, and pandas' per-call overhead (masks,
    # groupby) cost about 10 ms a gene. Groups follow pandas' groupby(sort=True): sorted keys,
    # rows in table order within a group, rows with a missing key left out.
    rows = list(zip(*(edges[c].tolist() for c in ("source", "target", "relation", "sign", "database"))))
    out = [r for r in rows if r[0] == gene]
    inc = [r for r in rows if r[1] == gene and r[0] != gene]
    lines: list[str] = []
    for (database,), group in _groups([r for r in out if r[2] == "go_bp"], lambda r: (r[4],)):
        names = [set_display_name(r[1], "go_bp") for r in group]
        lines.append(f"- {gene} is involved in {_listing(names, max_items)} ({database}).")
    for (database,), group in _groups([r for r in out if r[2] == "pathway"], lambda r: (r[4],)):
        names = [set_display_name(r[1], "pathway") for r in group]
        lines.append(f"- {gene} participates in the pathways {_listing(names, max_items)} ({database}).")
    for _, complex_name, _, _, database in (r for r in out if r[2] == "complex"):
        partners = [r[0] for r in rows if r[2] == "complex" and r[1] == complex_name and r[0] != gene]
        with_whom = f" with {_listing(sorted(partners), max_items)}" if len(partners) else ""
        lines.append(f"- {gene} may form a complex{with_whom} ({complex_name}, {database}).")
    # The other gene of each physical interaction, in either direction.
    physical = [(r[1], r[4]) for r in out if r[2] == "physical"] + [(r[0], r[4]) for r in inc if r[2] == "physical"]
    for (database,), group in _groups(physical, lambda r: (r[1],)):
        lines.append(f"- Based on experimental evidence in humans ({database}), {gene} may physically interact with "
                     f"{_listing(sorted(r[0] for r in group), max_items)}.")
    signal_out = [r for r in out if r[2] in ("signalling", "regulon")]
    signal_in = [r for r in inc if r[2] in ("signalling", "regulon")]
    verbs = {1: "activates", -1: "inhibits", 0: "regulates"}
    passive = {1: "is activated by", -1: "is inhibited by", 0: "is regulated by"}
    for (database, sign), group in _groups(signal_out, lambda r: (r[4], r[3])):
        lines.append(f"- {gene} {verbs[int(sign)]} {_listing(sorted(r[1] for r in group), max_items)} ({database}).")
    for (database, sign), group in _groups(signal_in, lambda r: (r[4], r[3])):
        lines.append(f"- {gene} {passive[int(sign)]} {_listing(sorted(r[0] for r in group), max_items)} ({database}).")
    other = [r for r in out if r[2] not in _NAMED_RELATIONS]
    for (relation, database), group in _groups(other, lambda r: (r[2], r[4])):
        lines.append(f"- {gene} {relation} {_listing([r[1] for r in group], max_items)} ({database}).")
    if not lines:
        return ""
    return "Relations to other genes:\n\n" + "\n\n".join(lines)


def _groups(rows: list[tuple], key: Callable[[tuple], tuple]) -> list[tuple[tuple, list[tuple]]]:
    """Rows grouped by ``key``, as pandas' ``groupby(sort=True)`` iterates them.

    Keys sorted; rows in their order within a group; a row with a missing key value (None, NaN)
    in no group.
    """
    groups: dict[tuple, list[tuple]] = {}
    for row in rows:
        k = key(row)
        if not any(pd.isna(v) for v in k):
            groups.setdefault(k, []).append(row)
    return sorted(groups.items(), key=lambda item: item[0])


def local_edges(edges: pd.DataFrame, genes: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Per gene, the edges :func:`relations_text` reads: those touching it and its complexes' members.

    Grouping once replaces a scan of the whole graph per gene (the text is the same, rows keep
    their order).
    """
    by_source = edges.groupby("source", sort=False).indices
    by_target = edges.groupby("target", sort=False).indices
    is_complex = (edges["relation"] == "complex").to_numpy()
    targets = edges["target"].to_numpy()
    empty = np.zeros(0, dtype=np.int64)
    out = {}
    for g in genes:
        own = by_source.get(g, empty)
        parts = [own, by_target.get(g, empty)]
        parts += [by_target.get(c, empty) for c in set(targets[own[is_complex[own]]])]
        out[g] = edges.iloc[np.unique(np.concatenate(parts))]
    return out
