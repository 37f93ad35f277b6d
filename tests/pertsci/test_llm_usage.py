"""The llm_usage record a component writes: parsed answers tallied, the client's counters summed."""

from __future__ import annotations

import pytest

from pertsci.llm import STATS_KEYS
from pertsci.llm_usage import ANSWER_KEYS, USAGE_KEYS, AnswerTally, usage_record


def test_tally_counts_abstentions_and_fallbacks():
    tally = AnswerTally()
    assert tally.add_question([1, -1, 0], abstained=-1) is False
    assert tally.add_question([-1, -1, -1], abstained=-1) is True
    tally.add_questions([[None], ["up"]])
    assert (tally.questions, tally.samples, tally.abstentions, tally.fallbacks) == (4, 8, 5, 2)


def test_record_sums_clients_and_holds_every_key():
    tally = AnswerTally()
    tally.add_counts(questions=2, samples=6, abstentions=1, fallbacks=0)
    first = dict.fromkeys(STATS_KEYS, 1) | {"prompt_tokens": 100}
    second = dict.fromkeys(STATS_KEYS, 2) | {"prompt_tokens": 50}
    record = usage_record([first, second], tally)
    assert list(record) == list(USAGE_KEYS) and set(ANSWER_KEYS) < set(USAGE_KEYS)
    # The answers' samples come from the tally, not from the client (summaries are samples too there).
    assert (record["questions"], record["samples"], record["abstentions"]) == (2, 6, 1)
    assert (record["prompt_tokens"], record["requests"], record["unmetered"]) == (150, 3, 3)
    assert all(type(v) is int for v in record.values())


def test_inconsistent_tally_is_refused():
    with pytest.raises(ValueError, match="abstentions must be at most the samples"):
        usage_record(dict.fromkeys(STATS_KEYS, 0), AnswerTally(questions=1, samples=1, abstentions=2))
