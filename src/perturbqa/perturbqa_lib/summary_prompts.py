"""SUMMER's summarisation prompts (appendix C.1): genes, their neighbourhoods, gene sets and clusters.

A single-node summary of each gene as a perturbation and as a downstream gene, a 1-hop
neighbourhood summary, the summary of a downstream gene set, and the gene-set description asked
for by the gene-set enrichment task (its answer is parsed by
:func:`perturbqa_lib.answer_parsing.parse_gene_set_description`).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["node_summary_prompt", "neighbourhood_summary_prompt", "gene_set_summary_prompt",
           "gene_set_description_prompt"]

_PREAMBLE = "You are an expert molecular biologist who studies how genes are related using Perturb-seq."
_CONSTRAINTS = """Constraints:
- Maintain a professional tone throughout.
- Do not comment on your own writing.
- Do not add any notes or references. Do not make up additional information.
- Do not discuss the importance or impact of the gene. Focus only on its function."""


def node_summary_prompt(gene: str, description: str, role: str) -> str:
    """Single-node summary prompt of a gene as a perturbation (``role="pert"``) or downstream gene."""
    if role == "pert":
        second = f"- Write one sentence describing the potential downstream impact of perturbing gene {gene} via gene knockdown."
    elif role == "gene":
        second = (f"- Write one sentence describing what types of perturbations might impact the expression of gene {gene}. "
                  "For example, you might consider pathways that are upstream of the gene or compensatory mechanisms.")
    else:
        raise ValueError(f"role must be 'pert' or 'gene', got {role!r}")
    return f"""{_PREAMBLE}

Task: You are writing a brief overview of the human gene {gene}, with a focus on its molecular and cellular functions. You will be provided a set of database entries about the gene. Ensure that your overview remains faithful to this domain knowledge.

Format:
- Write one to two sentences describing the primary molecular and cellular function of gene {gene}.
{second}

{_CONSTRAINTS}

Domain knowledge: {description}

Brief overview of gene {gene}:"""


def neighbourhood_summary_prompt(gene: str, node_summary: str, relations: str, role: str) -> str:
    """1-hop neighbourhood summary prompt (appendix C.1), from a single-node summary and relations."""
    if role == "pert":
        task = (f"Task: You are writing a brief overview of the human gene {gene}, with a focus on the downstream effects of "
                f"perturbing {gene} via gene knockdown (loss of function).")
        tail = f"Downstream effects of perturbing {gene} via gene knockdown:"
    elif role == "gene":
        task = (f"Task: You are writing a brief overview of the human gene {gene}, with a focus on molecular and cellular "
                f"perturbations that may affect the levels of gene {gene}. For example, you might consider pathways that "
                "are upstream of the gene or compensatory mechanisms.")
        tail = f"Perturbations that may affect the levels of {gene}:"
    else:
        raise ValueError(f"role must be 'pert' or 'gene', got {role!r}")
    return f"""{_PREAMBLE}

{task}

Inputs: You are provided
- Description of perturbed gene {gene}
- Database entries relating {gene} to other genes or pathways

Format: Write up to five sentences describing the molecular and cellular impact of perturbing gene {gene} via gene knockdown.

Constraints:
- Remain faithful to all domain knowledge. Do not make up additional information.
- Summarize all common aspects succinctly, but point out notable differences within these sets of genes.
- Maintain a professional tone throughout. Do not comment on your own writing. Do not add any notes or references.
- Omit the importance or impact of the gene. Focus only on its function.
- Omit all non-specific information and obvious statements, e.g. "this gene is involved in cellular processes."

Description of gene {gene}: {node_summary}

{relations or "Relations to other genes: none recorded."}

{tail}"""


def gene_set_summary_prompt(annotation: str, member_summaries: Sequence[str]) -> str:
    """Summary prompt of a downstream gene set (K562-set), given its manual annotation (C.1)."""
    listing = "\n".join(f"- {s}" for s in member_summaries)
    return f"""You are an expert molecular biologist who studies how genes and pathways are related using Perturb-seq.

Task: You are writing a brief overview of a gene set associated with {annotation} in human cells. You will be provided descriptions of the constituent genes. Ensure that your overview remains faithful to this domain knowledge.

Format:
- Write one to two sentences summarizing how the given genes are related. Be sure to characterize how they are associated with {annotation}.
- Write one to two sentences describing what types of perturbations might impact the expression of the genes in this gene set. For example, you might consider pathways that are upstream of these genes or compensatory mechanisms.

Constraints:
- Maintain a professional tone throughout.
- Do not comment on your own writing.
- Do not add any notes or references. Do not make up additional information.
- Do not discuss the importance or impact of the gene set. Focus only on its function.

Descriptions of the constituent genes:
{listing}

Brief overview of gene set ({annotation}):"""


def gene_set_description_prompt(member_summaries: Sequence[str], cluster_type: str = "gene") -> str:
    """The gene-set enrichment prompt (appendix C.1), without the manual annotation.

    ``cluster_type="pert"`` describes a cluster of perturbations (genes whose knockdowns have
    similar effects) instead of co-regulated genes.
    """
    if cluster_type == "gene":
        what = "a gene set observed to have a similar transcriptional response when upstream genes are perturbed"
    elif cluster_type == "pert":
        what = "a gene set whose knockdowns were observed to have similar transcriptional effects on downstream genes"
    else:
        raise ValueError(f"cluster_type must be 'gene' or 'pert', got {cluster_type!r}")
    listing = "\n".join(f"- {s}" for s in member_summaries)
    return f"""[Start of Prompt]
You are an expert molecular biologist who studies how genes and pathways are related using Perturb-seq.

Task: You are writing a brief overview of {what}.

Input: You will be provided descriptions of the constituent genes. Ensure that your overview remains faithful to this domain knowledge.

Output format: Fill in each of these three sections.
1) Brief overview of gene set: Write one to two sentences summarizing how the given genes are related. Focus on the most specific pathways that are common among these genes.
2) Upstream pathways may affect this gene set: Write one to two sentences describing what types of perturbations might impact the expression of the genes in this gene set. For example, you might consider pathways that are upstream of these genes or compensatory mechanisms.
3) Name of gene set: Summarize the gene set within ten words.

Constraints:
- Maintain a professional tone throughout.
- Do not comment on your own writing.
- Do not add any notes or references. Do not make up additional information.
- Do not discuss the importance or impact of the gene set. Focus only on its function.
[End of Prompt]

[Start of Input]
{listing}
[End of Input]"""
