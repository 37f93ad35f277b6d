"""Unit tests of biome_bench_lib.biome: items, splits, scores, judge parsing, perturbation, average."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from biome_bench_lib import biome
from project_paths import SHARED_DATA
from sklearn.metrics import f1_score

SHARED = SHARED_DATA / "biome_bench"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"the shared BIOME-Bench data is not at {SHARED}")


def kg_record(pathway="mmu00001", name="Toy pathway - Mus musculus (house mouse)"):
    edges = [
        {"source": "A", "source_state": "Present", "relation": "activates", "target": "B", "target_state": "activation", "condition": "General"},
        {"source": "B", "source_state": "activated", "relation": "promotes", "target": "C", "target_state": "Present", "condition": "General"},
        {"source": "A", "source_state": "Present", "relation": "activates", "target": "B", "target_state": "activation", "condition": "General"},
        {"source": "C", "source_state": "elevated", "relation": "leads_to", "target": "apoptosis", "target_state": "increased", "condition": "in liver"},
    ]
    return {"id": pathway, "name": name, "pubmed": [{"pmid": "123", "knowledge_graph": edges,
            "standardized_entities": {"processes_phenotypes": [{"original": "apoptosis", "type": "phenotype"}]}}]}


def task_b_record(pathway="mmu00001", pmid="123", entities="A (elevated), B, C (reduced)"):
    prompt = (f"**Pathway Name**: Toy pathway - Mus musculus (house mouse)\n**Pathway Description**: A toy.\n\n"
              f"In the context of this pathway, the following biological alterations were observed:\n"
              f"**Observed Entities**: {entities}.\n\nBased on the pathway context ...")
    return {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": "A activates B."}],
            "pathway_id": pathway, "pubmed_id": pmid, "species": pathway[:3]}


def test_relation_items_drop_out_of_vocabulary_and_duplicates():
    items, counts = biome.relation_items_from_kg([kg_record()])
    assert counts == {"n_edges": 4, "n_out_of_vocabulary": 1, "n_duplicates": 1, "n_items": 2}
    assert list(items.index) == ["mmu00001_123_r0", "mmu00001_123_r3"]
    assert list(items["relation"]) == ["activates", "leads_to"]
    assert (items["task"] == biome.TASK_RELATION).all()
    assert items.loc["mmu00001_123_r3", "prompt"].endswith(
        "**Source**: C (elevated)\n**Target**: apoptosis (increased)\n**Condition**: in liver\n\n"
        "Respond with the exact relation name from the list above.")


@needs_shared
def test_relation_prompt_is_the_repository_format():
    example = biome.read_jsonl(SHARED / "task_a_example.jsonl")[0]
    prompt = example["messages"][0]["content"]
    context = re.search(r"\*\*Pathway Context\*\*: (.*)\n", prompt).group(1)
    fields = re.search(r"\*\*Source\*\*: (.*) \((.*)\)\n\*\*Target\*\*: (.*) \((.*)\)\n\*\*Condition\*\*: (.*)\n",
                       prompt).groups()
    assert biome.relation_prompt(context, *fields) == prompt
    assert biome.extract_relation(example["messages"][1]["content"]) == "upregulates_expression"


@needs_shared
def test_real_mouse_items_and_task_b_parsing():
    items, counts = biome.relation_items_from_kg(biome.read_jsonl(SHARED / "kg_mmu.jsonl"))
    assert counts["n_edges"] == 4866 and counts["n_out_of_vocabulary"] == 680 and counts["n_duplicates"] == 1
    assert len(items) == 4185 and set(items["relation"]) <= set(biome.RELATIONS)
    example = biome.mechanism_items(biome.read_jsonl(SHARED / "task_b_example.jsonl"))
    assert example.index.tolist() == ["hsa05219_41303731_m"]
    parts = biome.parse_mechanism_prompt(example["prompt"].iloc[0])
    assert parts["pathway_name"] == "Bladder cancer - Homo sapiens (human)"
    assert parts["entities"][0] == "SIGLEC12 (elevated expression)" and parts["entities"][-1] == "RB1"
    assert len(parts["entities"]) == 9
    every = biome.mechanism_items(biome.read_jsonl(SHARED / "task_b_hsa_mmu.jsonl"))
    assert every["species"].value_counts().to_dict() == {"mmu": 496, "hsa": 490}


def test_entity_lists_split_outside_parentheses():
    text = "STAT3 (dephosphorylated, Tyr705), 1,25-dihydroxyvitamin D3, MYCL (expression reduced), Gsk-650394."
    entities = biome.split_entity_list(text)
    assert entities == ["STAT3 (dephosphorylated, Tyr705)", "1,25-dihydroxyvitamin D3", "MYCL (expression reduced)", "Gsk-650394"]
    assert biome.entity_name_state(entities[0]) == ("STAT3", "dephosphorylated, Tyr705")
    assert biome.entity_name_state("IL-6 (R) receptor (blocked)") == ("IL-6 (R) receptor", "blocked")
    assert biome.entity_name_state("CTSK") == ("CTSK", "")


def test_build_dataset_splits_by_pathway_and_hides_answers():
    kg = [kg_record(f"mmu0000{i}") for i in range(6)]
    task_b = [task_b_record(f"mmu0000{i}") for i in range(6)] + [task_b_record("hsa00001")]
    train, test, solution, counts = biome.build_dataset(task_b, kg, species="mmu", test_fraction=0.5, seed=3)
    assert not set(train["pathway_id"]) & set(test["pathway_id"])
    assert set(train["pathway_id"]) | set(test["pathway_id"]) == {f"mmu0000{i}" for i in range(6)}
    assert "relation" not in test.columns and "mechanism" not in test.columns
    assert list(solution.index) == list(test.index)
    mech = solution[solution["task"] == biome.TASK_MECHANISM]
    assert all(len(json.loads(s)) == 4 for s in mech["reference_kg"])  # the paper's whole graph
    assert set(mech["target_phenotypes"]) == {"apoptosis"}
    assert counts["n_relation_test"] + counts["n_relation_train"] == 12
    # same seed, same split; another seed, another split
    again = biome.build_dataset(task_b, kg, species="mmu", test_fraction=0.5, seed=3)[1]
    assert list(again.index) == list(test.index)
    assert biome.pathway_split([f"p{i}" for i in range(20)], 0.5, 0) != biome.pathway_split([f"p{i}" for i in range(20)], 0.5, 1)
    # a species without a knowledge graph has Task B items only
    train_h, test_h, solution_h, _ = biome.build_dataset(task_b + [task_b_record("hsa00002")], None, species="hsa")
    assert set(test_h["task"]) | set(train_h["task"]) == {biome.TASK_MECHANISM}
    assert set(solution_h["reference_kg"]) == {"[]"}


def test_relation_scores_match_sklearn():
    rng = np.random.default_rng(0)
    gold = list(rng.choice(biome.RELATIONS[:6], size=300))
    pred = [g if rng.random() < 0.5 else (None if rng.random() < 0.3 else str(rng.choice(biome.RELATIONS[:9]))) for g in gold]
    scores = biome.relation_scores(gold, pred)
    as_text = [p if p is not None else "<unparseable>" for p in pred]
    present = sorted(set(gold))
    assert scores["accuracy"] == pytest.approx(np.mean([g == p for g, p in zip(gold, pred)]))
    assert scores["macro_f1"] == pytest.approx(f1_score(gold, as_text, labels=present, average="macro", zero_division=0))
    assert scores["macro_f1_all"] == pytest.approx(f1_score(gold, as_text, labels=list(biome.RELATIONS), average="macro", zero_division=0))
    assert scores["n_unparseable"] == sum(p is None for p in pred)


def test_macro_f1_bootstrap_matches_a_plain_loop():
    rng = np.random.default_rng(1)
    gold = list(rng.choice(biome.RELATIONS[:5], size=60))
    pred = [g if rng.random() < 0.6 else str(rng.choice(biome.RELATIONS[:5])) for g in gold]
    ci = biome.macro_f1_bootstrap_ci(gold, pred, n_boot=200, seed=7)
    draws = np.random.default_rng(7).integers(0, len(gold), size=(200, len(gold)))
    loop = [biome.relation_scores([gold[i] for i in row], [pred[i] for i in row])["macro_f1"] for row in draws]
    assert ci["macro_f1"] == pytest.approx(tuple(np.percentile(loop, [2.5, 97.5])))
    point = biome.relation_scores(gold, pred)["macro_f1"]
    assert ci["macro_f1"][0] <= point <= ci["macro_f1"][1]


@pytest.mark.parametrize("row, avg", [
    ((47.43, 43.72, 3.12, 3.31, 3.97, 4.64, 78.73, 42.38), 64.13),   # Qwen3-14B, Table 2
    ((54.66, 50.70, 3.68, 4.58, 4.69, 4.62, 71.38, 37.49), 70.70),   # GPT-5.2
    ((54.68, 50.41, 4.02, 4.48, 4.76, 4.83, 77.36, 44.45), 73.59),   # S1-Base-671B
])
def test_normalised_average_reproduces_table_2(row, avg):
    acc, f1, pc, cr, fa, ha, sim, cov = row
    value = biome.normalised_average(accuracy=acc / 100, macro_f1=f1 / 100, similarity=sim / 100, coverage=cov / 100,
                                     judge={"phenotype_coverage": pc, "causal_reasoning": cr, "factuality": fa, "hallucination": ha})
    assert value == pytest.approx(avg, abs=0.006)


def test_normalised_average_leaves_out_missing_metrics():
    assert biome.normalised_average(accuracy=None, macro_f1=float("nan"), similarity=0.5, judge={"a": 5.0}) == pytest.approx(75)
    assert np.isnan(biome.normalised_average())


def test_judge_and_kg_answers_are_parsed_strictly():
    fenced = '<think>let me see {"scores": 1}</think>\n```json\n{"critique": "ok", "scores": {"phenotype_coverage": 4, ' \
             '"causal_reasoning": "5", "factuality": 9, "hallucination": 3.0}}\n```'
    parsed = biome.parse_judge_answer(fenced)
    assert parsed["phenotype_coverage"] == 4 and parsed["causal_reasoning"] == 5 and parsed["hallucination"] == 3
    assert np.isnan(parsed["factuality"])  # outside 1-5
    assert biome.parse_judge_answer("The answer is good, 5/5.") is None
    assert biome.parse_judge_answer('{"scores": {"factuality": 0}}') is None
    assert biome.parse_kg_answer('{"supported_relation_ids": [0, "2", 2, 7, -1, 1.5, "x"]}', 5) == [0, 2]
    assert biome.parse_kg_answer('{"reasoning": "none"}', 5) is None
    messages = biome.kg_messages("text", [{"source": "A", "relation": "activates", "target": "B"}])
    assert '0. {"source": "A", "relation": "activates", "target": "B"}' in messages[1]["content"]
    judge = biome.judge_messages("Q?", "apoptosis\nnecrosis", "REF", "PRED")
    assert judge[0]["content"] == biome.JUDGE_SYSTEM_PROMPT
    assert "apoptosis\nnecrosis" in judge[1]["content"] and "REF" in judge[1]["content"] and "PRED" in judge[1]["content"]


def test_perturbation_swaps_entities_and_inverts_relations_once():
    text = "SGK1 activates STAT3, and STAT3 increased MYCL expression. Activation of MYCL promotes CTSK; p-STAT3 is higher."
    perturbed, n_entities, n_words = biome.perturb_mechanism(text, ["SGK1", "STAT3", "MYCL", "CTSK"])
    assert perturbed == ("STAT3 inhibits SGK1, and SGK1 decreased CTSK expression. Inhibition of CTSK suppresses MYCL; "
                         "p-SGK1 is lower.")
    assert n_entities == 7 and n_words == 5
    assert biome.perturb_mechanism("Nothing to change here.", ["XYZ"]) == ("Nothing to change here.", 0, 0)


def test_strip_think_and_nearest_neighbours():
    assert biome.strip_think("<think>a\nb</think>\nFinal text.") == "Final text."
    assert biome.strip_think("<think>never closed") == ""
    keys = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    idx, sim = biome.nearest_neighbours(np.array([[0.9, 0.1], [0.0, 2.0]]), keys, k=2)
    assert idx.tolist() == [[0, 2], [1, 2]]
    assert sim[1, 0] == pytest.approx(1.0)
