"""perturbqa_lib.knowledge_graph: the tables a dataset ships, HuRI named by an explicit symbol map."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from perturbqa_lib.knowledge_graph import knowledge_tables

RESOURCES = Path(__file__).resolve().parents[2] / "resources_test" / "perturbqa"
RAW = RESOURCES / "raw"
GENE_MAP = RAW / "perturbqa" / "k562_gw_mapping_full.json"


def test_tables_are_those_the_test_datasets_ship():
    edges, descriptions = knowledge_tables(RAW / "knowledge_graphs", GENE_MAP)
    pd.testing.assert_frame_equal(edges, pd.read_parquet(RESOURCES / "k562" / "kg_edges.parquet"))
    pd.testing.assert_frame_equal(descriptions, pd.read_parquet(RESOURCES / "k562" / "gene_descriptions.parquet"))
    assert set(edges["database"]) == {"HuRI", "CORUM", "Reactome", "GO_BP", "OmniPath"}
    assert not edges.duplicated(["source", "target", "relation", "database"]).any()


def test_sources_and_gene_filter():
    edges, descriptions = knowledge_tables(RAW / "knowledge_graphs", GENE_MAP, sources=["huri", "corum"])
    assert set(edges["database"]) == {"HuRI", "CORUM"}
    genes = sorted(set(edges.loc[edges["relation"] == "physical", "source"]))[:5]
    kept, kept_descriptions = knowledge_tables(RAW / "knowledge_graphs", GENE_MAP, sources=["huri", "corum"], genes=genes)
    assert set(kept["source"]) <= set(genes)
    physical = kept[kept["relation"] == "physical"]
    assert set(physical["target"]) <= set(genes) and set(kept_descriptions["gene"]) <= set(genes)
    with pytest.raises(FileNotFoundError, match="knowledge-graph folder not found"):
        knowledge_tables(RAW / "nowhere", GENE_MAP)
