"""The language-model questions (section 3, appendix B.2.5) and the answer loop.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pertreasonqa_lib.answer_parsing import format_response
from pertreasonqa_lib.path_serialisation import parse_serialized_paths, path_triplets
from pertreasonqa_lib.prompts import SYSTEM_PROMPT, answer_with_llm, perturbation_phrase, question_prompt
from pertreasonqa_lib.reference_paths import extract_paths
from pertreasonqa_lib.signed_graph import compound_targets
from toy_graphs import drug_graph


def test_prompt_names_the_compound_and_its_targets():
    g = drug_graph()
    paths = [path_triplets(g, p) for p in extract_paths(g, np.full(g.n_nodes, np.nan), 0.0,
                                                              pd.DataFrame({"perturbation": ["D"], "gene": ["E"]})).paths[0]]
    prompt = question_prompt("B cells", "D", "chemical", "E", {"E": "low", "B": "high"}, paths,
                                targets=compound_targets(g, "D"))
    assert "Perturbation: treatment with the compound D (known targets: inhibits T1, activates T2)." in prompt
    assert "1. D [compound] --(+1)--> T2 [unknown] --(+1)--> B [high] --(+1)--> C [unknown] --(+1)--> E [low]" in prompt
    assert "Question: after treatment with the compound D in B cells, does E go up" in prompt
    parsed = parse_serialized_paths(prompt)
    assert parsed[0][0] == [("D", 1, "T2"), ("T2", 1, "B"), ("B", 1, "C"), ("C", 1, "E")]


def test_prompt_of_a_gene_without_paths():
    prompt = question_prompt("K562", "P", "CRISPRi", "G", {"P": "high"}, [])
    assert prompt.startswith("Cell line: K562, a chronic myelogenous leukemia cell line")
    assert "Perturbation: CRISPRi knockdown of P (basal expression: high)." in prompt
    assert "Effect gene: G (basal expression: unknown)." in prompt
    assert "No regulatory path of at most four edges links the perturbation" in prompt
    assert "Question: after CRISPRi knockdown of P in K562 cells, does G go up" in prompt
    # the no-path setting (paths None) says nothing about paths; extra context comes before the question
    bare = question_prompt("NK cells", "P", "CRISPRi", "G", {}, None, extra="Example 1: ...")
    assert "path" not in bare.split("Question:")[0].lower()
    assert "\n\nExample 1: ...\n\nQuestion: after CRISPRi knockdown of P in NK cells, does G" in bare
    assert perturbation_phrase("X (Y)", "chemical") == "treatment with the compound X (Y)"


class ScriptedClient:
    """Replies in order; records the conversations it was sent."""

    def __init__(self, replies):
        self.replies, self.sent = replies, None

    def generate(self, conversations, sampling, labels=None):
        self.sent = conversations
        return [[r] for r in self.replies]


def test_answer_with_llm_parses_strictly():
    good = format_response("P activates G.", "down", [("P", 1, "G")])
    client = ScriptedClient([good, "G goes up."])
    table = answer_with_llm(client, ["question 1", "question 2"], sampling=None)
    assert client.sent[0] == [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "question 1"}]
    assert table["answer"].tolist() == ["down", "invalid"]
    assert table["triplets"].tolist() == [[("P", 1, "G")], []]
    assert table.loc[0, "parse_error"] == "" and "exactly one <thinking>" in table.loc[1, "parse_error"]
    assert table["response"].tolist() == [good, "G goes up."]
