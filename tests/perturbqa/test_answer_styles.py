"""The rule-based parsing against the answer styles real models give, sent through a local server.

PerturbQA's appendix C.2 fixes the answer format: SUMMER's answer "should end with one of these
three options" ("No. Knockdown of {p} does not impact {g}." / "Yes. Knockdown of {p} results in
differential expression of {g}." / insufficient evidence; for direction, "A) ... a decrease in
expression of {g}." / "B) ... an increase ..."), and the option prompts of LLM (No CoT) and LLM (No
retrieval) end with "A) Knockdown of the perturbed gene does not impact ..." / "B) ... results in
differential expression ..." (up-/down-regulation for direction). Appendix A.3 reads the answers
"by our rule-based parsing" and removes "all abstaining outputs" before taking the mean label; a
question left without any falls back to "the mean label of g over the training set".

So the paper's wording is read whatever its case, its markdown emphasis or an explanation after
it; a JSON object, a refusal and an answer to the other subtask's question give none of the
options and abstain. Every style is served by :class:`openpert.testing.llm_server.OpenAIStubServer`
(``styled_responder`` of the task's test responder), answered three times per question as the
paper does, parsed, and counted with :class:`pertsci.llm_usage.AnswerTally`.
"""

from __future__ import annotations

import importlib.util

import pytest
from perturbqa_lib.answer_parsing import ABSTAIN, parse_option_answer, parse_summer_answer
from perturbqa_lib.question_prompts import no_cot_prompt, no_retrieval_prompt, summer_prompt
from project_paths import ROOT

from openpert.testing.llm_server import OpenAIStubServer
from pertsci.llm import LLMClient, SamplingParams
from pertsci.llm_usage import AnswerTally, usage_record

_spec = importlib.util.spec_from_file_location("perturbqa_llm_test_responder", ROOT / "src" / "perturbqa" / "llm_test_responder.py")
stub = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stub)

#: The outcome the paper's rules give each style: the answer's label, or an abstention.
READ = {"paper": True, "lower_case": True, "bold": True, "trailing_explanation": True,
        "json": False, "refusal": False, "wrong_subtask": False}
PAIRS = [("TP53", "CDKN1A"), ("MYC", "NCL"), ("GATA1", "HBG1"), ("STAT5B", "CISH")]
CONTEXT = "K562 cells are chronic myelogenous leukemia cells."


def test_every_style_has_an_expected_outcome():
    assert set(READ) == set(stub.STYLES)


def question_prompts(method: str, subtask: str) -> list[str]:
    """One question prompt per pair, built by the task's own prompt functions."""
    prompts = []
    for pert, gene in PAIRS:
        s_p, s_g = f"Summary of {pert}.", f"Summary of {gene}."
        if method == "summer":
            examples = [("RPL11", gene, "Summary of RPL11.", s_g, 1), (pert, "ACTB", s_p, "Summary of ACTB.", 0)]
            prompts.append(summer_prompt(subtask, pert, gene, s_p, s_g, "K562", CONTEXT, examples))
        elif method == "no_cot":
            prompts.append(no_cot_prompt(subtask, s_p, s_g, CONTEXT, [("Summary of RPL11.", s_g, 0), (s_p, "Summary of ACTB.", 1)]))
        else:
            prompts.append(no_retrieval_prompt(subtask, s_p, s_g, CONTEXT, len(prompts) % 2))
    return prompts


def parse(method: str, text: str, subtask: str, pair: tuple[str, str]) -> int:
    if method == "summer":
        return parse_summer_answer(text, subtask, *pair, cell_line="K562")
    return parse_option_answer(text, subtask)


@pytest.mark.parametrize("style", list(READ))
def test_answer_style_is_read_or_counted_as_abstention(style):
    outcomes: dict[tuple[str, str], AnswerTally] = {}
    with OpenAIStubServer(stub.styled_responder(style)) as server:
        client = LLMClient(base_url=server.base_url, model="stub-model", cache_dir=None)
        for method in ("summer", "no_cot", "no_retrieval"):
            for subtask in ("de", "dir"):
                prompts = question_prompts(method, subtask)
                assert {stub.kind(p) for p in prompts} == {method} and {stub.subtask_of(p) for p in prompts} == {subtask}
                answers = client.generate(prompts, SamplingParams(n=3, temperature=0.6, top_p=0.9, seed=0))
                labels = [[parse(method, t, subtask, pair) for t in samples] for samples, pair in zip(answers, PAIRS)]
                tally = outcomes.setdefault((method, subtask), AnswerTally())
                tally.add_questions(labels, ABSTAIN)
                if READ[style]:
                    # Each sample gives the label the server committed to.
                    assert labels == [[stub.committed_label(p)] * 3 for p in prompts], (method, subtask)
                else:
                    assert all(v == ABSTAIN for sample in labels for v in sample), (method, subtask, answers[0][0][:80])
        record = usage_record(client.stats, sum_tallies(outcomes.values()))
    for (method, subtask), tally in outcomes.items():
        assert (tally.questions, tally.samples) == (len(PAIRS), 3 * len(PAIRS))
        want = 0 if READ[style] else tally.samples
        assert (tally.abstentions, tally.fallbacks) == (want, want // 3), (style, method, subtask)
    # The account a component would write: 24 questions of 3 samples, the server's token counts.
    assert record["questions"] == 24 and record["samples"] == 72 and record["requests"] == 24
    assert record["abstentions"] == (0 if READ[style] else 72)
    assert record["prompt_tokens"] > 0 and record["completion_tokens"] > 0 and record["unmetered"] == 0


def sum_tallies(tallies) -> AnswerTally:
    total = AnswerTally()
    for t in tallies:
        total.add_counts(questions=t.questions, samples=t.samples, abstentions=t.abstentions, fallbacks=t.fallbacks)
    return total


@pytest.mark.parametrize(("subtask", "text", "want"), [
    # The case: Yes/No answers to a direction question (appendix C.2 offers A) decrease / B) increase).
    ("dir", "Answer: Yes", ABSTAIN),
    ("dir", "Answer: No", ABSTAIN),
    # An option letter with the other subtask's wording answers a question that was not asked.
    ("dir", "B) Knockdown of the perturbed gene results in differential expression of the gene of interest.", ABSTAIN),
    ("de", "A) Knockdown of the perturbed gene results in down-regulation of the gene of interest.", ABSTAIN),
    # The third option of C.2 is an abstention by design.
    ("de", "C) There is insufficient evidence to determine how knockdown of the perturbed gene affects the gene of "
           "interest.", ABSTAIN),
    ("dir", "4) Answer: **B)** Knockdown of the perturbed gene results in up-regulation of the gene of interest.", 1),
    ("de", "a) knockdown of the perturbed gene does not impact the gene of interest.", 0),
])
def test_option_answers(subtask, text, want):
    assert parse_option_answer(text, subtask) == want


@pytest.mark.parametrize(("subtask", "text", "want"), [
    ("dir", "Yes. Knockdown of P1 results in differential expression of G1.", ABSTAIN),
    ("de", "B) Knockdown of P1 results in an increase in expression of G1.", ABSTAIN),
    ("de", "There is insufficient evidence to determine how knockdown of P1 affects G1.", ABSTAIN),
    ("de", "Both are possible: knockdown of P1 results in differential expression of G1, or knockdown of P1 does not "
           "impact G1.", ABSTAIN),
    ("dir", "Final answer: **Decrease**", 0),
    ("de", "no. knockdown of p1 does not impact g1.", 0),
])
def test_summer_answers(subtask, text, want):
    assert parse_summer_answer(text, subtask, "P1", "G1") == want
