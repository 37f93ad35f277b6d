"""Tests of biome_bench_lib.pathway_split: the dataset of one species, split by pathway."""

from __future__ import annotations

import json

import pytest
from biome_bench_lib.pathway_split import build_dataset, pathway_split
from biome_bench_lib.vocabulary import TASK_MECHANISM, TASK_RELATION


def test_build_dataset_splits_by_pathway_and_hides_answers(kg_record, task_b_record):
    kg = [kg_record(f"mmu0000{i}") for i in range(6)]
    task_b = [task_b_record(f"mmu0000{i}") for i in range(6)] + [task_b_record("hsa00001")]
    train, test, solution, counts = build_dataset(task_b, kg, species="mmu", test_fraction=0.5, seed=3)
    assert not set(train["pathway_id"]) & set(test["pathway_id"])
    assert set(train["pathway_id"]) | set(test["pathway_id"]) == {f"mmu0000{i}" for i in range(6)}
    assert "relation" not in test.columns and "mechanism" not in test.columns
    assert list(solution.index) == list(test.index)
    mech = solution[solution["task"] == TASK_MECHANISM]
    assert all(len(json.loads(s)) == 4 for s in mech["reference_kg"])  # the paper's whole graph
    assert set(mech["target_phenotypes"]) == {"apoptosis"}
    assert counts["n_relation_test"] + counts["n_relation_train"] == 12
    # same seed, same split; another seed, another split
    again = build_dataset(task_b, kg, species="mmu", test_fraction=0.5, seed=3)[1]
    assert list(again.index) == list(test.index)
    assert pathway_split([f"p{i}" for i in range(20)], 0.5, 0) != pathway_split([f"p{i}" for i in range(20)], 0.5, 1)
    # a species without a knowledge graph asks for Task B items only
    train_h, test_h, solution_h, _ = build_dataset(task_b + [task_b_record("hsa00002")], None, species="hsa",
                                                   subtasks=[TASK_MECHANISM])
    assert set(test_h["task"]) | set(train_h["task"]) == {TASK_MECHANISM}
    assert set(solution_h["reference_kg"]) == {"[]"}


def test_n_pathways_keeps_a_seeded_sample(kg_record, task_b_record):
    kg = [kg_record(f"mmu0000{i}") for i in range(6)]
    task_b = [task_b_record(f"mmu0000{i}") for i in range(6)]
    train, test, _, counts = build_dataset(task_b, kg, species="mmu", n_pathways=4, seed=1)
    assert counts["n_pathways_train"] + counts["n_pathways_test"] == 4
    assert set(train["pathway_id"]) | set(test["pathway_id"]) < {f"mmu0000{i}" for i in range(6)}


def test_pathway_split_keeps_both_sides_and_checks_its_arguments():
    assert len(pathway_split(["a", "b", "a", "b"], 0.99, 0)) == 1  # at least one training pathway
    assert len(pathway_split(["a", "b", "c"], 0.01, 0)) == 1  # at least one test pathway
    with pytest.raises(ValueError, match="at least two pathways"):
        pathway_split(["a", "a"], 0.5, 0)
    with pytest.raises(ValueError, match=r"test_fraction must be in \(0, 1\)"):
        pathway_split(["a", "b"], 1.0, 0)
    with pytest.raises(ValueError, match="task_b: no Task B items for species 'rno'"):
        build_dataset([], None, species="rno", subtasks=[TASK_MECHANISM])
    with pytest.raises(ValueError, match="kg: Task A items of species 'rno' need this knowledge-graph file"):
        build_dataset(None, None, species="rno")
    with pytest.raises(ValueError, match="subtasks must be among"):
        build_dataset([], None, species="rno", subtasks=["judge"])


def test_a_species_missing_from_a_given_file_is_an_error_naming_it(kg_record, task_b_record):
    """rat with the human-and-mouse Task B file: the subtask must not vanish without a word."""
    with pytest.raises(ValueError, match=r"tb.jsonl: no Task B items for species 'rno'"):
        build_dataset([task_b_record()], None, species="rno", source_names=("tb.jsonl", "kg.jsonl"), subtasks=[TASK_MECHANISM])
    with pytest.raises(ValueError, match=r"kg.jsonl: no Task A items for species 'rno'"):
        build_dataset(None, [kg_record()], species="rno", source_names=("tb.jsonl", "kg.jsonl"), subtasks=[TASK_RELATION])
    with pytest.raises(ValueError, match=r"tb.jsonl: Task B items of species 'rno' need this Task B file"):
        build_dataset(None, [kg_record("rno00001")], species="rno", source_names=("tb.jsonl", "kg.jsonl"))


def test_a_knowledge_graph_without_task_a_gives_reference_graphs_only(kg_record, task_b_record):
    kg = [kg_record(f"mmu0000{i}") for i in range(4)]
    task_b = [task_b_record(f"mmu0000{i}") for i in range(4)]
    train, test, solution, counts = build_dataset(task_b, kg, species="mmu", subtasks=[TASK_MECHANISM])
    assert set(train["task"]) | set(test["task"]) == {TASK_MECHANISM}
    assert counts["n_relation_train"] == counts["n_relation_test"] == 0
    assert all(len(json.loads(s)) == 4 for s in solution["reference_kg"])
