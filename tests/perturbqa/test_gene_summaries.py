"""perturbqa_lib.gene_summaries: SUMMER's two-step gene summaries, set summaries, cluster descriptions."""

from __future__ import annotations

import pandas as pd
import pytest
from perturbqa_lib.gene_summaries import describe_clusters, summarise_entities

from pertsci.llm import SamplingParams


class EchoClient:
    """Answers each prompt with a tag of its kind and subject, and records every batch it was sent."""

    def __init__(self, description_answer: str | None = None):
        self.batches: list[list[str]] = []
        self.description_answer = description_answer

    def generate(self, prompts, sampling, labels=None):
        self.batches.append(list(prompts))
        out = []
        for prompt in prompts:
            if "3) Name of gene set" in prompt:
                text = self.description_answer
            elif prompt.startswith("You are an expert molecular biologist who studies how genes and pathways"):
                text = "set summary"
            else:
                step = "hood" if "Database entries relating" in prompt else "node"
                gene = prompt.split("overview of the human gene ", 1)[1].split(",")[0]
                text = f" {step} {gene} "
            out.append([text] * sampling.n)
        return out


def edges_frame(rows):
    df = pd.DataFrame(rows, columns=["source", "target", "relation"])
    df["sign"], df["directed"], df["database"] = 0, False, "toy"
    return df


DESCRIPTIONS = pd.DataFrame({"gene": ["A", "B"], "description": ["Protein A; binds B.", "Protein B; binds A."]})
EDGES = edges_frame([("A", "B", "physical"), ("A", "CPLX", "complex"), ("C", "CPLX", "complex")])


def test_genes_summarised_from_description_then_relations():
    client = EchoClient()
    out = summarise_entities(client, ["B", "A", "B"], "pert", DESCRIPTIONS, EDGES, SamplingParams(n=1))
    assert out == {"B": "hood B", "A": "hood A"}  # stripped, once per entity, in the order asked
    first, second = client.batches
    assert len(first) == 2 and "Domain knowledge: Description of gene: B\n\nGene products: Protein B" in first[0]
    # The second step reads the first step's summary and the gene's relations.
    assert "Description of gene A: node A" in second[1] and "may form a complex with C (CPLX, toy)" in second[1]
    with pytest.raises(ValueError, match="role must be"):
        summarise_entities(client, ["A"], "both", DESCRIPTIONS, EDGES, SamplingParams())


def test_gene_sets_summarised_from_their_members():
    client = EchoClient()
    sets = {"7-Heme genes": ["A", "C"]}
    out = summarise_entities(client, ["7-Heme genes", "B"], "gene", DESCRIPTIONS, EDGES, SamplingParams(n=1), sets)
    assert out == {"7-Heme genes": "set summary", "B": "hood B"}
    node, hood, set_batch = client.batches
    assert len(node) == 3  # B, then the members A and C
    assert "associated with Heme genes" in set_batch[0] and "- A: hood A\n- C: hood C" in set_batch[0]
    with pytest.raises(ValueError, match="cannot summarise"):
        summarise_entities(client, ["7-Heme genes"], "pert", DESCRIPTIONS, EDGES, SamplingParams(), sets)


def test_describe_clusters_parses_name_and_overview():
    answer = ("1) Brief overview of gene set: The genes bind.\n\n2) Upstream pathways may affect this gene set: none.\n\n"
              "3) Name of gene set: Binding genes\n[End of Output]")
    client = EchoClient(answer)
    texts = describe_clusters(client, [["A", "B"]], "gene", {"A": "sa", "B": "sb"}, SamplingParams())
    assert texts == ["Binding genes. The genes bind."]
    assert "- A: sa\n- B: sb" in client.batches[0][0]
    # An answer without the sections keeps its text up to the end marker.
    raw = describe_clusters(EchoClient("Just prose. [End of Output] trailing"), [["A"]], "pert", {"A": "sa"},
                            SamplingParams())
    assert raw == ["Just prose."]
