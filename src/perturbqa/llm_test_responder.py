"""A deterministic stand-in for the language model of the PerturbQA LLM methods (their component tests).

The component tests of SUMMER, LLM (No CoT) and LLM (No retrieval) serve :func:`respond` as an
OpenAI-format server (``info.test_llm.responder`` of their configs). It recognises the prompts of
:mod:`perturbqa_lib.summary_prompts` (summaries, gene-set descriptions) and of
:mod:`perturbqa_lib.question_prompts` (SUMMER, No CoT, No retrieval) and answers in the paper's
formats. The answers to a question depend on a hash of its prompt (:func:`plan`): some prompts
get three committed answers, some a mix, some only abstentions ("insufficient evidence") and
some only unparseable text, so that every path of the parsing and of the training-prevalence
fallback runs.

:func:`styled_responder` answers every question with a committed label in one answer style
(:data:`STYLES`): the paper's, the same in lower case, with bold markdown, with a trailing
explanation, as JSON, a refusal, or an answer to the other subtask's question. The parsing tests
and the benchmark's end-to-end test use it to show which styles the paper's rule-based parsing
reads and that the others are counted as abstentions.
"""

from __future__ import annotations

import re
import zlib

#: Per pattern, the three samples: 1/0 a committed answer, "abstain", "garbage" (unparseable).
PLANS = (
    (1, 1, 1),
    (0, 0, 1),
    (1, "abstain", "garbage"),
    ("abstain", "abstain", "abstain"),
    ("garbage", "garbage", "garbage"),
    (0, 0, 0),
)


def plan(prompt: str) -> tuple:
    """The three planned samples for a question prompt (deterministic in the prompt)."""
    return PLANS[zlib.crc32(prompt.encode("utf-8")) % len(PLANS)]


def kind(prompt: str) -> str:
    """Which prompt this is: summer, no_cot, no_retrieval, gene_set, or summary."""
    if "3) Name of gene set" in prompt:
        return "gene_set"
    if prompt.startswith("[Start of Prompt]") and "Your goal is to determine" in prompt:
        return "summer"
    if "Format: Follow the same format as Examples" in prompt:
        return "no_cot"
    if "- Hypothesis: " in prompt:
        return "no_retrieval"
    return "summary"


def subtask_of(prompt: str) -> str:
    """de or dir, from the answer options the prompt offers."""
    return "dir" if ("increase in expression" in prompt or "up-regulation" in prompt) else "de"


def summer_answer(label, subtask: str, pert: str, gene: str) -> str:
    """A SUMMER-style answer (reasoning, then one of the three final options)."""
    head = f"1) The most similar perturbed gene is {pert}.\n2) ...\n3) ...\n4) ...\n5) Considering the examples:\n"
    if label == "abstain":
        return head + f"There is insufficient evidence to determine how knockdown of {pert} affects {gene}."
    if label == "garbage":
        return "I am not able to follow these instructions."
    if subtask == "de":
        return head + (f"Yes. Knockdown of {pert} results in differential expression of {gene}." if label else
                       f"No. Knockdown of {pert} does not impact {gene}.")
    return head + (f"Increase. Knockdown of {pert} results in an increase in expression of {gene}." if label else
                   f"Decrease. Knockdown of {pert} results in a decrease in expression of {gene}.")


def option_answer(label, subtask: str, with_sections: bool) -> str:
    """An answer to the option prompts (No CoT; No retrieval with its four sections)."""
    if label == "garbage":
        return "Example 3 is interesting."
    if label == "abstain":
        text = "C) There is insufficient evidence to determine how knockdown of the perturbed gene affects the gene of interest."
    elif subtask == "de":
        text = ("B) Knockdown of the perturbed gene results in differential expression of the gene of interest." if label else
                "A) Knockdown of the perturbed gene does not impact the gene of interest.")
    else:
        text = ("B) Knockdown of the perturbed gene results in up-regulation of the gene of interest." if label else
                "A) Knockdown of the perturbed gene results in down-regulation of the gene of interest.")
    if with_sections:
        return f"1) Supporting evidence: none.\n2) Refuting evidence: none.\n3) Explanation: step by step.\n4) Answer: {text}"
    return text


def respond(request: dict) -> list[str]:
    """Answer a chat request: ``n`` texts for the last message's prompt."""
    prompt = request["messages"][-1]["content"]
    n = int(request.get("n", 1))
    what = kind(prompt)
    if what == "summary":
        gene = re.search(r"(?:of the human gene|of a gene set associated with) (.+?)(?:,| in human)", prompt)
        return [f"Summary of {gene.group(1) if gene else 'the entity'}: a gene with a cellular function."] * n
    if what == "gene_set":
        return ["1) Brief overview of gene set: The genes share a pathway.\n\n2) Upstream pathways may affect this gene set: "
                "stress.\n\n3) Name of gene set: Shared pathway genes\n[End of Output]"] * n
    subtask = subtask_of(prompt)
    labels = plan(prompt)
    if what == "summer":
        pert, gene = re.search(r"Your goal is to determine: Does a CRISPRi knockdown of (\S+) in \S+ cells result in "
                               r"(?:differential expression of|an increase or a decrease in expression of) (.+?)\?", prompt).groups()
        texts = [summer_answer(v, subtask, pert, gene) for v in labels]
    else:
        texts = [option_answer(v, subtask, what == "no_retrieval") for v in labels]
    return [texts[i % len(texts)] for i in range(n)]


#: Answer styles of :func:`styled_answer`.
STYLES = ("paper", "lower_case", "bold", "trailing_explanation", "json", "refusal", "wrong_subtask")
#: A refusal, as chat models give one.
REFUSAL = "I'm sorry, but I can't help with predicting the outcome of this experiment."
_EXPLANATION = ("\n\nThis follows from the retrieved examples: the perturbed gene shares a pathway with the "
                "genes whose outcomes were observed.")


def committed_label(prompt: str) -> int:
    """A label for a question prompt, 0 or 1, deterministic in the prompt."""
    return zlib.crc32(prompt.encode("utf-8")) % 2


def styled_answer(style: str, label: int, subtask: str, what: str, pert: str = "", gene: str = "") -> str:
    """An answer committing to ``label`` in one of :data:`STYLES`.

    Parameters
    ----------
    style
        One of :data:`STYLES`.
    label
        0 (no effect, or decrease) or 1 (differential expression, or increase).
    subtask
        ``de`` or ``dir``: the question asked.
    what
        The prompt kind (:func:`kind`): ``summer``, ``no_cot`` or ``no_retrieval``.
    pert, gene
        The pair of a SUMMER question (its options name them).
    """
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    options = what in ("no_cot", "no_retrieval")

    def paper(for_subtask: str) -> str:
        if options:
            return option_answer(label, for_subtask, what == "no_retrieval")
        return summer_answer(label, for_subtask, pert, gene)

    word = {("de", 0): "No", ("de", 1): "Yes", ("dir", 0): "Decrease", ("dir", 1): "Increase"}[(subtask, label)]
    letter = "AB"[label]
    if style == "paper":
        return paper(subtask)
    if style == "lower_case":
        return paper(subtask).lower()
    if style == "trailing_explanation":
        return paper(subtask) + _EXPLANATION
    if style == "bold":
        if options:
            return paper(subtask).replace(f"{letter}) Knockdown", f"**{letter})** Knockdown", 1)
        return f"Considering the examples, the final answer: **{word}**"
    if style == "json":
        return '{"answer": "%s", "confidence": 0.8}' % (letter if options else word.lower())
    if style == "refusal":
        return REFUSAL
    # wrong_subtask: the same label, as the answer to the other subtask's question.
    return paper("dir" if subtask == "de" else "de")


def styled_responder(style: str):
    """A responder that answers summaries as :func:`respond` and every question in ``style``."""

    def answer(request: dict) -> list[str]:
        prompt = request["messages"][-1]["content"]
        what = kind(prompt)
        if what in ("summary", "gene_set"):
            return respond(request)
        pert = gene = ""
        if what == "summer":
            pert, gene = re.search(r"Your goal is to determine: Does a CRISPRi knockdown of (\S+) in \S+ cells result in "
                                   r"(?:differential expression of|an increase or a decrease in expression of) (.+?)\?",
                                   prompt).groups()
        text = styled_answer(style, committed_label(prompt), subtask_of(prompt), what, pert, gene)
        return [text] * int(request.get("n", 1))

    return answer
