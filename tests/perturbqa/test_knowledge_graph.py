"""perturbqa_lib.knowledge_graph: the tables a dataset ships, HuRI named by an explicit symbol map."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from perturbqa_lib.knowledge_graph import knowledge_tables, screen_symbols

RESOURCES = Path(__file__).resolve().parents[2] / "resources_test" / "perturbqa"
RAW = RESOURCES / "raw"
GENE_MAP = RAW / "perturbqa" / "k562_gw_mapping_full.json"
SYMBOLS = screen_symbols(GENE_MAP)


def test_tables_are_those_the_test_datasets_ship():
    edges, descriptions = knowledge_tables(RAW / "knowledge_graphs", SYMBOLS)
    pd.testing.assert_frame_equal(edges, pd.read_parquet(RESOURCES / "k562" / "kg_edges.parquet"))
    pd.testing.assert_frame_equal(descriptions, pd.read_parquet(RESOURCES / "k562" / "gene_descriptions.parquet"))
    assert set(edges["database"]) == {"HuRI", "CORUM", "Reactome", "GO_BP", "OmniPath"}
    assert not edges.duplicated(["source", "target", "relation", "database"]).any()


def test_sources_and_gene_filter():
    edges, descriptions = knowledge_tables(RAW / "knowledge_graphs", SYMBOLS, sources=["huri", "corum"])
    assert set(edges["database"]) == {"HuRI", "CORUM"}
    genes = sorted(set(edges.loc[edges["relation"] == "physical", "source"]))[:5]
    kept, kept_descriptions = knowledge_tables(RAW / "knowledge_graphs", SYMBOLS, sources=["huri", "corum"], genes=genes)
    assert set(kept["source"]) <= set(genes)
    physical = kept[kept["relation"] == "physical"]
    assert set(physical["target"]) <= set(genes) and set(kept_descriptions["gene"]) <= set(genes)
    with pytest.raises(FileNotFoundError, match="knowledge-graph folder not found"):
        knowledge_tables(RAW / "nowhere", SYMBOLS)


def test_screen_symbols_cover_the_genome_and_keep_the_screen_names(tmp_path):
    import json

    own = json.loads(GENE_MAP.read_text())
    symbols = screen_symbols(GENE_MAP)
    assert len(symbols) > 40000  # every approved human gene with an Ensembl id
    assert all(symbols[ens] == sym for sym, ens in own.items() if ens.startswith("ENSG") and own.get(sym) == ens
               and list(own.values()).count(ens) == 1)
    # A gene HGNC renamed keeps the old symbol the screen uses: MARCHF1 was MARCH1.
    renamed = {v: k for k, v in screen_symbols(None).items()}["MARCHF1"]
    assert screen_symbols(None, ["MARCH1"])[renamed] == "MARCH1" and screen_symbols(None)[renamed] == "MARCHF1"
