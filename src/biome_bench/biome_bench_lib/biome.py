"""BIOME-Bench: relation inference (Task A) and pathway mechanism elucidation (Task B).

The library side of the task ``src/biome_bench/``: everything that several of its components share.

Items
    The original repository publishes, per species, a knowledge-graph file (one JSON record per
    KEGG pathway, with the papers linked to it and, per paper, the literature-derived knowledge
    graph: hexaplets ``source, source_state, relation, target, target_state, condition``) and the
    Task B items (chat ``messages`` whose user turn gives the pathway context and the observed
    entities and whose assistant turn is the reference mechanism text). Task A items are made from
    the knowledge-graph edges whose relation is in the 18-relation vocabulary
    (:data:`RELATIONS`), in exactly the prompt format of the repository's Task A example
    (:func:`relation_prompt`; paper section 3.4.1). Edges with another relation are dropped and
    counted.

Splits
    Train and test are split by pathway (:func:`pathway_split`): every item of a pathway, of
    either task, falls on the same side, so no pathway context, entity list or paper is seen in
    training and asked in the test.

Label extraction
    :func:`extract_relation` reads a relation from free text as the reference evaluation does:
    case-folded, markdown emphasis and backticks and ``<think>`` tags removed; first the last
    non-empty line that is exactly a label (or ends in ``: <label>``), otherwise the last
    occurrence of a label in the whole text, where a label only counts when it is not part of a
    longer word. An answer with no label is unparseable and counts as wrong (section 3.4.1).

Judge
    :func:`judge_messages` and :func:`parse_judge_answer` implement the LLM-as-a-judge of section
    3.4.2 (four dimensions scored 1-5 against the reference mechanism and the paper's target
    processes and phenotypes); :func:`kg_messages` and :func:`parse_kg_answer` the closed-set
    knowledge-graph evaluation, whose coverage is ``|supported triples| / |reference triples|``.
    :func:`perturb_mechanism` and :func:`rewrite_messages` build the two answers of the judge
    validity check (section 4.4).

Average
    :func:`normalised_average` is the paper's "Avg." column (Table 2): the arithmetic mean of all
    metrics after putting each on 0-100 (proportions times 100, 1-5 judge scores times 20).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "RELATIONS",
    "TASK_RELATION",
    "TASK_MECHANISM",
    "JUDGE_DIMENSIONS",
    "read_jsonl",
    "relation_prompt",
    "relation_items_from_kg",
    "parse_mechanism_prompt",
    "split_entity_list",
    "entity_name_state",
    "mechanism_items",
    "kg_references",
    "pathway_split",
    "build_dataset",
    "triple_text",
    "mechanism_query_text",
    "item_texts",
    "strip_think",
    "normalize_answer",
    "extract_relation",
    "relation_scores",
    "macro_f1_bootstrap_ci",
    "nearest_neighbours",
    "few_shot_messages",
    "extract_json_object",
    "judge_messages",
    "parse_judge_answer",
    "kg_messages",
    "parse_kg_answer",
    "rewrite_messages",
    "perturb_mechanism",
    "normalised_average",
    "generate_answers",
    "judge_explanations",
    "kg_coverage",
    "write_items",
    "read_items",
    "write_prediction",
    "write_score",
]

#: The controlled relation vocabulary of Task A, in the order of the paper's prompt (section 3.3.1).
RELATIONS: tuple[str, ...] = (
    "activates",
    "inhibits",
    "upregulates_expression",
    "downregulates_expression",
    "regulates",
    "binds",
    "dissociates_from",
    "phosphorylates",
    "dephosphorylates",
    "ubiquitinates",
    "glycosylates",
    "methylates",
    "produces",
    "consumes",
    "converts_to",
    "leads_to",
    "increases_level",
    "decreases_level",
)
_RELATION_INDEX = {r: i for i, r in enumerate(RELATIONS)}

#: Values of the ``task`` column: Task A items and Task B items.
TASK_RELATION = "relation"
TASK_MECHANISM = "mechanism"

#: The four LLM-as-a-judge dimensions of section 3.4.2, as the judge names them in its JSON.
JUDGE_DIMENSIONS: tuple[str, ...] = ("phenotype_coverage", "causal_reasoning", "factuality", "hallucination")

#: Columns of the item tables (train and test files); the answers are only in train and solution.
ITEM_COLUMNS: tuple[str, ...] = (
    "task", "pathway_id", "pubmed_id", "species", "pathway_name", "prompt",
    "source", "source_state", "target", "target_state", "condition", "observed_entities",
)
ANSWER_COLUMNS: tuple[str, ...] = ("relation", "mechanism")


# --------------------------------------------------------------------------------------------------
# Reading the original files
# --------------------------------------------------------------------------------------------------
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
    vocabulary = "[" + ", ".join(f"'{r}'" for r in RELATIONS) + "]"
    return (
        f"**Pathway Context**: {pathway_name}\n\n"
        "Determine the specific biological relationship between the Source and Target entities under the given Condition.\n"
        "You must select the relationship strictly from the following vocabulary:\n"
        f"{vocabulary}\n\n"
        f"**Source**: {source} ({source_state})\n"
        f"**Target**: {target} ({target_state})\n"
        f"**Condition**: {condition}\n\n"
        "Respond with the exact relation name from the list above."
    )


def _text(value: Any) -> str:
    """A field as a stripped string (``None`` becomes ``""``)."""
    return "" if value is None else str(value).strip()


def _papers(record: Mapping, where: str) -> list[dict]:
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
                if relation not in _RELATION_INDEX:
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


def split_entity_list(text: str) -> list[str]:
    """Split an ``Observed Entities`` list at the commas outside parentheses.

    ``"STAT3 (dephosphorylated, Tyr705), 1,25-dihydroxyvitamin D3"`` gives two entities: a comma
    inside a state or inside a chemical name (no space after it) does not split.

    Parameters
    ----------
    text
        The comma-separated list (a final full stop is dropped).

    Returns
    -------
    list of str
    """
    text = text.strip()
    if text.endswith("."):
        text = text[:-1]
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0 and (i + 1 == len(text) or text[i + 1] == " "):
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return [e for e in out if e]


def entity_name_state(entity: str) -> tuple[str, str]:
    """``"SIGLEC12 (elevated expression)"`` -> ``("SIGLEC12", "elevated expression")``.

    Only a final parenthesised group is a state; an entity without one has state ``""``.
    """
    entity = entity.strip()
    if entity.endswith(")"):
        depth = 0
        for i in range(len(entity) - 1, -1, -1):
            if entity[i] == ")":
                depth += 1
            elif entity[i] == "(":
                depth -= 1
                if depth == 0:
                    name = entity[:i].strip()
                    if name:
                        return name, entity[i + 1 : -1].strip()
                    break
    return entity, ""


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


def pathway_split(pathway_ids: Iterable[str], test_fraction: float, seed: int) -> set[str]:
    """The test pathways of a split by pathway.

    Parameters
    ----------
    pathway_ids
        Pathway ids of all items (repeats allowed).
    test_fraction
        Share of pathways in the test split, in (0, 1); at least one pathway is on each side.
    seed
        Seed of the permutation of the sorted pathway ids.

    Returns
    -------
    set of str
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    unique = sorted(set(pathway_ids))
    if len(unique) < 2:
        raise ValueError(f"a split by pathway needs at least two pathways, got {len(unique)}")
    n_test = min(max(1, int(round(test_fraction * len(unique)))), len(unique) - 1)
    order = np.random.default_rng(seed).permutation(len(unique))
    return {unique[i] for i in order[:n_test]}


def build_dataset(
    task_b_records: Sequence[Mapping] | None,
    kg_records: Sequence[Mapping] | None,
    *,
    species: str,
    test_fraction: float = 0.5,
    seed: int = 0,
    n_pathways: int = 0,
    source_names: tuple[str, str] = ("task_b", "kg"),
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, int]]:
    """Train items, test items and the test solution of one species.

    Parameters
    ----------
    task_b_records
        Records of a Task B JSONL file (any species; filtered to ``species``), or ``None``.
    kg_records
        Records of the species' knowledge-graph JSONL file, or ``None`` (then there are no Task A
        items and no reference knowledge graphs).
    species
        KEGG organism code: ``hsa``, ``mmu``, ``rno``.
    test_fraction, seed
        The split by pathway (:func:`pathway_split`).
    n_pathways
        When positive, keep this many pathways (a seeded sample) before splitting: small subsets
        for tests.
    source_names
        File names used in error messages.

    Returns
    -------
    train
        Training items with their answers (``relation`` for Task A, ``mechanism`` for Task B).
    test
        Test items without answers.
    solution
        Test items with ``relation``, ``mechanism``, ``reference_kg`` (JSON list of the paper's
        edges; ``"[]"`` when unknown) and ``target_phenotypes`` (one per line).
    counts
        Item and edge counts (see :func:`relation_items_from_kg`) and pathway counts.

    Raises
    ------
    ValueError
        When the species has no items at all.
    """
    parts = []
    counts: dict[str, int] = {"n_edges": 0, "n_out_of_vocabulary": 0, "n_duplicates": 0}
    if kg_records is not None:
        relation, kg_counts = relation_items_from_kg(kg_records, source_name=source_names[1])
        relation = relation[relation["species"] == species]
        counts.update({k: v for k, v in kg_counts.items() if k != "n_items"})
        parts.append(relation)
    if task_b_records is not None:
        parts.append(mechanism_items(task_b_records, species=species, source_name=source_names[0]))
    if not parts or sum(len(p) for p in parts) == 0:
        raise ValueError(f"no Task A or Task B items for species {species!r} in {', '.join(source_names)}")
    items = pd.concat(parts)
    if n_pathways > 0:
        pathways = sorted(items["pathway_id"].unique())
        if n_pathways < len(pathways):
            keep = np.random.default_rng(seed).choice(len(pathways), size=n_pathways, replace=False)
            items = items[items["pathway_id"].isin([pathways[i] for i in sorted(keep)])]
    test_pathways = pathway_split(items["pathway_id"], test_fraction, seed)
    is_test = items["pathway_id"].isin(test_pathways).to_numpy()
    train, test_full = items[~is_test].copy(), items[is_test].copy()

    refs = kg_references(kg_records, source_name=source_names[1]) if kg_records is not None else {}
    keys = list(zip(test_full["pathway_id"], test_full["pubmed_id"]))
    is_mech = (test_full["task"] == TASK_MECHANISM).to_numpy()
    solution = test_full[["task", "pathway_id", "pubmed_id", "prompt", "observed_entities", *ANSWER_COLUMNS]].copy()
    solution["reference_kg"] = [json.dumps(refs.get(k, {}).get("triples", []) if m else [], ensure_ascii=False)
                                for k, m in zip(keys, is_mech)]
    solution["target_phenotypes"] = ["\n".join(refs.get(k, {}).get("phenotypes", [])) if m else "" for k, m in zip(keys, is_mech)]
    test = test_full[list(ITEM_COLUMNS)].copy()
    counts.update({
        "n_relation_train": int((train["task"] == TASK_RELATION).sum()),
        "n_relation_test": int((test["task"] == TASK_RELATION).sum()),
        "n_mechanism_train": int((train["task"] == TASK_MECHANISM).sum()),
        "n_mechanism_test": int((test["task"] == TASK_MECHANISM).sum()),
        "n_pathways_train": int(train["pathway_id"].nunique()),
        "n_pathways_test": int(test["pathway_id"].nunique()),
        "n_mechanism_test_with_kg": int(sum(bool(refs.get(k, {}).get("triples")) for k, m in zip(keys, is_mech) if m)),
    })
    return train, test, solution, counts


# --------------------------------------------------------------------------------------------------
# Texts that methods embed
# --------------------------------------------------------------------------------------------------
def triple_text(source: str, source_state: str, target: str, target_state: str, condition: str) -> str:
    """The text of a Task A question without the prompt's boilerplate: what an embedding should see."""
    return f"{source} ({source_state}) -> {target} ({target_state}); condition: {condition}"


def mechanism_query_text(pathway_name: str, observed_entities: str) -> str:
    """The text of a Task B question: pathway name and observed entities (the description is shared by a pathway)."""
    return f"{pathway_name}. Observed: {observed_entities}"


def item_texts(items: pd.DataFrame) -> list[str]:
    """Per item, :func:`triple_text` (Task A) or :func:`mechanism_query_text` (Task B)."""
    out = []
    for row in items.itertuples(index=False):
        if row.task == TASK_RELATION:
            out.append(triple_text(row.source, row.source_state, row.target, row.target_state, row.condition))
        else:
            out.append(mechanism_query_text(row.pathway_name, row.observed_entities))
    return out


def nearest_neighbours(queries: np.ndarray, keys: np.ndarray, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Indices and cosine similarities of the ``k`` most similar keys of each query.

    Parameters
    ----------
    queries, keys
        Row vectors (normalised inside).
    k
        Neighbours per query (at most ``len(keys)``); ties go to the lower key index.

    Returns
    -------
    indices, similarities
        Arrays of shape ``(len(queries), k)``, most similar first.
    """
    if len(keys) == 0:
        raise ValueError("no keys to search: the training split has no item of this kind")
    k = min(int(k), len(keys))
    q = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    c = keys / np.maximum(np.linalg.norm(keys, axis=1, keepdims=True), 1e-12)
    sim = q.astype(np.float64) @ c.astype(np.float64).T
    # Stable sort of the negated similarities keeps the lower index first among ties.
    order = np.argsort(-sim, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(sim, order, axis=1)


# --------------------------------------------------------------------------------------------------
# Task A: label extraction and scores
# --------------------------------------------------------------------------------------------------
_THINK_TAG = re.compile(r"<\s*/?\s*think\s*>", re.IGNORECASE)
_THINK_BLOCK = re.compile(r"<\s*think\s*>.*?(<\s*/\s*think\s*>|$)", re.IGNORECASE | re.DOTALL)
_LABEL = re.compile("|".join(rf"(?<![a-z0-9_]){re.escape(r)}(?![a-z0-9_])" for r in sorted(RELATIONS, key=len, reverse=True)))
_EDGE_PUNCT = " \t\r\n\"'\u201c\u201d\u2018\u2019`.,;:()[]{}<>"


def strip_think(text: str) -> str:
    """Text without its ``<think>...</think>`` reasoning blocks (an unclosed block runs to the end)."""
    return _THINK_BLOCK.sub(" ", text or "").strip()


def normalize_answer(text: str) -> str:
    """Case-fold and remove markdown bold, backticks and think tags (their content stays); squeeze spaces."""
    t = (text or "").strip().lower().replace("**", " ").replace("`", " ")
    t = _THINK_TAG.sub(" ", t)
    return re.sub(r"[ \t\r\f\v]+", " ", t).strip()


def extract_relation(text: str | None) -> str | None:
    """The relation label a free-text answer gives, by the reference evaluation's rules.

    1. From the last non-empty line upwards: a line that, normalised (:func:`normalize_answer`)
       and stripped of surrounding punctuation, is exactly a label, or whose part after its last
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
        candidate = normalize_answer(line).strip(_EDGE_PUNCT)
        if candidate in _RELATION_INDEX:
            return candidate
        if ":" in candidate:
            tail = candidate.rsplit(":", 1)[1].strip(_EDGE_PUNCT)
            if tail in _RELATION_INDEX:
                return tail
    flat = normalize_answer(text).replace("\n", " ")
    matches = _LABEL.findall(flat)
    return matches[-1] if matches else None


def _label_codes(labels: Sequence[str | None]) -> np.ndarray:
    """Label -> index in :data:`RELATIONS`; ``None`` or an unknown label -> ``len(RELATIONS)``."""
    return np.fromiter((_RELATION_INDEX.get(x, len(RELATIONS)) if isinstance(x, str) else len(RELATIONS) for x in labels),
                       dtype=np.int64, count=len(labels))


def _f1_from_confusion(conf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-class F1 and gold support from confusion counts ``(..., K, K + 1)`` (last column: unparseable)."""
    k = conf.shape[-2]
    tp = np.diagonal(conf[..., :k], axis1=-2, axis2=-1)
    support = conf.sum(axis=-1)                      # gold count per class
    predicted = conf[..., :k].sum(axis=-2)           # valid predictions per class
    fp, fn = predicted - tp, support - tp
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), 0.0)
    return f1, support


def relation_scores(gold: Sequence[str], predicted: Sequence[str | None]) -> dict[str, Any]:
    """Accuracy and macro-F1 of relation predictions (section 3.4.1).

    An unparseable prediction (``None``) is wrong: a false negative of its gold class and a false
    positive of no class.

    Parameters
    ----------
    gold
        Gold labels (each in :data:`RELATIONS`).
    predicted
        Extracted labels (:func:`extract_relation`), ``None`` when unparseable.

    Returns
    -------
    dict
        ``accuracy``; ``macro_f1`` (mean F1 over the classes with gold support); ``macro_f1_all``
        (mean over all 18 classes, a class without support and without predictions scoring 0);
        ``correct`` (per-item 0/1 array); ``per_class_f1`` and ``support`` (dicts); ``n_items``,
        ``n_unparseable``.
    """
    g, p = _label_codes(gold), _label_codes(predicted)
    if len(g) != len(p):
        raise ValueError(f"{len(g)} gold labels but {len(p)} predictions")
    if (g == len(RELATIONS)).any():
        bad = [x for x in gold if x not in _RELATION_INDEX][:3]
        raise ValueError(f"gold labels outside the vocabulary: {bad}")
    k = len(RELATIONS)
    conf = np.bincount(g * (k + 1) + p, minlength=k * (k + 1)).reshape(k, k + 1)
    f1, support = _f1_from_confusion(conf)
    correct = (g == p).astype(float)
    present = support > 0
    return {
        "accuracy": float(correct.mean()) if len(g) else float("nan"),
        "macro_f1": float(f1[present].mean()) if present.any() else float("nan"),
        "macro_f1_all": float(f1.mean()) if len(g) else float("nan"),
        "correct": correct,
        "per_class_f1": dict(zip(RELATIONS, f1.tolist())),
        "support": dict(zip(RELATIONS, support.tolist())),
        "n_items": int(len(g)),
        "n_unparseable": int((p == k).sum()),
    }


def macro_f1_bootstrap_ci(gold: Sequence[str], predicted: Sequence[str | None], *, n_boot: int = 1000, alpha: float = 0.05,
                          seed: int = 0) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap intervals of both macro-F1s, resampling items.

    The draws are those of :func:`openpert.results.resampling.bootstrap_ci` (``rng.integers(0, n,
    size=(n_boot, n))``); in each replicate the classes "with gold support" are those present in
    the resample.

    Returns
    -------
    dict
        ``{"macro_f1": (low, high), "macro_f1_all": (low, high)}``; NaN without items.
    """
    g, p = _label_codes(gold), _label_codes(predicted)
    n, k = len(g), len(RELATIONS)
    if n == 0:
        return {"macro_f1": (float("nan"),) * 2, "macro_f1_all": (float("nan"),) * 2}
    rng = np.random.default_rng(seed)
    pair = g * (k + 1) + p
    stats_present, stats_all = [], []
    block = max(1, (1 << 22) // n)
    for start in range(0, n_boot, block):
        rows = min(block, n_boot - start)
        idx = rng.integers(0, n, size=(rows, n))
        offsets = (np.arange(rows) * k * (k + 1))[:, None]
        conf = np.bincount((pair[idx] + offsets).ravel(), minlength=rows * k * (k + 1)).reshape(rows, k, k + 1)
        f1, support = _f1_from_confusion(conf)
        present = support > 0
        stats_present.append((f1 * present).sum(axis=1) / present.sum(axis=1))
        stats_all.append(f1.mean(axis=1))
    out = {}
    for name, values in (("macro_f1", np.concatenate(stats_present)), ("macro_f1_all", np.concatenate(stats_all))):
        low, high = np.percentile(values, [100 * alpha / 2, 100 * (1 - alpha / 2)])
        out[name] = (float(low), float(high))
    return out


# --------------------------------------------------------------------------------------------------
# LLM prompts: methods
# --------------------------------------------------------------------------------------------------
def few_shot_messages(prompt: str, examples: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """A chat in which solved examples precede the question.

    Parameters
    ----------
    prompt
        The item's own prompt.
    examples
        ``(prompt, answer)`` pairs of training items, most similar last (closest to the question).

    Returns
    -------
    list of dict
        Alternating user and assistant turns, ending with the question.
    """
    messages: list[dict[str, str]] = []
    for example_prompt, example_answer in examples:
        messages.append({"role": "user", "content": example_prompt})
        messages.append({"role": "assistant", "content": example_answer})
    messages.append({"role": "user", "content": prompt})
    return messages


# --------------------------------------------------------------------------------------------------
# LLM-as-a-judge and the knowledge-graph evaluation (section 3.4.2)
# --------------------------------------------------------------------------------------------------
JUDGE_SYSTEM_PROMPT = """You are a biocurator grading an AI model's explanation of a biological mechanism against a literature-derived reference.

Give each of four dimensions one whole score from 1 to 5 (no half points), using these definitions strictly.

1. phenotype_coverage: does the explanation reach the target processes and phenotypes (listed in the task data) from the observed drivers?
   5: names more than 90% of the target processes and phenotypes.
   4: names the most important phenotypes but misses one or two minor intermediate processes.
   3: names about half of them, or only in vague terms (e.g. "metabolic changes" for "glycolysis").
   2: misses the central or final phenotype; names only peripheral or unrelated processes.
   1: names none of the target processes or phenotypes.

2. causal_reasoning: is the text a connected causal argument (A -> B -> C)?
   5: a complete multi-step causal chain with explicit mechanisms ("X inhibits enzyme Y, so Z accumulates").
   4: the logic is right but some mechanistic detail (e.g. a phosphorylation site) is simplified.
   3: start and end are right (A -> C) but the intermediate mechanism is skipped, or the logic is weak.
   2: a list of facts ("A is high. B is low.") without causal connectives; a serious flaw.
   1: confused, circular or meaningless logic.

3. factuality: agreement with the reference answer.
   5: every interaction and every direction of regulation (activation vs inhibition) agrees with the reference.
   4: the core mechanism is right; small errors in details that do not change the conclusion.
   3: the gist is right but one or two directions of regulation are wrong.
   2: several serious errors that distort the biology.
   1: the main conclusion contradicts the reference (e.g. "promotes" where the reference says "suppresses").

4. hallucination (higher is better): is anything invented beyond the input and accepted biology?
   5: strictly grounded in the given input and context.
   4: adds correct general background knowledge that the input does not state.
   3: invents specific experimental details (cell lines, time points, doses) absent from the reference.
   2: invents genes, proteins or drugs that are not among the inputs.
   1: fabricates a whole pathway or mechanism that is scientifically false.

Answer with one JSON object and nothing else. First write a "critique" naming the missed target processes, the gaps in the logic and the factual errors or inventions; then the scores:
{"critique": "...", "scores": {"phenotype_coverage": <int>, "causal_reasoning": <int>, "factuality": <int>, "hallucination": <int>}}"""

JUDGE_USER_TEMPLATE = """## Question given to the model
{query}

## Target processes and phenotypes (not shown to the model; used for phenotype_coverage)
{phenotypes}

## Reference answer
{reference}

## Model output to grade
{prediction}

Grade the model output with the rubric: check which target processes it reaches, whether a causal chain links the observed entities to them, whether the directions of regulation agree with the reference, and whether it invents entities absent from the question. Reply with the JSON object only."""

KG_SYSTEM_PROMPT = """You check which relations of a reference knowledge graph a mechanism text supports.

You receive a mechanism text written by an AI model and a numbered list of reference relations. Select the relations that the text states or clearly implies:
- the direction and kind of the relation must agree (activates is not inhibits);
- entity states matter: when a relation gives a state (mutated, phosphorylated, accumulated...), the text must imply that state;
- synonyms count ("upregulates" = "increases the expression of");
- when a relation has a condition, the text must support that context.

Answer with one JSON object and nothing else:
{"reasoning": "<short analysis>", "supported_relation_ids": [<ids>]}"""

KG_USER_TEMPLATE = """## Mechanism text
{text}

## Reference relations
{relations}

List the ids of every reference relation the text supports, as the JSON object."""

REWRITE_PROMPT = """Rewrite the following mechanism explanation in different words and with a different sentence structure. Keep every entity, every molecular state, every relation and its direction, and every causal step exactly as they are; add nothing and drop nothing. Reply with the rewritten text only.

{text}"""


def extract_json_object(text: str | None) -> dict | None:
    """The first JSON object in a model's answer (reasoning blocks and code fences ignored)."""
    if not text:
        return None
    body = strip_think(text)
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", body):
        try:
            obj, _ = decoder.raw_decode(body, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def judge_messages(query: str, target_phenotypes: str, reference: str, prediction: str) -> list[dict[str, str]]:
    """The judge's chat for one Task B item.

    Parameters
    ----------
    query
        The Task B prompt the method answered.
    target_phenotypes
        The paper's processes and phenotypes, one per line (may be empty: unknown).
    reference
        The reference mechanism text.
    prediction
        The explanation to grade.
    """
    user = JUDGE_USER_TEMPLATE.format(query=query, phenotypes=target_phenotypes.strip() or "(not available)",
                                      reference=reference, prediction=prediction)
    return [{"role": "system", "content": JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": user}]


def _as_number(value: Any) -> float | None:
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

    A dimension whose value is missing, not a number or outside [1, 5] is NaN; the answer is
    unreadable (``None``) when no JSON object holds at least one valid score.
    """
    obj = extract_json_object(text)
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


def kg_messages(text: str, triples: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """The extraction model's chat: which of the numbered reference triples does ``text`` support?"""
    relations = "\n".join(f"{i}. {json.dumps(dict(t), ensure_ascii=False)}" for i, t in enumerate(triples))
    return [{"role": "system", "content": KG_SYSTEM_PROMPT},
            {"role": "user", "content": KG_USER_TEMPLATE.format(text=text, relations=relations)}]


def parse_kg_answer(text: str | None, n_triples: int) -> list[int] | None:
    """Supported triple ids of an extraction answer (closed set: ids outside ``[0, n)`` are dropped).

    Returns ``None`` when the answer has no ``supported_relation_ids`` list.
    """
    obj = extract_json_object(text)
    if obj is None or not isinstance(obj.get("supported_relation_ids"), list):
        return None
    ids: set[int] = set()
    for value in obj["supported_relation_ids"]:
        number = _as_number(value)
        if number is not None and number == int(number) and 0 <= int(number) < n_triples:
            ids.add(int(number))
    return sorted(ids)


# --------------------------------------------------------------------------------------------------
# Judge validity (section 4.4)
# --------------------------------------------------------------------------------------------------
def rewrite_messages(text: str) -> list[dict[str, str]]:
    """The chat asking a model for a semantics-preserving paraphrase of a reference mechanism."""
    return [{"role": "user", "content": REWRITE_PROMPT.format(text=text)}]


#: Regulation words and their opposites, used to corrupt a mechanism's directions of effect.
_OPPOSITES = {
    "activates": "inhibits", "activate": "inhibit", "activated": "inhibited", "activating": "inhibiting",
    "activation": "inhibition",
    "increases": "decreases", "increase": "decrease", "increased": "decreased", "increasing": "decreasing",
    "upregulates": "downregulates", "upregulate": "downregulate", "upregulated": "downregulated",
    "upregulation": "downregulation",
    "promotes": "suppresses", "promote": "suppress", "promoted": "suppressed", "promoting": "suppressing",
    "enhances": "attenuates", "enhance": "attenuate", "enhanced": "attenuated", "enhancing": "attenuating",
    "elevated": "lowered", "higher": "lower", "gain": "loss",
    "stimulates": "blocks", "stimulated": "blocked",
    "facilitates": "impairs", "facilitated": "impaired",
    "accumulation": "depletion",
}
_OPPOSITES.update({v: k for k, v in list(_OPPOSITES.items())})


def _match_case(word: str, like: str) -> str:
    if like.isupper() and len(like) > 1:
        return word.upper()
    if like[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def perturb_mechanism(text: str, entities: Sequence[str]) -> tuple[str, int, int]:
    """Corrupt a mechanism text while keeping it fluent: swap entities and invert relations.

    Entities of ``entities`` that the text mentions are paired in order of first mention and each
    pair is swapped everywhere; every regulation word of a fixed list is replaced by its opposite
    (activates <-> inhibits, increased <-> decreased, promotes <-> suppresses...). One pass over
    the text, so nothing is swapped twice.

    Parameters
    ----------
    text
        The reference mechanism.
    entities
        Entity names (without states) that may be swapped, e.g. the observed entities.

    Returns
    -------
    perturbed, n_entity_swaps, n_relation_flips
        The text and how many entity mentions and regulation words were changed.
    """
    names = sorted({e.strip() for e in entities if len(e.strip()) >= 2}, key=len, reverse=True)
    boundary = r"(?<![A-Za-z0-9]){}(?![A-Za-z0-9])"
    found = []
    for name in names:
        m = re.search(boundary.format(re.escape(name)), text)
        # A name inside a longer name already taken (STAT3 inside p-STAT3 ...) is left alone.
        if m and not any(m.start() < f_end and f_start < m.end() for _, f_start, f_end in found):
            found.append((name, m.start(), m.end()))
    found.sort(key=lambda x: x[1])
    swap: dict[str, str] = {}
    for (a, _, _), (b, _, _) in zip(found[0::2], found[1::2]):
        swap[a], swap[b] = b, a
    alternatives = [boundary.format(re.escape(n)) for n in sorted(swap, key=len, reverse=True)]
    alternatives.append(r"\b(?:" + "|".join(sorted(_OPPOSITES, key=len, reverse=True)) + r")\b")
    pattern = re.compile("|".join(f"(?:{a})" for a in alternatives), re.IGNORECASE)
    n_entities = n_words = 0

    def replace(m: re.Match) -> str:
        nonlocal n_entities, n_words
        token = m.group(0)
        if token in swap:
            n_entities += 1
            return swap[token]
        opposite = _OPPOSITES.get(token.lower())
        if opposite is None:
            return token  # a case variant of an entity name: left as written
        n_words += 1
        return _match_case(opposite, token)

    return pattern.sub(replace, text), n_entities, n_words


# --------------------------------------------------------------------------------------------------
# The paper's average
# --------------------------------------------------------------------------------------------------
def normalised_average(
    *,
    accuracy: float | None = None,
    macro_f1: float | None = None,
    judge: Mapping[str, float] | None = None,
    similarity: float | None = None,
    coverage: float | None = None,
) -> float:
    """The paper's "Avg." (Table 2): the mean of all metrics on a 0-100 scale.

    Accuracy, macro-F1, similarity and coverage (proportions) are multiplied by 100 and the 1-5
    judge scores by 20 (5 -> 100); this reproduces the Avg. column of Table 2 (e.g. Qwen3-14B:
    64.13). Metrics that are missing (``None`` or NaN: a dataset without Task A items or without
    reference knowledge graphs) are left out of the mean.

    Returns
    -------
    float
        NaN when no metric is available.
    """
    values = [v * 100 for v in (accuracy, macro_f1, similarity, coverage) if v is not None]
    values += [v * 20 for v in (judge or {}).values() if v is not None]
    values = [v for v in values if np.isfinite(v)]
    return float(np.mean(values)) if values else float("nan")


# --------------------------------------------------------------------------------------------------
# Calling a model
# --------------------------------------------------------------------------------------------------
def generate_answers(client: Any, conversations: Sequence[Sequence[Mapping[str, str]]], tasks: Sequence[str],
                     sampling: Any) -> list[str]:
    """One answer per conversation; reasoning blocks are removed from Task B explanations.

    Task A answers are kept whole: the metric extracts the label from the text, as the reference
    evaluation does from the raw response.

    Parameters
    ----------
    client
        An :class:`pertsci.llm.LLMClient`.
    conversations
        Chat messages per item.
    tasks
        The item's task (:data:`TASK_RELATION` or :data:`TASK_MECHANISM`) per conversation.
    sampling
        :class:`pertsci.llm.SamplingParams` (``n`` must be 1).
    """
    if getattr(sampling, "n", 1) != 1:
        raise ValueError("one answer per item: sampling.n must be 1")
    texts = [out[0] for out in client.generate([list(c) for c in conversations], sampling)] if conversations else []
    return [t if task == TASK_RELATION else strip_think(t) for t, task in zip(texts, tasks)]


def judge_explanations(client: Any, queries: Sequence[str], phenotypes: Sequence[str], references: Sequence[str],
                       explanations: Sequence[str], sampling: Any) -> tuple[pd.DataFrame, int]:
    """The four judge scores of each explanation (section 3.4.2).

    Returns
    -------
    scores
        One row per explanation, one column per :data:`JUDGE_DIMENSIONS`; NaN where the judge's
        answer could not be read.
    n_unreadable
        How many judge answers had no readable score.
    """
    conversations = [judge_messages(q, p, r, strip_think(e)) for q, p, r, e in zip(queries, phenotypes, references, explanations)]
    texts = [out[0] for out in client.generate(conversations, sampling)] if conversations else []
    parsed = [parse_judge_answer(t) for t in texts]
    nan = dict.fromkeys(JUDGE_DIMENSIONS, float("nan"))
    frame = pd.DataFrame([p if p is not None else nan for p in parsed], columns=list(JUDGE_DIMENSIONS), dtype=float)
    return frame, sum(p is None for p in parsed)


def kg_coverage(client: Any, explanations: Sequence[str], triples: Sequence[Sequence[Mapping[str, str]]],
                sampling: Any) -> tuple[np.ndarray, int]:
    """Knowledge-graph coverage of each explanation: supported reference triples / all (section 3.4.2).

    The extraction model may only select among the numbered reference triples (closed set). An
    item without reference triples has no coverage (NaN); an empty explanation supports no triple
    (coverage 0, the model is not asked).

    Returns
    -------
    coverage
        Per explanation, in [0, 1] or NaN (no reference graph, or an unreadable answer).
    n_unreadable
        How many extraction answers had no readable ``supported_relation_ids``.
    """
    texts = [strip_think(e) for e in explanations]
    coverage = np.full(len(texts), np.nan)
    ask = [i for i, (t, kg) in enumerate(zip(texts, triples)) if kg and t.strip()]
    for i, (t, kg) in enumerate(zip(texts, triples)):
        if kg and not t.strip():
            coverage[i] = 0.0
    answers = [out[0] for out in client.generate([kg_messages(texts[i], triples[i]) for i in ask], sampling)] if ask else []
    n_unreadable = 0
    for i, answer in zip(ask, answers):
        ids = parse_kg_answer(answer, len(triples[i]))
        if ids is None:
            n_unreadable += 1
        else:
            coverage[i] = len(ids) / len(triples[i])
    return coverage, n_unreadable


# --------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------
def write_items(items: pd.DataFrame, path: str | Path, uns: Mapping[str, Any]) -> None:
    """Write an item table as the obs of an h5ad file (no variables), gzip-compressed.

    Every column is written as strings, so that an empty field is ``""`` and never NaN.
    """
    import anndata as ad

    obs = items.astype(str).copy()
    obs.index = obs.index.astype(str)
    ad.AnnData(obs=obs, uns=dict(uns)).write_h5ad(path, compression="gzip")


def read_items(path: str | Path) -> tuple[pd.DataFrame, dict]:
    """The obs (every column as plain strings) and uns of an item file.

    Raises
    ------
    ValueError
        Naming the file when it has no ``task`` column or an unknown task.
    """
    import anndata as ad

    adata = ad.read_h5ad(path)
    obs = adata.obs.copy()
    for column in obs.columns:
        obs[column] = obs[column].astype(str)
    if "task" in obs.columns:
        unknown = sorted(set(obs["task"]) - {TASK_RELATION, TASK_MECHANISM})
        if unknown:
            raise ValueError(f"{path}: obs['task'] holds {unknown}; expected {TASK_RELATION!r} or {TASK_MECHANISM!r}")
    return obs, dict(adata.uns)


def write_prediction(path: str | Path, index: Sequence[str], answers: Sequence[str], *, dataset_id: str, method_id: str) -> None:
    """Write a prediction: one ``answer`` string per test item."""
    import anndata as ad

    if len(index) != len(answers):
        raise ValueError(f"{len(answers)} answers for {len(index)} items")
    obs = pd.DataFrame({"answer": ["" if a is None else str(a) for a in answers]}, index=pd.Index([str(i) for i in index]))
    ad.AnnData(obs=obs, uns={"dataset_id": dataset_id, "method_id": method_id}).write_h5ad(path, compression="gzip")


def write_score(path: str | Path, *, dataset_id: str, method_id: str, values: Mapping[str, float],
                per_item: pd.DataFrame | None = None, extra_uns: Mapping[str, Any] | None = None) -> None:
    """Write a score file: ``metric_ids``/``metric_values`` in uns and per-item values in obs.

    Parameters
    ----------
    values
        Metric id -> value (NaN: not applicable to the dataset).
    per_item
        Item id -> one column per metric id (may be empty or ``None``).
    extra_uns
        Further entries (counts, intervals) kept for the record.
    """
    import anndata as ad

    obs = per_item if per_item is not None else pd.DataFrame(index=pd.Index([], dtype=str))
    obs = obs.astype(float)
    obs.index = obs.index.astype(str)
    uns = {"dataset_id": dataset_id, "method_id": method_id, "metric_ids": list(values),
           "metric_values": [float(v) for v in values.values()], **dict(extra_uns or {})}
    ad.AnnData(obs=obs, uns=uns).write_h5ad(path)
