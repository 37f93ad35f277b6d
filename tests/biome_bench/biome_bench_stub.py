"""A deterministic stand-in language model for the biome_bench tests.

:func:`stub_responder` answers every kind of request the task sends, in the OpenAI chat format
served by :class:`openpert.testing.llm_server.OpenAIStubServer`, so that the LLM methods, the judge and
the validity check run end to end (prompt -> HTTP -> parse -> score) without a model:

- Task A prompts: a relation read off the target state, in markdown with a trailing sentence
  (the label extraction must find it), or no relation at all when the target state says
  "unknown";
- Task B prompts: an explanation naming the observed entities, after a reasoning block;
- judge prompts: JSON scores that grow with the share of the reference's word bigrams the graded
  text keeps, so a verbatim rewrite scores 5 and a text with swapped entities and inverted
  relations scores less;
- knowledge-graph prompts: the ids of the triples whose source and target both occur in the text;
- rewrite prompts: the text itself.
"""

from __future__ import annotations

import json
import re
from typing import Any

from biome_bench_lib import biome

RELATION_BY_WORD = (("phosphorylat", "phosphorylates"), ("express", "upregulates_expression"),
                    ("level", "increases_level"), ("bind", "binds"))


def _bigrams(text: str) -> set[tuple[str, str]]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return set(zip(words, words[1:]))


def _section(text: str, title: str) -> str:
    match = re.search(rf"## {re.escape(title)}[^\n]*\n(.*?)(?=\n## |\Z)", text, re.DOTALL)
    return match.group(1).strip() if match else ""


def judge_answer(user: str) -> str:
    """Scores from the bigram recall of the reference in the graded text."""
    reference, graded = _section(user, "Reference answer"), _section(user, "Model output to grade")
    ref = _bigrams(reference)
    recall = len(ref & _bigrams(graded)) / len(ref) if ref else 0.0
    score = 1 + round(4 * recall)
    scores = {d: score for d in biome.JUDGE_DIMENSIONS}
    return json.dumps({"critique": f"bigram recall {recall:.2f}", "scores": scores})


def kg_answer(user: str) -> str:
    text = _section(user, "Mechanism text")
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
    target_state = re.search(r"\*\*Target\*\*: .*\((.*)\)\n", prompt).group(1).lower()
    if "unknown" in target_state:
        return "I cannot tell which relation holds here."
    relation = next((r for w, r in RELATION_BY_WORD if w in target_state), "leads_to")
    return f"**Answer:** {relation}\n\nThis follows from the target's state."


def mechanism_answer(prompt: str) -> str:
    parts = biome.parse_mechanism_prompt(prompt)
    names = [biome.entity_name_state(e)[0] for e in parts["entities"]]
    return ("<think>Link the entities in order.</think>\n"
            f"In {parts['pathway_name']}, " + " activates ".join(names) + ", which drives the phenotype.")


def stub_responder(request: dict[str, Any]) -> str:
    """Answer one chat request (see the module docstring)."""
    messages = request["messages"]
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    last = messages[-1]["content"]
    if system == biome.JUDGE_SYSTEM_PROMPT:
        return judge_answer(last)
    if system == biome.KG_SYSTEM_PROMPT:
        return kg_answer(last)
    if last.startswith(biome.REWRITE_PROMPT.split("{text}")[0]):
        return last[len(biome.REWRITE_PROMPT.split("{text}")[0]):]
    if "Respond with the exact relation name" in last:
        return relation_answer(last)
    return mechanism_answer(last)
