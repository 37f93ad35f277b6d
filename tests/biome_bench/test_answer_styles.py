"""BIOME-Bench Task A answers in the styles real models give, sent through a local server and counted.

Task A asks for one relation of the controlled vocabulary (section 3.4.1; "invalid or unrecognized
predictions treated as errors"). The reference evaluation's rules
(:func:`biome_bench_lib.answer_extraction.extract_relation`) read a label in any case, through
markdown emphasis, on a line of its own or after a colon, else its last occurrence in the text; a
text naming no label is unreadable. Every style is served by the local OpenAI-format server,
answered through :func:`generate_answers` (the methods' path) and counted as the methods count it
(:func:`answer_is_readable`).
"""

from __future__ import annotations

import pytest
from biome_bench_lib.answer_extraction import answer_is_readable, extract_relation
from biome_bench_lib.llm_calls import generate_answers
from biome_bench_lib.vocabulary import TASK_RELATION

from openpert.testing.llm_server import OpenAIStubServer
from pertsci.llm import LLMClient, SamplingParams
from pertsci.llm_usage import AnswerTally, usage_record

#: Style -> (the model's text, the label it must give, or None: unreadable).
STYLES = {
    "paper": ("inhibits", "inhibits"),
    "lower_case_with_prefix": ("relation: Inhibits", "inhibits"),
    "bold": ("**Relation:** **inhibits**", "inhibits"),
    "trailing_explanation": ("inhibits\nThe kinase phosphorylates its target and lowers its activity.", "inhibits"),
    "json": ('{"relation": "inhibits"}', "inhibits"),
    "refusal": ("I'm sorry, but I can't determine that relation.", None),
    "wrong_question": ("Yes, they interact.", None),
}


@pytest.mark.parametrize("style", list(STYLES))
def test_relation_answer_style_is_read_or_counted_as_unreadable(style):
    text, want = STYLES[style]
    conversations = [[{"role": "user", "content": f"Item {i}: which relation links A to B?"}] for i in range(4)]
    with OpenAIStubServer(lambda request: text) as server:
        client = LLMClient(base_url=server.base_url, model="stub-model", cache_dir=None)
        answers = generate_answers(client, conversations, [TASK_RELATION] * 4, SamplingParams(temperature=0.0, seed=0))
    assert [extract_relation(a) for a in answers] == [want] * 4
    tally = AnswerTally()
    tally.add_questions([[answer_is_readable(a, TASK_RELATION)] for a in answers], abstained=False)
    record = usage_record(client.stats, tally)
    n_bad = 0 if want else 4
    assert (record["questions"], record["abstentions"], record["fallbacks"]) == (4, n_bad, n_bad)
    assert record["requests"] == 4 and record["completion_tokens"] > 0
