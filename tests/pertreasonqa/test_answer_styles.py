"""PertReasonQA's strict parsing against the answer styles real models give, sent through a local server.

The task's format is the paper's tag-structured response (section 3 and appendix C.1: a
``<thinking>`` block, "a final ``<answer>`` block explicitly stating the predicted expression
change", a ``<triplets>`` block of the causal edges); the answer is up, down or unchanged. The
parser is strict (:mod:`pertreasonqa_lib.answer_parsing`): the blocks in order with nothing
outside, the answer a label in any case. Anything else is ``invalid``, scored as wrong. Every
style is served by the local OpenAI-format server, answered through the library's
:func:`answer_with_llm` (the components' path) and counted as the components count it.
"""

from __future__ import annotations

import pytest
from pertreasonqa_lib.answer_parsing import format_response
from pertreasonqa_lib.prompts import SYSTEM_PROMPT, answer_with_llm

from openpert.testing.llm_server import OpenAIStubServer
from pertsci.llm import LLMClient, SamplingParams
from pertsci.llm_usage import AnswerTally, usage_record

PAPER = format_response("Knockdown of P lowers A, which activates G.", "down", [("P", 1, "A"), ("A", 1, "G")])
#: Style -> (the model's text, the answer it must parse to: a label, or "invalid").
STYLES = {
    "paper": (PAPER, "down"),
    "upper_case_label": (PAPER.replace("<answer>down</answer>", "<answer>DOWN</answer>"), "down"),
    "bold": (PAPER.replace("<answer>down</answer>", "<answer>**down**</answer>"), "invalid"),
    "trailing_explanation": (PAPER + "\nIn short, G goes down because A loses its activator.", "invalid"),
    "json": ('{"answer": "down", "triplets": [["P", 1, "A"], ["A", 1, "G"]]}', "invalid"),
    "refusal": ("I'm sorry, but I can't help with predicting the outcome of this experiment.", "invalid"),
    "wrong_question": (PAPER.replace("<answer>down</answer>", "<answer>yes</answer>"), "invalid"),
}


@pytest.mark.parametrize("style", list(STYLES))
def test_answer_style_is_read_or_counted_as_invalid(style):
    text, want = STYLES[style]
    prompts = [f"Question {i}: does G change when P is knocked down?" for i in range(5)]
    with OpenAIStubServer(lambda request: text) as server:
        client = LLMClient(base_url=server.base_url, model="stub-model", cache_dir=None)
        table = answer_with_llm(client, prompts, SamplingParams(temperature=0.7, top_p=0.8, seed=0))
        assert all(r["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT} for r in server.requests)
    assert table["answer"].tolist() == [want] * len(prompts)
    assert ((table["parse_error"] != "") == (want == "invalid")).all()
    # Counted as the components count it: one sample per question, an invalid answer abstains and falls back.
    tally = AnswerTally()
    tally.add_questions([[error != ""] for error in table["parse_error"]], abstained=True)
    record = usage_record(client.stats, tally)
    n_bad = len(prompts) if want == "invalid" else 0
    assert (record["questions"], record["samples"], record["abstentions"], record["fallbacks"]) == (5, 5, n_bad, n_bad)
    assert record["requests"] == 5 and record["prompt_tokens"] > 0
