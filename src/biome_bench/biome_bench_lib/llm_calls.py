"""Calling a model over many items: the methods' answers, the judge's scores, knowledge-graph coverage.

Each function sends all its chats in one ``client.generate`` call (the client batches, caches and
runs them concurrently) and reads the answers with :mod:`biome_bench_lib.answer_extraction`. The
client is a :class:`pertsci.llm.LLMClient`; the sampling a :class:`pertsci.llm.SamplingParams`.
Each takes the item ids of its chats (``items``): a chat longer than the model's context window
is answered with an empty text (unreadable, so an abstention) and recorded under its item.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from biome_bench_lib.answer_extraction import answer_is_readable, parse_judge_answer, parse_kg_answer, strip_think
from biome_bench_lib.prompts import judge_messages, kg_messages
from biome_bench_lib.vocabulary import JUDGE_DIMENSIONS, TASK_RELATION
from pertsci.llm_usage import AnswerTally, usage_record

__all__ = ["answers_usage", "generate_answers", "judge_explanations", "kg_coverage"]


def generate_answers(client: Any, conversations: Sequence[Sequence[Mapping[str, str]]], tasks: Sequence[str],
                     sampling: Any, items: Sequence[str] | None = None) -> list[str]:
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
        The item's task (``TASK_RELATION`` or ``TASK_MECHANISM`` of :mod:`biome_bench_lib.vocabulary`)
        per conversation.
    sampling
        :class:`pertsci.llm.SamplingParams` (``n`` must be 1).
    items
        The item id of each conversation.

    Returns
    -------
    list of str
        One answer per conversation, in order.

    Raises
    ------
    ValueError
        When ``sampling`` asks for more than one answer per item.
    """
    if getattr(sampling, "n", 1) != 1:
        raise ValueError("one answer per item: sampling.n must be 1")
    texts = [out[0] for out in client.generate([list(c) for c in conversations], sampling, labels=items)] \
        if conversations else []
    return [t if task == TASK_RELATION else strip_think(t) for t, task in zip(texts, tasks)]


def answers_usage(client: Any, answers: Sequence[str], tasks: Sequence[str]) -> dict[str, int]:
    """The ``uns["llm_usage"]`` record of :func:`generate_answers`' answers.

    One sample per item; an answer the metrics cannot read (:func:`answer_is_readable`) is an
    abstention, scored as wrong by the metrics (the fallback).
    """
    tally = AnswerTally()
    tally.add_questions([[answer_is_readable(a, t)] for a, t in zip(answers, tasks)], abstained=False)
    return usage_record(client.stats, tally)


def judge_explanations(client: Any, queries: Sequence[str], phenotypes: Sequence[str], references: Sequence[str],
                       explanations: Sequence[str], sampling: Any,
                       items: Sequence[str] | None = None) -> tuple[pd.DataFrame, int]:
    """The four judge scores of each explanation (section 3.4.2).

    Parameters
    ----------
    client
        An :class:`pertsci.llm.LLMClient` serving the judge model.
    queries
        The Task B prompt each explanation answers.
    phenotypes
        The paper's target processes and phenotypes per item, one per line.
    references
        The reference mechanism per item.
    explanations
        The texts to grade; reasoning blocks are removed before the judge sees them.
    sampling
        :class:`pertsci.llm.SamplingParams` of the judge.
    items
        The item id of each explanation.

    Returns
    -------
    scores
        One row per explanation, one column per dimension of
        :data:`~biome_bench_lib.vocabulary.JUDGE_DIMENSIONS`; NaN where the judge's
        answer could not be read.
    n_unreadable
        How many judge answers had no readable score.
    """
    conversations = [judge_messages(q, p, r, strip_think(e)) for q, p, r, e in zip(queries, phenotypes, references, explanations)]
    texts = [out[0] for out in client.generate(conversations, sampling, labels=items)] if conversations else []
    parsed = [parse_judge_answer(t) for t in texts]
    nan = dict.fromkeys(JUDGE_DIMENSIONS, float("nan"))
    frame = pd.DataFrame([p if p is not None else nan for p in parsed], columns=list(JUDGE_DIMENSIONS), dtype=float)
    return frame, sum(p is None for p in parsed)


def kg_coverage(client: Any, explanations: Sequence[str], triples: Sequence[Sequence[Mapping[str, str]]],
                sampling: Any, items: Sequence[str] | None = None) -> tuple[np.ndarray, int]:
    """Knowledge-graph coverage of each explanation: supported reference triples / all (section 3.4.2).

    The extraction model may only select among the numbered reference triples (closed set). An
    item without reference triples has no coverage (NaN); an empty explanation supports no triple
    (coverage 0, the model is not asked).

    Parameters
    ----------
    client
        An :class:`pertsci.llm.LLMClient` serving the extraction model.
    explanations
        The texts to check; reasoning blocks are removed first.
    triples
        The paper's knowledge-graph edges per item (empty: no reference graph).
    sampling
        :class:`pertsci.llm.SamplingParams` of the extraction model.
    items
        The item id of each explanation.

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
    labels = None if items is None else [f"{items[i]} (coverage)" for i in ask]
    answers = [out[0] for out in client.generate([kg_messages(texts[i], triples[i]) for i in ask], sampling,
                                                 labels=labels)] if ask else []
    n_unreadable = 0
    for i, answer in zip(ask, answers):
        ids = parse_kg_answer(answer, len(triples[i]))
        if ids is None:
            n_unreadable += 1
        else:
            coverage[i] = len(ids) / len(triples[i])
    return coverage, n_unreadable
