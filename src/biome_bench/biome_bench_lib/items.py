"""Items from the original repository's JSONL files: Task A edges, Task B prompts, reference graphs.

The original repository publishes, per species, a knowledge-graph file (one JSON record per KEGG
pathway, with the papers linked to it and, per paper, the literature-derived knowledge graph:
hexaplets ``source, source_state, relation, target, target_state, condition``) and the Task B items
(chat ``messages`` whose user turn gives the pathway context and the observed entities and whose
assistant turn is the reference mechanism text). Task A items are made from the knowledge-graph
edges whose relation is in the 18-relation vocabulary (:data:`~biome_bench_lib.vocabulary.RELATIONS`),
in exactly the prompt format of the repository's Task A example (:func:`relation_prompt`; paper
section 3.4.1). Edges with another relation are dropped and counted. Every reader checks its
records and names the file and record of any problem.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from biome_bench_lib.entity_lists import split_entity_list
from biome_bench_lib.vocabulary import RELATION_INDEX, RELATIONS, TASK_MECHANISM, TASK_RELATION

__all__ = [
    "ITEM_COLUMNS",
    "ANSWER_COLUMNS",
    "read_jsonl",
    "relation_prompt",
    "relation_items_from_kg",
    "parse_mechanism_prompt",
    "mechanism_items",
    "kg_references",
]

#: Columns of the item tables (train and test files); the answers are only in train and solution.
ITEM_COLUMNS: tuple[str, ...] = (
    "task", "pathway_id", "pubmed_id", "species", "pathway_name", "prompt",
    "source", "source_state", "target", "target_state", "condition", "observed_entities",
)
#: The answer columns: in the training items and the solution, never in the test items.
ANSWER_COLUMNS: tuple[str, ...] = ("relation", "mechanism")


def read_jsonl(path: str | Path) -> list[dict]:
    """Records of a JSON-lines file.

    Parameters
    ----------
    path
        The file; blank lines are skipped.

    Returns
    -------
    list of dict

    Raises
    ------
    FileNotFoundError
        Naming the file when it does not exist.
    ValueError
        Naming the file and line when a line is not a JSON object.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: file not found")
    records = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}: line {number} is not valid JSON: {err}") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}: line {number} is a {type(record).__name__}, expected a JSON object")
            records.append(record)
    return records


#: The relation vocabulary as the Task A prompt lists it: ``['activates', 'inhibits', ...]``.
_VOCABULARY_LIST = "[" + ", ".join(f"'{r}'" for r in RELATIONS) + "]"


def relation_prompt(pathway_name: str, source: str, source_state: str, target: str, target_state: str,
                    condition: str) -> str:
    """The Task A user prompt, in exactly the format of the repository's ``TASK-A`` items.

    Parameters
    ----------
    pathway_name
        The KEGG pathway's name with its species, e.g. ``"Bladder cancer - Homo sapiens (human)"``.
    source, source_state, target, target_state, condition
        The knowledge-graph hexaplet without its relation.

    Returns
    -------
    str
    """
    return (
        f"**Pathway Context**: {pathway_name}\n\n"
        "Determine the specific biological relationship between the Source and Target entities under the given Condition.\n"
        "You must select the relationship strictly from the following vocabulary:\n"
        f"{_VOCABULARY_LIST}\n\n"
        f"**Source**: {source} ({source_state})\n"
        f"**Target**: {target} ({target_state})\n"
        f"**Condition**: {condition}\n\n"
        "Respond with the exact relation name from the list above."
    )


def _text(value: Any) -> str:
    """A field as a stripped string (``None`` becomes ``""``)."""
    return "" if value is None else str(value).strip()


def _papers(record: Mapping, where: str) -> list[dict]:
    """The papers of a pathway record; ``where`` names the record in the error."""
    papers = record.get("pubmed")
    if not isinstance(papers, list):
        raise ValueError(f"{where}: 'pubmed' must be a list of papers")
    return [p for p in papers if isinstance(p, dict)]


def relation_items_from_kg(records: Sequence[Mapping], *, source_name: str = "kg") -> tuple[pd.DataFrame, dict[str, int]]:
    """Task A items from the knowledge-graph records of one species.

    Parameters
    ----------
    records
        The pathway records of a knowledge-graph JSONL file (``id``, ``name``, ``pubmed`` with a
        ``knowledge_graph`` per paper).
    source_name
        Named in error messages (usually the file path).

    Returns
    -------
    items
        One row per edge whose relation is in :data:`RELATIONS`, indexed
        ``<pathway>_<pmid>_r<k>`` (``k`` the edge's position in its paper's graph), with the
        columns of :data:`ITEM_COLUMNS` and ``relation``.
    counts
        ``n_edges`` (all edges), ``n_out_of_vocabulary`` (dropped: relation outside the
        vocabulary), ``n_duplicates`` (dropped: an edge repeated verbatim within one paper),
        ``n_items``.

    Raises
    ------
    ValueError
        Naming ``source_name`` and the record when a record lacks its id, name or papers.
    """
    rows: list[dict] = []
    index: list[str] = []
    n_edges = n_oov = n_dup = 0
    for i, record in enumerate(records):
        where = f"{source_name}: record {i + 1}"
        pathway_id, pathway_name = _text(record.get("id")), _text(record.get("name"))
        if not pathway_id or not pathway_name:
            raise ValueError(f"{where}: a pathway record needs 'id' and 'name'")
        species = re.match(r"[a-z]+", pathway_id)
        for paper in _papers(record, where):
            pmid = _text(paper.get("pmid") or paper.get("pubmed_id"))
            seen: set[tuple[str, ...]] = set()
            for k, edge in enumerate(paper.get("knowledge_graph") or []):
                if not isinstance(edge, dict):
                    continue
                n_edges += 1
                relation = _text(edge.get("relation"))
                if relation not in RELATION_INDEX:
                    n_oov += 1
                    continue
                fields = {f: _text(edge.get(f)) for f in ("source", "source_state", "target", "target_state", "condition")}
                key = (relation, *fields.values())
                if key in seen:
                    n_dup += 1
                    continue
                seen.add(key)
                rows.append({
                    "task": TASK_RELATION, "pathway_id": pathway_id, "pubmed_id": pmid,
                    "species": species.group(0) if species else "", "pathway_name": pathway_name,
                    "prompt": relation_prompt(pathway_name, **fields), **fields, "observed_entities": "",
                    "relation": relation, "mechanism": "",
                })
                index.append(f"{pathway_id}_{pmid}_r{k}")
    items = pd.DataFrame(rows, index=pd.Index(index, name=None), columns=[*ITEM_COLUMNS, *ANSWER_COLUMNS])
    if items.index.has_duplicates:
        dup = items.index[items.index.duplicated()][0]
        raise ValueError(f"{source_name}: item id {dup} occurs twice (a pathway lists the same paper twice)")
    counts = {"n_edges": n_edges, "n_out_of_vocabulary": n_oov, "n_duplicates": n_dup, "n_items": len(items)}
    return items, counts


_FIELD = re.compile(r"^\*\*(?P<key>[^*]+)\*\*:[ \t]*(?P<value>.*)$", re.MULTILINE)


def parse_mechanism_prompt(prompt: str) -> dict[str, Any]:
    """The parts of a Task B user prompt.

    Parameters
    ----------
    prompt
        ``**Pathway Name**: ...``, ``**Pathway Description**: ...`` and ``**Observed Entities**:
        ...`` fields, as in the repository's Task B items.

    Returns
    -------
    dict
        ``pathway_name``, ``pathway_description``, ``observed_entities`` (the list's text) and
        ``entities`` (the list split by :func:`split_entity_list`).

    Raises
    ------
    ValueError
        When the pathway name or the observed entities are missing.
    """
    fields = {m.group("key").strip().lower(): m.group("value").strip() for m in _FIELD.finditer(prompt)}
    name, observed = fields.get("pathway name"), fields.get("observed entities")
    if not name or observed is None:
        raise ValueError("a Task B prompt needs '**Pathway Name**:' and '**Observed Entities**:' lines")
    return {"pathway_name": name, "pathway_description": fields.get("pathway description", ""),
            "observed_entities": observed.rstrip("."), "entities": split_entity_list(observed)}


def mechanism_items(records: Sequence[Mapping], *, species: str | None = None, source_name: str = "task_b") -> pd.DataFrame:
    """Task B items from the repository's Task B records.

    Parameters
    ----------
    records
        Records with ``messages`` (user prompt, assistant reference mechanism), ``pathway_id``,
        ``pubmed_id`` and ``species``.
    species
        Keep only this species (``hsa``, ``mmu``, ``rno``); ``None`` keeps all.
    source_name
        Named in error messages.

    Returns
    -------
    pandas.DataFrame
        Indexed ``<pathway>_<pmid>_m``, with the columns of :data:`ITEM_COLUMNS` and ``mechanism``.

    Raises
    ------
    ValueError
        Naming the record when its messages or ids are malformed, or when an item occurs twice.
    """
    rows, index = [], []
    for i, record in enumerate(records):
        where = f"{source_name}: record {i + 1}"
        rec_species = _text(record.get("species")) or _text(record.get("pathway_id"))[:3]
        if species is not None and rec_species != species:
            continue
        messages = record.get("messages")
        if not isinstance(messages, list) or len(messages) < 2 or not all(isinstance(m, dict) for m in messages):
            raise ValueError(f"{where}: 'messages' must hold a user and an assistant message")
        user = next((m for m in messages if m.get("role") == "user"), None)
        answer = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
        if user is None or answer is None:
            raise ValueError(f"{where}: 'messages' must hold a user and an assistant message")
        pathway_id, pmid = _text(record.get("pathway_id")), _text(record.get("pubmed_id"))
        if not pathway_id or not pmid:
            raise ValueError(f"{where}: 'pathway_id' and 'pubmed_id' are required")
        try:
            parts = parse_mechanism_prompt(str(user.get("content", "")))
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        rows.append({
            "task": TASK_MECHANISM, "pathway_id": pathway_id, "pubmed_id": pmid, "species": rec_species,
            "pathway_name": parts["pathway_name"], "prompt": str(user["content"]),
            "source": "", "source_state": "", "target": "", "target_state": "", "condition": "",
            "observed_entities": parts["observed_entities"], "relation": "", "mechanism": _text(answer.get("content")),
        })
        index.append(f"{pathway_id}_{pmid}_m")
    items = pd.DataFrame(rows, index=pd.Index(index), columns=[*ITEM_COLUMNS, *ANSWER_COLUMNS])
    if items.index.has_duplicates:
        raise ValueError(f"{source_name}: Task B item {items.index[items.index.duplicated()][0]} occurs twice")
    return items


def kg_references(records: Sequence[Mapping], *, source_name: str = "kg") -> dict[tuple[str, str], dict[str, list]]:
    """Reference knowledge graph and target phenotypes per (pathway id, PubMed id).

    The knowledge graph is the paper's whole graph (every edge, whatever its relation), as the
    closed-set evaluation of section 3.4.2 uses it; the target processes and phenotypes are the
    paper's standardised ``processes_phenotypes`` names, which the judge checks for phenotype
    coverage.

    Parameters
    ----------
    records
        The pathway records of a knowledge-graph JSONL file.
    source_name
        Named in error messages (usually the file path).

    Returns
    -------
    dict
        ``(pathway_id, pmid) -> {"triples": [edge dicts], "phenotypes": [names]}``.
    """
    out: dict[tuple[str, str], dict[str, list]] = {}
    for i, record in enumerate(records):
        pathway_id = _text(record.get("id") or record.get("pathway_id"))
        for paper in _papers(record, f"{source_name}: record {i + 1}"):
            pmid = _text(paper.get("pmid") or paper.get("pubmed_id"))
            edges = [
                {f: _text(e.get(f)) for f in ("source", "source_state", "relation", "target", "target_state", "condition")}
                for e in (paper.get("knowledge_graph") or []) if isinstance(e, dict)
            ]
            standard = paper.get("standardized_entities") or {}
            phenotypes = []
            for p in (standard.get("processes_phenotypes") or []) if isinstance(standard, dict) else []:
                name = _text(p.get("standard_name") or p.get("original")) if isinstance(p, dict) else _text(p)
                if name:
                    phenotypes.append(name)
            out[(pathway_id, pmid)] = {"triples": edges, "phenotypes": phenotypes}
    return out
