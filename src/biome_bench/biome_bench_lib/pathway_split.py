"""The dataset of one species split by pathway: train items, test items and the test solution.

Train and test are split by pathway (:func:`pathway_split`): every item of a pathway, of either
task, falls on the same side, so no pathway context, entity list or paper is seen in training and
asked in the test.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from biome_bench_lib.items import ANSWER_COLUMNS, ITEM_COLUMNS, kg_references, mechanism_items, relation_items_from_kg
from biome_bench_lib.vocabulary import TASK_MECHANISM, TASK_RELATION

__all__ = ["pathway_split", "build_dataset"]


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

    Raises
    ------
    ValueError
        When ``test_fraction`` is outside (0, 1) or there are fewer than two pathways.
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
    subtasks: Sequence[str] = (TASK_RELATION, TASK_MECHANISM),
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
        The paths of the Task B and knowledge-graph files (read or looked for), named in errors.
    subtasks
        The kinds of item asked for: ``relation`` (Task A, from ``kg_records``) and/or
        ``mechanism`` (Task B, from ``task_b_records``). A knowledge graph given for a dataset
        without Task A items still gives the Task B items their reference graphs.

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
        When a subtask asked for yields no item of the species (naming the file looked in), when
        its file was not given, or when a subtask is unknown.
    """
    unknown = sorted(set(subtasks) - {TASK_RELATION, TASK_MECHANISM})
    if unknown or not subtasks:
        raise ValueError(f"subtasks must be among {TASK_RELATION!r}, {TASK_MECHANISM!r} (at least one), got {list(subtasks)}")
    parts = []
    counts: dict[str, int] = {"n_edges": 0, "n_out_of_vocabulary": 0, "n_duplicates": 0}
    # A subtask asked for must never vanish from a dataset without a word.
    if TASK_RELATION in subtasks:
        if kg_records is None:
            raise ValueError(f"{source_names[1]}: Task A items of species {species!r} need this knowledge-graph file, which was not read")
        relation, kg_counts = relation_items_from_kg(kg_records, source_name=source_names[1])
        relation = relation[relation["species"] == species]
        counts.update({k: v for k, v in kg_counts.items() if k != "n_items"})
        if relation.empty:
            raise ValueError(f"{source_names[1]}: no Task A items for species {species!r} (no edge of a "
                             f"{species!r} pathway with a relation of the vocabulary)")
        parts.append(relation)
    if TASK_MECHANISM in subtasks:
        if task_b_records is None:
            raise ValueError(f"{source_names[0]}: Task B items of species {species!r} need this Task B file, which was not read")
        mechanisms = mechanism_items(task_b_records, species=species, source_name=source_names[0])
        if mechanisms.empty:
            raise ValueError(f"{source_names[0]}: no Task B items for species {species!r}; give a Task B file that has them")
        parts.append(mechanisms)
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
