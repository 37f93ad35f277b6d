"""Tests of biome_bench_lib.dataset_description: the training file's uns, the organism read from the data."""

from __future__ import annotations

import pytest
from biome_bench_lib.dataset_description import dataset_uns, organism_from_pathway_names

COUNTS = {"n_edges": 10, "n_out_of_vocabulary": 2, "n_duplicates": 1, "n_relation_train": 4, "n_relation_test": 3,
          "n_mechanism_train": 2, "n_mechanism_test": 1, "n_pathways_train": 2, "n_pathways_test": 1,
          "n_mechanism_test_with_kg": 1}
SOURCE = {"reference": "Some source", "url": "https://example.org/data", "license_note": "Benchmarking only."}


def test_the_description_counts_the_items_and_names_the_files():
    uns = dataset_uns(COUNTS, species="mmu", dataset_id="mmu_x", organism="mus_musculus", common_name="mouse",
                      task_b_file="task_b.jsonl", kg_file="kg_mmu.jsonl", test_fraction=0.5, seed=0, **SOURCE)
    assert uns["dataset_id"] == "mmu_x" and uns["dataset_organism"] == "mus_musculus"
    assert uns["dataset_name"] == "BIOME-Bench mouse (mmu)"
    assert uns["dataset_description"].startswith(
        "Task A: 4 train / 3 test items from the 10 knowledge-graph edges of kg_mmu.jsonl (2 dropped: relation outside")
    assert "Task B: 2 train / 1 test items from task_b.jsonl (1 test items with a reference knowledge graph)." in uns["dataset_description"]
    assert uns["dataset_description"].endswith("Pathways: 2 train, 1 test (test fraction 0.5, seed 0).")
    assert (uns["dataset_reference"], uns["dataset_url"], uns["dataset_license"]) == tuple(SOURCE.values())
    assert all(uns[k] == v for k, v in COUNTS.items())


def test_without_task_a_items_the_description_says_so():
    counts = {**COUNTS, "n_relation_train": 0, "n_relation_test": 0}
    uns = dataset_uns(counts, species="hsa", dataset_id="hsa", organism="homo_sapiens", common_name="human",
                      task_b_file="t.jsonl", kg_file=None, test_fraction=0.5, seed=0, **SOURCE)
    assert "No Task A items" in uns["dataset_description"] and "no reference knowledge graphs" in uns["dataset_description"]
    assert uns["dataset_organism"] == "homo_sapiens" and uns["dataset_name"] == "BIOME-Bench human (hsa)"


def test_the_organism_is_read_from_kegg_pathway_names():
    names = ["Insulin signaling pathway - Rattus norvegicus (rat)", "Apoptosis - Rattus norvegicus (rat)",
             "Ras signaling pathway - Mus musculus (house mouse)"]
    assert organism_from_pathway_names(names) == ("rattus_norvegicus", "rat")
    assert organism_from_pathway_names(["Bladder cancer - Homo sapiens (human)"]) == ("homo_sapiens", "human")
    with pytest.raises(ValueError, match=r"my.jsonl: no pathway name .*\(--organism"):
        organism_from_pathway_names(["Insulin signaling pathway"], source_name="my.jsonl")
