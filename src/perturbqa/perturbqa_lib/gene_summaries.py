"""Summaries of genes, gene sets and clusters written by a language model (SUMMER, section 4.2, C.1).

:func:`summarise_entities` is SUMMER's "neighbourhood aggregation as summarization" of genes and
downstream gene sets; :func:`describe_clusters` its hierarchical summarisation of a cluster into
the text the gene-set enrichment task evaluates.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from perturbqa_lib.answer_parsing import parse_gene_set_description
from perturbqa_lib.knowledge_text import describe_gene, local_edges, relations_text, set_annotation
from perturbqa_lib.summary_prompts import (
    gene_set_description_prompt,
    gene_set_summary_prompt,
    neighbourhood_summary_prompt,
    node_summary_prompt,
)

__all__ = ["summarise_entities", "describe_clusters"]


def summarise_entities(client, entities: Sequence[str], role: str, descriptions: pd.DataFrame, edges: pd.DataFrame,
                       sampling, sets: dict[str, Sequence[str]] | None = None) -> dict[str, str]:
    """Neighbourhood summaries of genes (and downstream gene sets) written by a language model.

    SUMMER's "neighbourhood aggregation as summarization" (section 4.2): each gene is first
    summarised from its database description (:func:`node_summary_prompt`), then the summary and
    its knowledge-graph relations (:func:`relations_text`) are summarised again
    (:func:`neighbourhood_summary_prompt`), once as a perturbation (``role="pert"``) and once as a
    downstream gene (``role="gene"``). A downstream gene set (K562-set) is summarised from its
    members' gene summaries with :func:`gene_set_summary_prompt` (hierarchical summarisation).

    Parameters
    ----------
    client : pertsci.llm.LLMClient
        Generations go through it, so its cache makes a rerun free.
    entities : sequence of str
        Gene symbols, or names of ``sets``.
    role : {"pert", "gene"}
    descriptions : pandas.DataFrame
        ``gene, description`` (STRING).
    edges : pandas.DataFrame
        Knowledge graph (:data:`pertsci.knowledge_graphs.EDGE_COLUMNS`).
    sampling : pertsci.llm.SamplingParams
        Sampling of the summaries; the first of its ``n`` texts is used.
    sets : mapping, optional
        Downstream gene sets (name -> members).

    Returns
    -------
    dict
        Entity -> summary text (stripped); empty for a prompt longer than the model's context
        window, which the client records under the entity's name (``"KRAS (pert summary)"``).
    """
    if role not in ("pert", "gene"):
        raise ValueError(f"role must be 'pert' or 'gene', got {role!r}")
    sets = dict(sets or {})
    entities = list(dict.fromkeys(map(str, entities)))
    set_names = [e for e in entities if e in sets]
    genes = [e for e in entities if e not in sets]
    # Members of downstream sets are summarised as downstream genes first.
    members = list(dict.fromkeys(str(g) for s in set_names for g in sets[s]))
    if set_names and role != "gene":
        raise ValueError(f"gene sets are downstream entities; cannot summarise {set_names[:3]} as perturbations")
    todo = list(dict.fromkeys(genes + members))
    desc = dict(zip(descriptions["gene"].astype(str), descriptions["description"].astype(str)))
    first = client.generate([node_summary_prompt(g, describe_gene(g, desc.get(g)), role) for g in todo], sampling,
                            labels=[f"{g} ({role} summary)" for g in todo])
    node = {g: texts[0].strip() for g, texts in zip(todo, first)}
    local = local_edges(edges, todo)
    second = client.generate([neighbourhood_summary_prompt(g, node[g], relations_text(g, local[g]), role) for g in todo],
                             sampling, labels=[f"{g} ({role} neighbourhood summary)" for g in todo])
    out = {g: texts[0].strip() for g, texts in zip(todo, second)}
    if set_names:
        answers = client.generate([gene_set_summary_prompt(set_annotation(s), [f"{g}: {out[str(g)]}" for g in sets[s]])
                                   for s in set_names], sampling, labels=[f"{s} (gene-set summary)" for s in set_names])
        out.update({s: texts[0].strip() for s, texts in zip(set_names, answers)})
    return {e: out[e] for e in entities}


def describe_clusters(client, clusters: Sequence[Sequence[str]], cluster_type: str, summaries: dict[str, str],
                      sampling, items: Sequence[str] | None = None) -> list[str]:
    """Gene-set enrichment texts of clusters: the C.1 gene-set description prompt, parsed.

    Each cluster's members enter the prompt as ``<gene>: <summary>`` (their summaries as
    downstream genes for gene clusters, as perturbations for perturbation clusters). The text
    is the parsed "Name of gene set" and "Brief overview of gene set" (the two parts the paper
    evaluates) joined by ". "; an answer with neither section keeps its raw text. ``items`` (one
    per cluster, e.g. the test item ids) name the prompts the model could not take.
    """
    prompts = [gene_set_description_prompt([f"{g}: {summaries[g]}" for g in members], cluster_type) for members in clusters]
    out = []
    for texts in client.generate(prompts, sampling, labels=items):
        parsed = parse_gene_set_description(texts[0])
        parts = [p.rstrip(".") for p in (parsed["name"], parsed["description"]) if p]
        out.append(". ".join(parts) + "." if parts else texts[0].split("[End of Output]")[0].strip())
    return out
