"""Tests of biome_bench_lib.items: reading and checking the original JSONL files, Task A and Task B items."""

from __future__ import annotations

import re

import pytest
from biome_bench_lib.answer_extraction import extract_relation
from biome_bench_lib.items import (
    kg_references,
    mechanism_items,
    parse_mechanism_prompt,
    read_jsonl,
    relation_items_from_kg,
    relation_prompt,
)
from biome_bench_lib.vocabulary import RELATIONS, TASK_MECHANISM, TASK_RELATION
from project_paths import SHARED_DATA

SHARED = SHARED_DATA / "biome_bench"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"the shared BIOME-Bench data is not at {SHARED}")


def test_relation_items_drop_out_of_vocabulary_and_duplicates(kg_record):
    items, counts = relation_items_from_kg([kg_record()])
    assert counts == {"n_edges": 4, "n_out_of_vocabulary": 1, "n_duplicates": 1, "n_items": 2}
    assert list(items.index) == ["mmu00001_123_r0", "mmu00001_123_r3"]
    assert list(items["relation"]) == ["activates", "leads_to"]
    assert (items["task"] == TASK_RELATION).all()
    assert items.loc["mmu00001_123_r3", "prompt"].endswith(
        "**Source**: C (elevated)\n**Target**: apoptosis (increased)\n**Condition**: in liver\n\n"
        "Respond with the exact relation name from the list above.")


def test_relation_items_name_the_bad_record(kg_record):
    with pytest.raises(ValueError, match=r"kg_x.jsonl: record 2: a pathway record needs 'id' and 'name'"):
        relation_items_from_kg([kg_record(), {"id": "mmu1", "pubmed": []}], source_name="kg_x.jsonl")
    twice = kg_record()
    twice["pubmed"] = twice["pubmed"] * 2
    with pytest.raises(ValueError, match="occurs twice"):
        relation_items_from_kg([twice])


@needs_shared
def test_relation_prompt_is_the_repository_format():
    example = read_jsonl(SHARED / "task_a_example.jsonl")[0]
    prompt = example["messages"][0]["content"]
    context = re.search(r"\*\*Pathway Context\*\*: (.*)\n", prompt).group(1)
    fields = re.search(r"\*\*Source\*\*: (.*) \((.*)\)\n\*\*Target\*\*: (.*) \((.*)\)\n\*\*Condition\*\*: (.*)\n",
                       prompt).groups()
    assert relation_prompt(context, *fields) == prompt
    assert extract_relation(example["messages"][1]["content"]) == "upregulates_expression"


@needs_shared
def test_real_mouse_items_and_task_b_parsing():
    items, counts = relation_items_from_kg(read_jsonl(SHARED / "kg_mmu.jsonl"))
    assert counts["n_edges"] == 4866 and counts["n_out_of_vocabulary"] == 680 and counts["n_duplicates"] == 1
    assert len(items) == 4185 and set(items["relation"]) <= set(RELATIONS)
    example = mechanism_items(read_jsonl(SHARED / "task_b_example.jsonl"))
    assert example.index.tolist() == ["hsa05219_41303731_m"]
    parts = parse_mechanism_prompt(example["prompt"].iloc[0])
    assert parts["pathway_name"] == "Bladder cancer - Homo sapiens (human)"
    assert parts["entities"][0] == "SIGLEC12 (elevated expression)" and parts["entities"][-1] == "RB1"
    assert len(parts["entities"]) == 9
    every = mechanism_items(read_jsonl(SHARED / "task_b_hsa_mmu.jsonl"))
    assert every["species"].value_counts().to_dict() == {"mmu": 496, "hsa": 490}


def test_read_jsonl_skips_blank_lines_and_names_the_bad_line(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text('{"a": 1}\n\n{"b": 2}\n')
    assert read_jsonl(good) == [{"a": 1}, {"b": 2}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"bad.jsonl: line 2 is a list, expected a JSON object"):
        read_jsonl(bad)
    bad.write_text('{"a": 1\n')
    with pytest.raises(ValueError, match=r"bad.jsonl: line 1 is not valid JSON"):
        read_jsonl(bad)
    with pytest.raises(FileNotFoundError, match="missing.jsonl: file not found"):
        read_jsonl(tmp_path / "missing.jsonl")


def test_mechanism_items_filter_species_and_check_records(task_b_record):
    items = mechanism_items([task_b_record(), task_b_record("hsa00001")], species="mmu")
    assert items.index.tolist() == ["mmu00001_123_m"]
    assert items.loc["mmu00001_123_m", "observed_entities"] == "A (elevated), B, C (reduced)"
    assert items.loc["mmu00001_123_m", "mechanism"] == "A activates B."
    assert (items["task"] == TASK_MECHANISM).all() and (items["relation"] == "").all()
    broken = task_b_record()
    broken["messages"] = broken["messages"][:1]
    with pytest.raises(ValueError, match=r"task_b: record 2: 'messages' must hold a user and an assistant message"):
        mechanism_items([task_b_record(), broken])
    with pytest.raises(ValueError, match="occurs twice"):
        mechanism_items([task_b_record(), task_b_record()])
    with pytest.raises(ValueError, match="Pathway Name"):
        parse_mechanism_prompt("**Observed Entities**: A")


def test_kg_references_keep_every_edge_and_the_phenotypes(kg_record):
    refs = kg_references([kg_record()])
    assert list(refs) == [("mmu00001", "123")]
    assert len(refs[("mmu00001", "123")]["triples"]) == 4  # out-of-vocabulary and repeated edges too
    assert refs[("mmu00001", "123")]["phenotypes"] == ["apoptosis"]
