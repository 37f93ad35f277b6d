"""Toy records in the original repository's JSONL formats, for the item and split tests."""

from __future__ import annotations

import pytest


def toy_kg_record(pathway: str = "mmu00001", name: str = "Toy pathway - Mus musculus (house mouse)") -> dict:
    """A knowledge-graph record: one paper, four edges (one out of the vocabulary, one repeated)."""
    edges = [
        {"source": "A", "source_state": "Present", "relation": "activates", "target": "B", "target_state": "activation", "condition": "General"},
        {"source": "B", "source_state": "activated", "relation": "promotes", "target": "C", "target_state": "Present", "condition": "General"},
        {"source": "A", "source_state": "Present", "relation": "activates", "target": "B", "target_state": "activation", "condition": "General"},
        {"source": "C", "source_state": "elevated", "relation": "leads_to", "target": "apoptosis", "target_state": "increased", "condition": "in liver"},
    ]
    return {"id": pathway, "name": name, "pubmed": [{"pmid": "123", "knowledge_graph": edges,
            "standardized_entities": {"processes_phenotypes": [{"original": "apoptosis", "type": "phenotype"}]}}]}


def toy_task_b_record(pathway: str = "mmu00001", pmid: str = "123", entities: str = "A (elevated), B, C (reduced)") -> dict:
    """A Task B record in the repository's chat format."""
    prompt = (f"**Pathway Name**: Toy pathway - Mus musculus (house mouse)\n**Pathway Description**: A toy.\n\n"
              f"In the context of this pathway, the following biological alterations were observed:\n"
              f"**Observed Entities**: {entities}.\n\nBased on the pathway context ...")
    return {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": "A activates B."}],
            "pathway_id": pathway, "pubmed_id": pmid, "species": pathway[:3]}


@pytest.fixture()
def kg_record():
    """The factory :func:`toy_kg_record`."""
    return toy_kg_record


@pytest.fixture()
def task_b_record():
    """The factory :func:`toy_task_b_record`."""
    return toy_task_b_record
