"""The dataset's prior-knowledge file (``file_gene_knowledge``): built from the knowledge graphs, read by methods.

Methods never read the project's shared data folder; the prior knowledge the linear baselines
embed perturbations with is a file of the dataset instead, written by the dataset loaders. It is
one edge table with the columns :data:`COLUMNS`:

* HuRI binary protein-protein interactions (``database`` ``HuRI``, ``relation`` ``physical``) and
  OmniPath signalling interactions (``OmniPath``, ``signalling``), gene to gene, both whole: a
  spectral embedding depends on the whole graph, not only on the dataset's genes;
* GO biological-process memberships (``GO_BP``, ``go_bp``), gene to term, restricted to the
  dataset's genes (measured genes and perturbation targets): a membership embedding only looks at
  the genes it embeds.

Edges are stored as :mod:`pertsci.knowledge_graphs` loads them, so the embeddings computed from
the file equal those computed from the knowledge graphs themselves.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from pertsci import knowledge_graphs as kg

__all__ = ["COLUMNS", "HURI", "OMNIPATH", "GO_BP", "build_gene_knowledge", "read_gene_knowledge", "graph_edges", "gene_sets"]

#: Columns of the file.
COLUMNS = ["source", "target", "relation", "database"]
#: ``database`` values of the three parts.
HURI, OMNIPATH, GO_BP = "HuRI", "OmniPath", "GO_BP"


def build_gene_knowledge(kg_dir: str | Path | None, genes: Iterable[str], gene_map: str | Path | None = None) -> pd.DataFrame:
    """The gene-knowledge table of a dataset.

    Parameters
    ----------
    kg_dir
        The ``knowledge_graphs/`` folder of the shared data; ``None`` gives an empty table (a
        dataset of synthetic genes that no graph knows).
    genes
        The dataset's genes: measured genes and every perturbation target. GO memberships are kept
        for these only.
    gene_map
        JSON map of gene symbol -> Ensembl id naming HuRI's Ensembl ids (PerturbQA's
        ``k562_gw_mapping_full.json``); required with ``kg_dir``.

    Returns
    -------
    pandas.DataFrame
        :data:`COLUMNS`; HuRI edges, then OmniPath edges, then GO BP memberships.
    """
    if kg_dir is None:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in COLUMNS})
    if gene_map is None:
        raise ValueError(f"{kg_dir}: HuRI lists Ensembl ids; give the gene map that names them (gene_map)")
    wanted = set(genes)
    memberships = {name: [g for g in members if g in wanted] for name, members in kg.gene_sets("go_bp", kg_dir).items()}
    parts = [
        kg.huri_edges(kg_dir, kg.ensembl_to_symbol(gene_map)),
        kg.omnipath_edges(kg_dir),
        kg.gene_sets_to_edges({name: members for name, members in memberships.items() if members}, "go_bp", GO_BP),
    ]
    return pd.concat([p[COLUMNS] for p in parts], ignore_index=True)


def read_gene_knowledge(path: str | Path) -> pd.DataFrame:
    """Read a gene-knowledge file.

    Raises
    ------
    ValueError
        Naming the file, when a column of :data:`COLUMNS` is missing.
    """
    table = pd.read_parquet(path)
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: a gene-knowledge file needs the columns {COLUMNS}; missing {missing}")
    return table


def graph_edges(knowledge: pd.DataFrame, database: str) -> pd.DataFrame:
    """The gene-gene edges of one graph (:data:`HURI` or :data:`OMNIPATH`) of a gene-knowledge table.

    Raises
    ------
    ValueError
        When the table holds no edge of ``database``.
    """
    edges = knowledge[knowledge["database"] == database].reset_index(drop=True)
    if edges.empty:
        raise ValueError(f"the gene-knowledge table has no {database} edges; found databases {sorted(set(knowledge['database']))}")
    return edges


def gene_sets(knowledge: pd.DataFrame, database: str = GO_BP) -> dict[str, list[str]]:
    """The gene sets of one membership collection (default :data:`GO_BP`): set name -> member genes.

    Raises
    ------
    ValueError
        When the table holds no membership of ``database``.
    """
    members = knowledge[knowledge["database"] == database]
    if members.empty:
        raise ValueError(f"the gene-knowledge table has no {database} memberships; found databases {sorted(set(knowledge['database']))}")
    return {name: list(group) for name, group in members.groupby("target", sort=False)["source"]}
