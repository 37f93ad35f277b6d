"""The knowledge graph and gene descriptions a dataset of the task ships, from the public files.

PerturbQA gives models "harmonized and parsed knowledge graphs, with identifiers aligned to the
perturbation data" (Wu et al. 2025, section 4.1). :func:`knowledge_tables` assembles them from
:mod:`pertsci.knowledge_graphs` (HuRI physical interactions, CORUM complexes, Reactome pathways, GO
biological processes, OmniPath signalling; each edge keeps its source database) and STRING's
descriptions, as two tables that a dataset ships to its methods. HuRI lists Ensembl gene ids:
:func:`screen_symbols` names them for every human gene (HGNC, offline), preferring the screen's own
gene map and the symbols its labels use.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from pertsci import knowledge_graphs as kg

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_SOURCES", "SET_RELATIONS", "screen_symbols", "knowledge_tables"]

#: Knowledge-graph sources of a dataset (keys of :data:`pertsci.knowledge_graphs.LOADERS`).
DEFAULT_SOURCES = ("huri", "corum", "reactome", "go_bp", "omnipath")
#: Relations whose target is a set (complex, pathway, GO term) rather than a gene.
SET_RELATIONS = ("complex", "pathway", "go_bp")


def screen_symbols(gene_map: str | Path | None = None, names_in_use: Iterable[str] | None = None) -> dict[str, str]:
    """Ensembl gene id -> symbol for every human gene, named as a screen names them.

    Parameters
    ----------
    gene_map : path, optional
        The screen's own map (JSON, gene symbol -> Ensembl id, as PerturbQA's
        ``k562_gw_mapping_full.json``); its names win.
    names_in_use : iterable of str, optional
        The screen's perturbations and downstream genes: a gene HGNC has renamed since keeps the
        previous symbol the screen uses.

    See :func:`pertsci.knowledge_graphs.genome_ensembl_to_symbol` (HGNC's approved genes, offline).
    """
    preferred = kg.ensembl_to_symbol(gene_map) if gene_map is not None else None
    return kg.genome_ensembl_to_symbol(preferred, names_in_use)


def knowledge_tables(kg_dir: str | Path, symbols: Mapping[str, str], *, sources: Sequence[str] = DEFAULT_SOURCES,
                     genes: Iterable[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The knowledge graph and gene descriptions a dataset ships.

    Parameters
    ----------
    kg_dir : path
        A ``knowledge_graphs/`` folder (as in the shared data).
    symbols : mapping
        Ensembl gene id -> symbol, which names HuRI's genes (:func:`screen_symbols`).
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
    frames = [kg.load_edges(kg_dir, [name], symbols=symbols) for name in sources]
    edges = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=kg.EDGE_COLUMNS)
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
