"""Tests of biome_bench_lib.llm_calls, with a scripted client in place of a model."""

from __future__ import annotations

import json

import numpy as np
import pytest
from biome_bench_lib.llm_calls import generate_answers, judge_explanations, kg_coverage
from biome_bench_lib.prompts import JUDGE_SYSTEM_PROMPT, KG_SYSTEM_PROMPT
from biome_bench_lib.vocabulary import JUDGE_DIMENSIONS, TASK_MECHANISM, TASK_RELATION

from pertsci.llm import SamplingParams

SAMPLING = SamplingParams(temperature=0.0, max_tokens=64, seed=0)


class ScriptedClient:
    """Answers each chat with ``answer(messages)``; records every batch it was sent."""

    def __init__(self, answer):
        self.answer, self.batches = answer, []

    def generate(self, conversations, sampling):
        self.batches.append(conversations)
        return [[self.answer(c)] for c in conversations]


def test_answers_keep_task_a_whole_and_strip_reasoning_from_task_b():
    client = ScriptedClient(lambda c: "<think>hmm</think>\n" + c[-1]["content"])
    answers = generate_answers(client, [[{"role": "user", "content": "A"}], [{"role": "user", "content": "B"}]],
                               [TASK_RELATION, TASK_MECHANISM], SAMPLING)
    assert answers == ["<think>hmm</think>\nA", "B"]
    assert len(client.batches) == 1  # one batched call
    assert generate_answers(ScriptedClient(None), [], [], SAMPLING) == []
    with pytest.raises(ValueError, match="sampling.n must be 1"):
        generate_answers(client, [[{"role": "user", "content": "A"}]], [TASK_RELATION], SamplingParams(n=2))


def test_judge_scores_unreadable_answers_as_nan():
    def judge(messages):
        assert messages[0]["content"] == JUDGE_SYSTEM_PROMPT
        assert "<think>" not in messages[1]["content"]  # the judge never sees reasoning blocks
        if "bad" in messages[1]["content"]:
            return "no scores"
        return json.dumps({"scores": dict.fromkeys(JUDGE_DIMENSIONS, 4)})

    scores, n_bad = judge_explanations(ScriptedClient(judge), ["Q1", "Q2"], ["", "p"], ["R1", "R2"],
                                       ["<think>x</think>good", "bad"], SAMPLING)
    assert n_bad == 1
    assert scores.columns.tolist() == list(JUDGE_DIMENSIONS)
    assert scores.iloc[0].tolist() == [4.0] * 4 and scores.iloc[1].isna().all()


def test_coverage_asks_only_about_non_empty_explanations_with_a_graph():
    triples = [{"source": "A", "target": "B"}, {"source": "B", "target": "C"}]

    def extractor(messages):
        assert messages[0]["content"] == KG_SYSTEM_PROMPT
        return '{"supported_relation_ids": [1]}' if "A to C" in messages[1]["content"] else "none"

    client = ScriptedClient(extractor)
    coverage, n_bad = kg_coverage(client, ["A to C", "<think>x</think>", "no graph", "unreadable"],
                                  [triples, triples, [], triples], SAMPLING)
    assert coverage[0] == 0.5 and coverage[1] == 0.0
    assert np.isnan(coverage[2]) and np.isnan(coverage[3])
    assert n_bad == 1
    assert len(client.batches[0]) == 2  # neither the empty explanation nor the item without a graph is asked
