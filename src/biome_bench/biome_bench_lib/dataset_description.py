"""The ``uns`` of a dataset's training file: its name, organism, licence and a description that counts its items."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ORGANISMS", "dataset_uns"]

#: KEGG organism code -> (scientific name as in ``dataset_organism``, common name).
ORGANISMS: dict[str, tuple[str, str]] = {
    "hsa": ("homo_sapiens", "human"), "mmu": ("mus_musculus", "mouse"), "rno": ("rattus_norvegicus", "rat"),
}


def dataset_uns(counts: Mapping[str, int], *, species: str, dataset_id: str, task_b_file: str, kg_file: str | None,
                test_fraction: float, seed: int) -> dict[str, Any]:
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
    task_b_file, kg_file
        Names of the files read, for the description; ``kg_file`` is ``None`` when there was no
        knowledge-graph file (no Task A items).
    test_fraction, seed
        The split by pathway, for the description.

    Returns
    -------
    dict
        The ``uns`` of the training file.
    """
    organism, common = ORGANISMS.get(species, (species, species))
    kg_note = (
        f"Task A: {counts['n_relation_train']} train / {counts['n_relation_test']} test items from the "
        f"{counts['n_edges']} knowledge-graph edges of {kg_file} ({counts['n_out_of_vocabulary']} dropped: relation "
        f"outside the 18-relation vocabulary; {counts['n_duplicates']} dropped: repeated within a paper)."
        if kg_file is not None else "No knowledge-graph file for this species: no Task A items and no reference knowledge graphs."
    )
    return {
        "dataset_id": dataset_id,
        "dataset_name": f"BIOME-Bench {common} ({species})",
        "dataset_summary": f"BIOME-Bench relation inference and mechanism elucidation items of {common} KEGG pathways, split by pathway.",
        "dataset_description": (
            f"{kg_note} Task B: {counts['n_mechanism_train']} train / {counts['n_mechanism_test']} test items from "
            f"{task_b_file} ({counts['n_mechanism_test_with_kg']} test items with a reference knowledge graph). "
            f"Pathways: {counts['n_pathways_train']} train, {counts['n_pathways_test']} test "
            f"(test fraction {test_fraction}, seed {seed})."
        ),
        "dataset_reference": "BIOME-Bench (ACL submission), https://github.com/DYJG-research/BIOME-Bench",
        "dataset_url": "https://github.com/DYJG-research/BIOME-Bench",
        "dataset_organism": organism,
        "dataset_license": "No licence stated by the authors: used for benchmarking only.",
        **{k: int(v) for k, v in counts.items()},
    }
