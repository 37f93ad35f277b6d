"""The knowledge graph of PerturbQA datasets, and its text: gene descriptions, relations, summaries.

PerturbQA gives models "harmonized and parsed knowledge graphs, with identifiers aligned to the
perturbation data" (Wu et al. 2025, section 4.1). :func:`knowledge_tables` assembles them from
:mod:`pertsci.knowledge_graphs` (HuRI physical interactions, CORUM complexes, Reactome pathways, GO biological
processes, OmniPath signalling; each edge keeps its source database) and STRING's descriptions, as
two tables that a dataset ships to its methods.

The rest serialises a gene to text in the style of the paper's appendix D.1 (:func:`describe_gene`,
:func:`relations_text`) and builds the summarisation prompts of appendix C.1 that SUMMER sends to a
language model: a single-node summary of each gene as a perturbation and as a downstream gene, a
1-hop neighbourhood summary, summaries of gene sets, and the gene-set description asked for by the
gene-set enrichment task (with :func:`parse_gene_set_description` for its answer).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pertsci import knowledge_graphs as kg

__all__ = [
    "DEFAULT_SOURCES", "SET_RELATIONS", "knowledge_tables", "describe_gene", "relations_text", "set_display_name",
    "set_description", "node_summary_prompt", "neighbourhood_summary_prompt", "gene_set_summary_prompt",
    "gene_set_description_prompt", "parse_gene_set_description", "set_annotation", "summarise_entities",
    "describe_clusters",
]

#: Knowledge-graph sources of a dataset (keys of :data:`pertsci.knowledge_graphs.LOADERS`).
DEFAULT_SOURCES = ("huri", "corum", "reactome", "go_bp", "omnipath")
#: Relations whose target is a set (complex, pathway, GO term) rather than a gene.
SET_RELATIONS = ("complex", "pathway", "go_bp")


def knowledge_tables(kg_dir: str | Path | None = None, *, sources: Sequence[str] = DEFAULT_SOURCES,
                     genes: Iterable[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The knowledge graph and gene descriptions a dataset ships.

    Parameters
    ----------
    kg_dir : path, optional
        ``knowledge_graphs/`` of the shared data (default: that of
        :func:`openpert.config.task.shared_data_dir`). HuRI's Ensembl ids are mapped with
        ``../perturbqa/k562_gw_mapping_full.json`` next to it.
    sources : sequence of str
        Edge sources, see :data:`DEFAULT_SOURCES`.
    genes : iterable of str, optional
        Keep only these genes: gene-gene edges with both ends among them and memberships of them
        (for small test resources). Default: everything.

    Returns
    -------
    edges : pandas.DataFrame
        :data:`pertsci.knowledge_graphs.EDGE_COLUMNS`; membership edges go from a gene to a set name.
    descriptions : pandas.DataFrame
        ``gene, description``: STRING v12's functional description of each gene.
    """
    kg_dir = kg.kg_dir(kg_dir)
    edges = kg.load_edges(sources, kg_dir)
    edges = edges.dropna(subset=["source", "target"])
    edges = edges[(edges["source"].astype(str) != "") & (edges["target"].astype(str) != "")]
    edges = edges.drop_duplicates(["source", "target", "relation", "database"]).reset_index(drop=True)
    desc = kg.string_descriptions(str(kg_dir))
    descriptions = pd.DataFrame({"gene": list(desc), "description": [str(v) for v in desc.values()]})
    if genes is not None:
        keep = set(map(str, genes))
        is_set = edges["relation"].isin(SET_RELATIONS)
        in_src = edges["source"].isin(keep)
        edges = edges[in_src & (is_set | edges["target"].isin(keep))].reset_index(drop=True)
        descriptions = descriptions[descriptions["gene"].isin(keep)].reset_index(drop=True)
    edges["sign"] = edges["sign"].astype(int)
    edges["directed"] = edges["directed"].astype(bool)
    return edges, descriptions.drop_duplicates("gene").reset_index(drop=True)


# --- serialisation (appendix D.1) --------------------------------------------------------------
_GO_ID = re.compile(r"\s*\(GO:\d+\)\s*$")


def set_display_name(name: str, relation: str) -> str:
    """Readable set names: GO terms without their id, Reactome names with spaces."""
    if relation == "go_bp":
        return _GO_ID.sub("", name)
    if relation == "pathway":
        return name.replace("-", " ")
    return name


def _listing(items: Sequence[str], max_items: int | None) -> str:
    items = list(dict.fromkeys(items))
    if max_items is not None and len(items) > max_items:
        return ", ".join(items[:max_items]) + f" and {len(items) - max_items} more"
    return ", ".join(items)


def describe_gene(gene: str, description: str | None) -> str:
    """The database description of a gene, as the ``{description}`` of the single-node prompt.

    STRING descriptions start with the protein name, then ``;`` and the function; they become
    ``Gene products`` and ``Functions`` as in appendix D.1.
    """
    text = (description or "").strip()
    if not text:
        return f"Description of gene: {gene}\n\nNo description is available."
    product, sep, functions = text.partition(";")
    lines = [f"Description of gene: {gene}", "", f"Gene products: {product.strip()}"]
    if sep and functions.strip():
        lines += ["", f"Functions: {functions.strip()}"]
    return "\n".join(lines)


def relations_text(gene: str, edges: pd.DataFrame, *, max_items: int | None = 40) -> str:
    """The knowledge-graph relations of ``gene``, one line per relation type (appendix D.1).

    Parameters
    ----------
    gene : str
    edges : pandas.DataFrame
        Edge table (:data:`pertsci.knowledge_graphs.EDGE_COLUMNS`).
    max_items : int or None
        Longest list per line; the rest is counted ("and 12 more") so prompts stay bounded.

    Returns
    -------
    str
        ``"Relations to other genes:"`` followed by lines such as ``- X is involved in ...``,
        ``- Based on evidence from experimental evidence in humans (HuRI), X may physically
        interact with ...``, ``- X may form a complex with ... (<complex>)``, ``- X activates
        ...``; every line names what it rests on. Empty when the gene has no relation.
    """
    out = edges[edges["source"] == gene]
    inc = edges[(edges["target"] == gene) & (edges["source"] != gene)]
    lines: list[str] = []
    for database, group in out[out["relation"] == "go_bp"].groupby("database", sort=True):
        names = [set_display_name(t, "go_bp") for t in group["target"]]
        lines.append(f"- {gene} is involved in {_listing(names, max_items)} ({database}).")
    for database, group in out[out["relation"] == "pathway"].groupby("database", sort=True):
        names = [set_display_name(t, "pathway") for t in group["target"]]
        lines.append(f"- {gene} participates in the pathways {_listing(names, max_items)} ({database}).")
    complexes = out[out["relation"] == "complex"]
    for _, row in complexes.iterrows():
        partners = edges[(edges["relation"] == "complex") & (edges["target"] == row["target"]) & (edges["source"] != gene)]["source"]
        with_whom = f" with {_listing(sorted(partners), max_items)}" if len(partners) else ""
        lines.append(f"- {gene} may form a complex{with_whom} ({row['target']}, {row['database']}).")
    physical = pd.concat([out[out["relation"] == "physical"][["target", "database"]].rename(columns={"target": "other"}),
                          inc[inc["relation"] == "physical"][["source", "database"]].rename(columns={"source": "other"})])
    for database, group in physical.groupby("database", sort=True):
        lines.append(f"- Based on experimental evidence in humans ({database}), {gene} may physically interact with "
                     f"{_listing(sorted(group['other']), max_items)}.")
    signal_out = out[out["relation"].isin(["signalling", "regulon"])]
    signal_in = inc[inc["relation"].isin(["signalling", "regulon"])]
    verbs = {1: "activates", -1: "inhibits", 0: "regulates"}
    passive = {1: "is activated by", -1: "is inhibited by", 0: "is regulated by"}
    for (database, sign), group in signal_out.groupby(["database", "sign"], sort=True):
        lines.append(f"- {gene} {verbs[int(sign)]} {_listing(sorted(group['target']), max_items)} ({database}).")
    for (database, sign), group in signal_in.groupby(["database", "sign"], sort=True):
        lines.append(f"- {gene} {passive[int(sign)]} {_listing(sorted(group['source']), max_items)} ({database}).")
    other = out[~out["relation"].isin(["go_bp", "pathway", "complex", "physical", "signalling", "regulon"])]
    for (relation, database), group in other.groupby(["relation", "database"], sort=True):
        lines.append(f"- {gene} {relation} {_listing(list(group['target']), max_items)} ({database}).")
    if not lines:
        return ""
    return "Relations to other genes:\n\n" + "\n\n".join(lines)


def set_description(name: str, members: Sequence[str], max_items: int | None = 60) -> str:
    """A downstream gene set as text: its name (the manual annotation) and its members."""
    label = name.split("-", 1)[1] if re.match(r"^\d+-", name) else name
    return f"Gene set {name} ({label}): {len(members)} genes, {_listing(list(members), max_items)}."


# --- summarisation prompts (appendix C.1) -------------------------------------------------------
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


_SECTION = re.compile(r"(?:^|\n)\s*(?:\d\)\s*)?(?:\*\*)?(Brief overview of gene set|Upstream pathways may affect this gene set|Name of gene set)(?:\*\*)?\s*:\s*",
                      re.IGNORECASE)


def parse_gene_set_description(text: str) -> dict[str, str]:
    """The sections of a gene-set description answer.

    Returns
    -------
    dict
        ``description`` ("Brief overview of gene set") and ``name`` ("Name of gene set"), each
        ``""`` when the answer lacks the section (the paper parses these two for evaluation).
    """
    text = text.split("[End of Output]")[0]
    parts = _SECTION.split(text)
    found: dict[str, str] = {}
    # split() alternates text and captured section titles: [pre, title, body, title, body, ...]
    for title, body in zip(parts[1::2], parts[2::2]):
        found.setdefault(title.lower(), body.strip())
    return {"description": found.get("brief overview of gene set", ""), "name": found.get("name of gene set", "")}


# --- summarisation through a language model (section 4.2, appendix C.1) ------------------------
def set_annotation(name: str) -> str:
    """The manual annotation of a downstream gene set named ``<id>-<annotation>`` (K562-set)."""
    return name.split("-", 1)[1] if re.match(r"^\d+-", name) else name


def _local_edges(edges: pd.DataFrame, genes: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Per gene, the edges :func:`relations_text` reads: those touching it and its complexes' members.

    Grouping once replaces a scan of the whole graph per gene (the text is the same, rows keep
    their order).
    """
    by_source = edges.groupby("source", sort=False).indices
    by_target = edges.groupby("target", sort=False).indices
    is_complex = (edges["relation"] == "complex").to_numpy()
    targets = edges["target"].to_numpy()
    empty = np.zeros(0, dtype=np.int64)
    out = {}
    for g in genes:
        own = by_source.get(g, empty)
        parts = [own, by_target.get(g, empty)]
        parts += [by_target.get(c, empty) for c in set(targets[own[is_complex[own]]])]
        out[g] = edges.iloc[np.unique(np.concatenate(parts))]
    return out


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
        Entity -> summary text (stripped).
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
    first = client.generate([node_summary_prompt(g, describe_gene(g, desc.get(g)), role) for g in todo], sampling)
    node = {g: texts[0].strip() for g, texts in zip(todo, first)}
    local = _local_edges(edges, todo)
    second = client.generate([neighbourhood_summary_prompt(g, node[g], relations_text(g, local[g]), role) for g in todo],
                             sampling)
    out = {g: texts[0].strip() for g, texts in zip(todo, second)}
    if set_names:
        answers = client.generate([gene_set_summary_prompt(set_annotation(s), [f"{g}: {out[str(g)]}" for g in sets[s]])
                                   for s in set_names], sampling)
        out.update({s: texts[0].strip() for s, texts in zip(set_names, answers)})
    return {e: out[e] for e in entities}


def describe_clusters(client, clusters: Sequence[Sequence[str]], cluster_type: str, summaries: dict[str, str],
                      sampling) -> list[str]:
    """Gene-set enrichment texts of clusters: the C.1 gene-set description prompt, parsed.

    Each cluster's members enter the prompt as ``<gene>: <summary>`` (their summaries as
    downstream genes for gene clusters, as perturbations for perturbation clusters). The text
    is the parsed "Name of gene set" and "Brief overview of gene set" (the two parts the paper
    evaluates) joined by ". "; an answer with neither section keeps its raw text.
    """
    prompts = [gene_set_description_prompt([f"{g}: {summaries[g]}" for g in members], cluster_type) for members in clusters]
    out = []
    for texts in client.generate(prompts, sampling):
        parsed = parse_gene_set_description(texts[0])
        parts = [p.rstrip(".") for p in (parsed["name"], parsed["description"]) if p]
        out.append(". ".join(parts) + "." if parts else texts[0].split("[End of Output]")[0].strip())
    return out
