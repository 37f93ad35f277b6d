"""A deterministic stand-in language model for the tests of biome_bench's LLM components.

:func:`stub_responder` answers every kind of request the task sends, in the OpenAI chat format
served by the harness's stub server (named in ``info.test_llm.responder`` of the LLM components'
configs, and used by the task's component tests), so that the LLM methods, the judge and the
validity check run end to end (prompt -> HTTP -> parse -> score) without a model:

- Task A prompts: a relation read off the target state, in markdown with a trailing sentence
  (the label extraction must find it), or no relation at all when the target state says
  "unknown";
- Task B prompts: an explanation naming the observed entities, after a reasoning block;
- judge prompts: JSON scores that grow with the share of the reference's word bigrams the graded
  text (read between its marker lines) keeps, so a verbatim rewrite scores 5 and a text with
  swapped entities and inverted relations scores less; instructions inside the graded text are
  data to it, as the prompt asks;
- knowledge-graph prompts: the ids of the triples whose source and target both occur in the text;
- rewrite prompts: the text itself.
"""

from __future__ import annotations

import json
import re
from typing import Any

from biome_bench_lib.entity_lists import entity_name_state
from biome_bench_lib.graded_text import delimited_text
from biome_bench_lib.items import parse_mechanism_prompt
from biome_bench_lib.prompts import JUDGE_SYSTEM_PROMPT, KG_SYSTEM_PROMPT, REWRITE_PROMPT
from biome_bench_lib.vocabulary import JUDGE_DIMENSIONS

#: Target-state words -> the relation the stub answers (first match wins; otherwise leads_to).
RELATION_BY_WORD = (("phosphorylat", "phosphorylates"), ("express", "upregulates_expression"),
                    ("level", "increases_level"), ("bind", "binds"))


def _bigrams(text: str) -> set[tuple[str, str]]:
    """Pairs of consecutive lower-cased words."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return set(zip(words, words[1:]))


def _section(text: str, title: str) -> str:
    """The body of the ``## <title>`` section of a prompt (``""`` when there is none)."""
    match = re.search(rf"## {re.escape(title)}[^\n]*\n(.*?)(?=\n## |\Z)", text, re.DOTALL)
    return match.group(1).strip() if match else ""


def judge_answer(user: str) -> str:
    """Scores from the bigram recall of the reference in the graded text.

    Parameters
    ----------
    user
        The judge's user turn (section ``Reference answer``, and the graded text between marker lines).

    Returns
    -------
    str
        The judge's JSON answer: ``1 + round(4 * recall)`` for every dimension.

    Raises
    ------
    ValueError
        When the prompt has no graded text between marker lines.
    """
    reference, graded = _section(user, "Reference answer"), delimited_text(user)
    if graded is None:
        raise ValueError("a judge prompt without the graded text between marker lines")
    ref = _bigrams(reference)
    recall = len(ref & _bigrams(graded)) / len(ref) if ref else 0.0
    score = 1 + round(4 * recall)
    scores = {d: score for d in JUDGE_DIMENSIONS}
    return json.dumps({"critique": f"bigram recall {recall:.2f}", "scores": scores})


def kg_answer(user: str) -> str:
    """The ids of the reference triples whose source and target both occur in the mechanism text.

    Parameters
    ----------
    user
        The coverage check's user turn (the text between marker lines, section ``Reference relations``).

    Returns
    -------
    str
        The JSON answer in a code fence, as models often write it.

    Raises
    ------
    ValueError
        When the prompt has no mechanism text between marker lines.
    """
    text = delimited_text(user)
    if text is None:
        raise ValueError("a coverage prompt without the mechanism text between marker lines")
    ids = []
    for line in _section(user, "Reference relations").splitlines():
        number, _, triple = line.partition(". ")
        if not number.isdigit():
            continue
        edge = json.loads(triple)
        if edge["source"] and edge["target"] and edge["source"] in text and edge["target"] in text:
            ids.append(int(number))
    return "```json\n" + json.dumps({"reasoning": "entities named", "supported_relation_ids": ids}) + "\n```"


def relation_answer(prompt: str) -> str:
    """A Task A answer read off the target state; none at all when the state says "unknown".

    Parameters
    ----------
    prompt
        A Task A prompt.

    Returns
    -------
    str
        Markdown with the relation and a trailing sentence, or a sentence naming no relation.
    """
    target_state = re.search(r"\*\*Target\*\*: .*\((.*)\)\n", prompt).group(1).lower()
    if "unknown" in target_state:
        return "I cannot tell which relation holds here."
    relation = next((r for w, r in RELATION_BY_WORD if w in target_state), "leads_to")
    return f"**Answer:** {relation}\n\nThis follows from the target's state."


def mechanism_answer(prompt: str) -> str:
    """A Task B answer chaining the observed entities with "activates", after a reasoning block.

    Parameters
    ----------
    prompt
        A Task B prompt.

    Returns
    -------
    str
    """
    parts = parse_mechanism_prompt(prompt)
    names = [entity_name_state(e)[0] for e in parts["entities"]]
    return ("<think>Link the entities in order.</think>\n"
            f"In {parts['pathway_name']}, " + " activates ".join(names) + ", which drives the phenotype.")


def stub_responder(request: dict[str, Any]) -> str:
    """Answer one chat request (see the module docstring).

    Parameters
    ----------
    request
        The body of an OpenAI chat-completions request (``messages``...).

    Returns
    -------
    str
        The assistant's answer.
    """
    messages = request["messages"]
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    last = messages[-1]["content"]
    if system == JUDGE_SYSTEM_PROMPT:
        return judge_answer(last)
    if system == KG_SYSTEM_PROMPT:
        return kg_answer(last)
    if last.startswith(REWRITE_PROMPT.split("{text}")[0]):
        return last[len(REWRITE_PROMPT.split("{text}")[0]):]
    if "Respond with the exact relation name" in last:
        return relation_answer(last)
    return mechanism_answer(last)
