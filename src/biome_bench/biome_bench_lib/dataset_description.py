"""The ``uns`` of a dataset's training file: its name, organism, source, licence and a description that counts its items.

Nothing here knows a species: the organism comes from the dataset component's configuration (its
``info.datasets`` entry) or, when the configuration leaves it out, from the data itself, whose KEGG
pathway names end in ``" - <Genus> <species> (<common name>)"`` (:func:`organism_from_pathway_names`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["organism_from_pathway_names", "dataset_uns"]

# "Insulin signaling pathway - Rattus norvegicus (rat)" -> ("Rattus norvegicus", "rat").
_KEGG_SPECIES = re.compile(r" - (?P<scientific>[A-Z][a-z]+(?: [a-z][\w.-]*)+) \((?P<common>[^()]+)\)\s*$")


def organism_from_pathway_names(names: Iterable[str], *, source_name: str = "items") -> tuple[str, str]:
    """The organism of KEGG pathway names, as ``dataset_organism`` writes it, and its common name.

    Parameters
    ----------
    names
        Pathway names as KEGG gives them (``"Bladder cancer - Homo sapiens (human)"``).
    source_name
        Named in the error.

    Returns
    -------
    tuple of str
        ``("homo_sapiens", "human")``: the scientific name lower-cased with ``_`` for spaces, and
        the common name; the most frequent pair when names disagree.

    Raises
    ------
    ValueError
        When no name carries a species suffix: the configuration must then give the organism.
    """
    found = Counter()
    for name in names:
        match = _KEGG_SPECIES.search(str(name))
        if match:
            found[(match["scientific"].lower().replace(" ", "_"), match["common"].strip())] += 1
    if not found:
        raise ValueError(f"{source_name}: no pathway name ends in ' - <Genus> <species> (<common name>)'; "
                         "give the organism in the dataset's configuration (--organism, --common_name)")
    return found.most_common(1)[0][0]


def dataset_uns(counts: Mapping[str, int], *, species: str, dataset_id: str, organism: str, common_name: str,
                task_b_file: str | None, kg_file: str | None, test_fraction: float, seed: int,
                reference: str, url: str, license_note: str) -> dict[str, Any]:
    """Name, summary, description, reference and licence of a dataset, with its counts.

    Parameters
    ----------
    counts
        The counts of :func:`biome_bench_lib.pathway_split.build_dataset`; each is also kept as an
        entry of its own.
    species
        KEGG organism code.
    dataset_id
        Written as ``dataset_id``.
    organism, common_name
        ``dataset_organism`` (``"rattus_norvegicus"``) and the name used in the dataset's title.
    task_b_file, kg_file
        Names of the files read, for the description; ``None`` for a file not read (that task has
        no items; no reference knowledge graphs without ``kg_file``).
    test_fraction, seed
        The split by pathway, for the description.
    reference, url, license_note
        The source of the data (from the configuration).

    Returns
    -------
    dict
        The ``uns`` of the training file.
    """
    kg_note = (
        f"Task A: {counts['n_relation_train']} train / {counts['n_relation_test']} test items from the "
        f"{counts['n_edges']} knowledge-graph edges of {kg_file} ({counts['n_out_of_vocabulary']} dropped: relation "
        f"outside the 18-relation vocabulary; {counts['n_duplicates']} dropped: repeated within a paper)."
        if counts.get("n_relation_train", 0) + counts.get("n_relation_test", 0) > 0
        else "No Task A items (not asked for this species)." + (f" Reference knowledge graphs from {kg_file}." if kg_file
                                                                else " No knowledge-graph file: no reference knowledge graphs.")
    )
    task_b_note = (
        f"Task B: {counts['n_mechanism_train']} train / {counts['n_mechanism_test']} test items from "
        f"{task_b_file} ({counts['n_mechanism_test_with_kg']} test items with a reference knowledge graph)."
        if task_b_file is not None else "No Task B items (not asked for this species)."
    )
    return {
        "dataset_id": dataset_id,
        "dataset_name": f"BIOME-Bench {common_name} ({species})",
        "dataset_summary": f"BIOME-Bench relation inference and mechanism elucidation items of {common_name} KEGG pathways, split by pathway.",
        "dataset_description": (
            f"{kg_note} {task_b_note} Pathways: {counts['n_pathways_train']} train, {counts['n_pathways_test']} test "
            f"(test fraction {test_fraction}, seed {seed})."
        ),
        "dataset_reference": reference,
        "dataset_url": url,
        "dataset_organism": organism,
        "dataset_license": license_note,
        **{k: int(v) for k, v in counts.items()},
    }
