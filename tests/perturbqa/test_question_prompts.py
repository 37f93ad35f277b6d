"""perturbqa_lib.question_prompts: SUMMER's prompt as published, and the two ablations' prompts (C.2)."""

from __future__ import annotations

import json
import re

import pytest
from perturbqa_lib.question_prompts import no_cot_prompt, no_retrieval_prompt, outcome_text, summer_prompt
from project_paths import SHARED_DATA


@pytest.mark.skipif(not (SHARED_DATA / "perturbqa" / "prompt_examples").is_dir(), reason="shared prompt examples absent")
def test_summer_prompt_reproduces_published_prompt():
    published = json.loads((SHARED_DATA / "perturbqa/prompt_examples/summer_de_input_AARS2_AAK1.json").read_text())[0]
    inp = published.split("[Start of Input]\n", 1)[1]
    ps = re.search(r"- Description of perturbed gene \(AARS2\): (.*?)\n\n    - Description of gene of interest", inp, re.S).group(1)
    gs = re.search(r"- Description of gene of interest \(AAK1\): (.*?)\n\n    - Context", inp, re.S).group(1)
    ctx = re.search(r"- Context: (.*?)\n\n    - Examples", inp, re.S).group(1)
    found = re.findall(r"     Example \d+: Impact of knocking down (\S+) on (\S+)\n    Description of perturbed gene \S+: (.*?)\n\n"
                       r"    Description of gene of interest \S+: (.*?)\n\n    Outcome: ([AB])\)", inp, re.S)
    examples = [(p, g, a, b, int(o == "B")) for p, g, a, b, o in found]
    assert len(examples) == 10
    assert summer_prompt("de", "AARS2", "AAK1", ps, gs, "K562", ctx, examples) == published


def test_summer_prompt_of_direction():
    prompt = summer_prompt("dir", "P", "G", "sp", "sg", "K562", "ctx", [("P2", "G2", "sp2", "sg2", 1)])
    assert "result in an increase or a decrease in expression of G?" in prompt
    assert "Outcome: B) Knockdown of P2 results in an increase in expression of G2." in prompt
    assert "    - Decrease. Knockdown of P results in a decrease in expression of G." in prompt
    assert outcome_text("de", "P", "G", 0) == "A) Knockdown of P does not impact G."
    with pytest.raises(ValueError, match="subtask must be"):
        summer_prompt("gse_gene", "P", "G", "sp", "sg", "K562", "ctx", [])


def test_ablation_prompts():
    prompt = no_cot_prompt("de", "sp", "sg", "ctx", [("sp1", "sg1", 0), ("sp2", "sg2", 1)])
    assert "Format: Follow the same format as Examples 1 and 2, and complete Example 3." in prompt
    assert "Example 1.\nInput:\n- Perturbed gene: sp1\n- Gene of interest: sg1\nAnswer: A) Knockdown" in prompt
    assert prompt.endswith("Example 3.\nInput:\n- Perturbed gene: sp\n- Gene of interest: sg\nAnswer:")
    for hypothesis, option in ((0, "down-regulation"), (1, "up-regulation")):
        prompt = no_retrieval_prompt("dir", "sp", "sg", "ctx", hypothesis)
        assert prompt.splitlines()[-1] == f"- Hypothesis: {'AB'[hypothesis]}) Knockdown of the perturbed gene results in {option} of the gene of interest."
        assert "Context: ctx" in prompt
