"""pertsci.knowledge_graphs: loaders read the folder they are given, in the published formats."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from project_paths import SHARED_DATA

from pertsci import knowledge_graphs as kg


@pytest.fixture
def data_dir(tmp_path):
    """A data folder in the published layout: knowledge_graphs/ and the K562 gene map."""
    kg_dir = tmp_path / "knowledge_graphs"
    kg_dir.mkdir()
    (kg_dir / "GO_Biological_Process_2021.gmt").write_text("term a (GO:1)\t\tTP53\tMDM2\t\nterm b (GO:2)\t\tMDM2\n")
    (kg_dir / "huri_binary_ppi.tsv").write_text("protein1\tprotein2\nENSG1\tENSG2\nENSG2\tENSG9\n")
    (kg_dir / "omnipath_signed_directed.tsv").write_text("source\ttarget\tinteraction\nMDM2\tTP53\t-1\nTP53\tCDKN1A\t1\n")
    (tmp_path / "perturbqa").mkdir()
    (tmp_path / "perturbqa" / "k562_gw_mapping_full.json").write_text(json.dumps({"TP53": "ENSG1", "MDM2": "ENSG2"}))
    return tmp_path


def test_gene_sets_read_from_the_given_folder(data_dir):
    sets = kg.gene_sets("go_bp", data_dir / "knowledge_graphs")
    assert sets == {"term a (GO:1)": ["TP53", "MDM2"], "term b (GO:2)": ["MDM2"]}
    edges = kg.gene_sets_to_edges(sets, "go_bp", "GO_BP")
    assert list(edges.columns) == kg.EDGE_COLUMNS and len(edges) == 3


def test_huri_maps_ensembl_ids_and_drops_unmapped_interactions(data_dir):
    symbols = kg.ensembl_to_symbol(data_dir / "perturbqa" / "k562_gw_mapping_full.json")
    assert symbols == {"ENSG1": "TP53", "ENSG2": "MDM2"}
    edges = kg.huri_edges(data_dir / "knowledge_graphs", symbols)
    assert edges[["source", "target"]].values.tolist() == [["TP53", "MDM2"]]
    assert (edges["database"] == "HuRI").all() and not edges["directed"].any()


def test_signed_edges_and_adjacency(data_dir):
    edges = kg.omnipath_edges(data_dir / "knowledge_graphs")
    matrix, index = kg.adjacency(edges, signed=True)
    dense = pd.DataFrame(matrix.toarray(), index=index, columns=index)
    assert dense.loc["MDM2", "TP53"] == -1 and dense.loc["TP53", "CDKN1A"] == 1
    assert dense.loc["TP53", "MDM2"] == 0  # directed edges are not mirrored
    undirected, _ = kg.adjacency(kg.huri_edges(data_dir / "knowledge_graphs", {"ENSG1": "TP53", "ENSG2": "MDM2"}))
    assert np.array_equal(undirected.toarray(), undirected.toarray().T)


def test_huri_needs_a_symbol_map_and_the_map_must_be_one(data_dir, tmp_path):
    with pytest.raises(ValueError, match="HuRI lists Ensembl ids"):
        kg.load_edges(data_dir / "knowledge_graphs", ["huri"])
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="bad.json: expected a JSON mapping"):
        kg.ensembl_to_symbol(tmp_path / "bad.json")


def test_a_missing_folder_is_an_error_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere: knowledge-graph folder not found"):
        kg.omnipath_edges(tmp_path / "nowhere")


def test_a_gmt_line_without_genes_names_file_and_line(tmp_path):
    path = tmp_path / "bad.gmt"
    path.write_text("ok\t\tA\nbroken\tno genes\n")
    with pytest.raises(ValueError, match="bad.gmt: line 2"):
        kg.read_gmt(path)


@pytest.mark.skipif(not (SHARED_DATA / "knowledge_graphs").is_dir(), reason=f"no shared data at {SHARED_DATA}")
def test_the_published_files_load():
    edges = kg.load_edges(SHARED_DATA / "knowledge_graphs", ("omnipath", "corum"))
    assert set(edges["database"]) == {"OmniPath", "CORUM"} and len(edges) > 1000


def _hgnc_parquet(path):
    pd.DataFrame({"ensembl_id": ["ENSG1", "ENSG2", "ENSG3", "ENSG4", "ENSG4", None],
                  "symbol": ["TP53", "MDM2", "MARCHF1", "DUP1", "DUP2", "NOID"],
                  "prev_symbols": ["", "", "MARCH1|MARCH-I", "", "", ""]}).to_parquet(path)
    return path


def test_genome_map_prefers_the_dataset_names(tmp_path):
    table = _hgnc_parquet(tmp_path / "gene_table.parquet")
    # An Ensembl id HGNC gives to two genes is ambiguous and left out; a gene without one too.
    assert kg.genome_ensembl_to_symbol(table=table) == {"ENSG1": "TP53", "ENSG2": "MDM2", "ENSG3": "MARCHF1"}
    # A dataset that still says MARCH1 keeps its name; its own map wins over HGNC.
    symbols = kg.genome_ensembl_to_symbol({"ENSG2": "HDM2"}, ["MARCH1", "TP53"], table=table)
    assert symbols == {"ENSG1": "TP53", "ENSG2": "HDM2", "ENSG3": "MARCH1"}
    edges = kg.huri_edges(_huri(tmp_path), symbols)
    assert edges[["source", "target"]].values.tolist() == [["TP53", "HDM2"], ["HDM2", "MARCH1"]]
    pd.DataFrame({"ensembl_id": ["ENSG1"]}).to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=r"bad\.parquet: missing column"):
        kg.genome_ensembl_to_symbol(table=tmp_path / "bad.parquet")


def _huri(tmp_path):
    folder = tmp_path / "kg"
    folder.mkdir()
    (folder / "huri_binary_ppi.tsv").write_text("protein1\tprotein2\nENSG1\tENSG2\nENSG2\tENSG3\nENSG3\tENSG9\n")
    return folder


def test_the_packaged_hgnc_table_covers_the_genome_with_its_provenance():
    symbols = kg.genome_ensembl_to_symbol()
    assert len(symbols) > 40000 and symbols["ENSG00000141510"] == "TP53"
    source = kg.hgnc_provenance()["sources"]["hgnc"]
    assert source["url"].endswith("hgnc_complete_set.txt") and len(source["sha256"]) == 64


@pytest.mark.skipif(not (SHARED_DATA / "knowledge_graphs").is_dir(), reason=f"no shared data at {SHARED_DATA}")
def test_hgnc_names_nearly_all_of_huri():
    edges = kg.huri_edges(SHARED_DATA / "knowledge_graphs", kg.genome_ensembl_to_symbol())
    k562_only = kg.huri_edges(SHARED_DATA / "knowledge_graphs",
                              kg.ensembl_to_symbol(SHARED_DATA / "perturbqa" / "k562_gw_mapping_full.json"))
    assert len(edges) > 52000 and len(k562_only) < 13000  # of 52,548 interactions
