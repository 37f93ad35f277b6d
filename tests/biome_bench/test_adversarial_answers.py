"""Tests of biome_bench_lib.adversarial_answers: answers built from the question alone."""

from __future__ import annotations

import pandas as pd
import pytest
from biome_bench_lib.adversarial_answers import adversarial_answers
from biome_bench_lib.answer_extraction import extract_relation
from biome_bench_lib.items import relation_prompt


def _items() -> pd.DataFrame:
    mech_prompt = ("**Pathway Name**: Apoptosis - Mus musculus (house mouse)\n**Pathway Description**: Cell death.\n\n"
                   "**Observed Entities**: Casp3 (elevated), Bcl2 (reduced), cytochrome c.\n")
    rel = {"task": "relation", "pathway_name": "Apoptosis - Mus musculus (house mouse)", "source": "Casp3", "source_state": "active",
           "target": "Parp1", "target_state": "cleaved", "condition": "General", "observed_entities": "",
           "prompt": relation_prompt("Apoptosis - Mus musculus (house mouse)", "Casp3", "active", "Parp1", "cleaved", "General")}
    mech = {"task": "mechanism", "pathway_name": "Apoptosis - Mus musculus (house mouse)", "source": "", "source_state": "",
            "target": "", "target_state": "", "condition": "", "observed_entities": "Casp3 (elevated), Bcl2 (reduced), cytochrome c",
            "prompt": mech_prompt}
    return pd.DataFrame([rel, mech], index=["r", "m"])


def test_each_answer_comes_from_the_question_only():
    items = _items()
    entity_list, prompt_copy, template = (adversarial_answers(items, k) for k in ("entity_list", "prompt_copy", "entity_template"))
    assert entity_list == ["Casp3 (active), Parp1 (cleaved)", "Casp3 (elevated), Bcl2 (reduced), cytochrome c"]
    assert prompt_copy == items["prompt"].tolist()
    assert template[1] == ("In the Apoptosis pathway, the observed alterations involve Casp3 (elevated), Bcl2 (reduced), cytochrome c. "
                           "Mechanistically, Casp3 regulates Bcl2; Bcl2 regulates cytochrome c. The altered state of cytochrome c "
                           "leads to the dysregulation of Apoptosis and its downstream phenotypes.")
    # Task A: neither the entity list nor the template names a relation, so they count as wrong.
    assert extract_relation(entity_list[0]) is None and extract_relation(template[0]) is None


def test_unknown_kind_is_an_error():
    with pytest.raises(ValueError, match="unknown adversarial answer 'judge'"):
        adversarial_answers(_items(), "judge")
