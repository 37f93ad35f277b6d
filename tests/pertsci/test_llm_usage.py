"""The llm_usage record a component writes: parsed answers tallied, the client's counters summed."""

from __future__ import annotations

import pytest

from pertsci.llm import STATS_KEYS, PromptTooLong
from pertsci.llm_usage import ANSWER_KEYS, USAGE_KEYS, AnswerTally, failure_notes, usage_record


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
    assert (record["prompt_tokens"], record["requests"], record["unmetered"], record["failed"]) == (150, 3, 3, 3)
    # The context window is a size: the largest one stated, not a sum.
    assert usage_record([first | {"context_window": 4096}, second | {"context_window": 2048}], tally)[
        "context_window"] == 4096
    assert all(type(v) is int for v in record.values())


def test_inconsistent_tally_is_refused():
    with pytest.raises(ValueError, match="abstentions must be at most the samples"):
        usage_record(dict.fromkeys(STATS_KEYS, 0), AnswerTally(questions=1, samples=1, abstentions=2))


def test_failure_notes_are_printed_and_kept_as_strings(capsys):
    notes = failure_notes([PromptTooLong("g1", 9034, 8192, 256), PromptTooLong(None, None, None, server_message="no")])
    assert list(notes) == [
        "item g1: prompt of 9034 tokens is longer than the model's context window of 8192 tokens; answered as an abstention",
        "a prompt without an item label: prompt is longer than the model's context window (the server said: no); "
        "answered as an abstention"]
    assert capsys.readouterr().out.splitlines() == list(notes)
    assert failure_notes([]).shape == (0,)
