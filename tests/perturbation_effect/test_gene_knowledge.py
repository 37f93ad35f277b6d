"""The dataset's gene-knowledge file (perturbation_effect_lib.gene_knowledge).

The methods embed perturbations from this file rather than from the shared data folder; the
embeddings must be exactly those computed from the knowledge graphs themselves.
"""

from __future__ import annotations

import json

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from perturbation_effect_lib import embeddings, gene_knowledge
from project_paths import ROOT, SHARED_DATA

from pertsci import knowledge_graphs as kg

KG_DIR = SHARED_DATA / "knowledge_graphs"
needs_data = pytest.mark.skipif(not KG_DIR.is_dir(), reason=f"shared data not found at {SHARED_DATA} (set OPENPERT_SHARED_DATA)")
TEST_DATASET = ROOT / "resources_test/perturbation_effect/synthetic_simulation"


def same_up_to_sign(a: pd.DataFrame, b: pd.DataFrame) -> None:
    """Two embedding tables agree, up to each column's sign and rounding.

    ARPACK (behind the spectral and SVD embeddings) keeps a random state between calls, so two
    calls in one process may differ in the last bits and, through the sign rule, in a column's
    sign; one call per component process is what the benchmark runs (and gives identical numbers).
    """
    assert a.index.equals(b.index)
    x, y = a.to_numpy(), b.to_numpy()
    signs = np.where((x * y).sum(axis=0) < 0, -1.0, 1.0)
    np.testing.assert_allclose(x * signs, y, rtol=1e-8, atol=1e-10)


def _map(kg_dir):
    """The gene map beside a knowledge_graphs/ folder, as the shared data lays them out."""
    return kg_dir.parent / "perturbqa" / "k562_gw_mapping_full.json"


@pytest.fixture(scope="module")
def toy_kg(tmp_path_factory):
    """A knowledge_graphs/ folder in the shared data layout: HuRI (Ensembl ids), OmniPath, GO BP."""
    rng = np.random.default_rng(7)
    data = tmp_path_factory.mktemp("shared_data")
    folder = data / "knowledge_graphs"
    folder.mkdir()
    (data / "perturbqa").mkdir()
    symbols = [f"S{i}" for i in range(16)]
    (data / "perturbqa" / "k562_gw_mapping_full.json").write_text(json.dumps({s: f"ENSG{i:05d}" for i, s in enumerate(symbols)}))
    # Random graphs (no symmetry, so no tied eigenvalues) on a path through every gene, and an
    # interaction of an unmapped id (dropped).
    path = [(i, i + 1) for i in range(15)]
    extra = [tuple(rng.choice(16, size=2, replace=False)) for _ in range(3)]
    huri = [(f"ENSG{a:05d}", f"ENSG{b:05d}") for a, b in path + extra] + [("ENSG00001", "ENSG99999")]
    pd.DataFrame(huri, columns=["protein1", "protein2"]).to_csv(folder / "huri_binary_ppi.tsv", sep="\t", index=False)
    omni = [tuple(rng.choice(16, size=2, replace=False)) for _ in range(15)] + path[:5]
    pd.DataFrame({"source": [f"S{a}" for a, _ in omni], "target": [f"S{b}" for _, b in omni],
                  "interaction": rng.choice([-1, 1], size=len(omni))}).to_csv(folder / "omnipath_signed_directed.tsv", sep="\t", index=False)
    go = {f"term {k} (GO:{k:07d})": rng.choice(symbols, size=2 + k % 5, replace=False).tolist() + ["OTHER0"] for k in range(14)}
    go["far away (GO:9999999)"] = ["OTHER1", "OTHER2"]
    go["touches one (GO:8888888)"] = ["S1", "OTHER3"]
    (folder / "GO_Biological_Process_2021.gmt").write_text("".join(f"{name}\t\t" + "\t".join(genes) + "\n" for name, genes in go.items()))
    return folder


def test_the_file_holds_whole_graphs_and_memberships_of_the_dataset_genes(toy_kg, tmp_path):
    genes = [f"S{i}" for i in range(0, 16, 2)] + ["S1", "NOT_A_GENE"]
    knowledge = gene_knowledge.build_gene_knowledge(toy_kg, genes, gene_map=_map(toy_kg))
    assert list(knowledge.columns) == gene_knowledge.COLUMNS
    assert knowledge["database"].value_counts()[["HuRI", "OmniPath"]].tolist() == [18, 20]
    assert set(knowledge.loc[knowledge["database"] == "HuRI", "relation"]) == {"physical"}
    assert set(knowledge.loc[knowledge["database"] == "OmniPath", "relation"]) == {"signalling"}
    members = knowledge[knowledge["database"] == "GO_BP"]
    assert set(members["relation"]) == {"go_bp"}
    assert set(members["source"]) <= set(genes)  # memberships of the dataset's genes only
    assert "far away (GO:9999999)" not in set(members["target"])  # a term with none of them is left out
    path = tmp_path / "gene_knowledge.parquet"
    knowledge.to_parquet(path, index=False)
    back = gene_knowledge.read_gene_knowledge(path)
    pd.testing.assert_frame_equal(back, knowledge)
    sets = gene_knowledge.gene_sets(back)
    assert sets["touches one (GO:8888888)"] == ["S1"]
    full = kg.gene_sets("go_bp", toy_kg)
    assert all(sorted(sets[name]) == sorted(set(full[name]) & set(genes)) for name in sets)
    edges = gene_knowledge.graph_edges(back, gene_knowledge.HURI)
    assert len(edges) == 18 and set(edges["database"]) == {"HuRI"}
    assert (edges["source"].str.startswith("S") & edges["target"].str.startswith("S")).all()  # symbols


def test_embeddings_from_the_file_equal_those_from_the_knowledge_graphs(toy_kg, tmp_path):
    genes = [f"S{i}" for i in range(16)] + ["NOT_A_GENE"]
    path = tmp_path / "gene_knowledge.parquet"
    gene_knowledge.build_gene_knowledge(toy_kg, genes, gene_map=_map(toy_kg)).to_parquet(path, index=False)
    knowledge = gene_knowledge.read_gene_knowledge(path)
    pairs = [
        (embeddings.spectral_embedding(gene_knowledge.graph_edges(knowledge, gene_knowledge.HURI), 3),
         embeddings.spectral_embedding(kg.huri_edges(toy_kg, kg.ensembl_to_symbol(_map(toy_kg))), 3)),
        (embeddings.spectral_embedding(gene_knowledge.graph_edges(knowledge, gene_knowledge.OMNIPATH), 3),
         embeddings.spectral_embedding(kg.omnipath_edges(toy_kg), 3)),
        (embeddings.go_membership_embedding(genes, gene_knowledge.gene_sets(knowledge), 3),
         embeddings.go_membership_embedding(genes, kg.gene_sets("go_bp", toy_kg), 3)),
    ]
    for from_file, from_graphs in pairs:
        same_up_to_sign(from_file, from_graphs)


def test_errors_name_what_is_missing(tmp_path):
    empty = gene_knowledge.build_gene_knowledge(None, ["A"])
    assert list(empty.columns) == gene_knowledge.COLUMNS and empty.empty
    with pytest.raises(ValueError, match="no HuRI edges"):
        gene_knowledge.graph_edges(empty, gene_knowledge.HURI)
    with pytest.raises(ValueError, match="no GO_BP memberships"):
        gene_knowledge.gene_sets(empty)
    pd.DataFrame({"source": ["A"], "target": ["B"]}).to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=r"bad.parquet: .*missing \['relation', 'database'\]"):
        gene_knowledge.read_gene_knowledge(tmp_path / "bad.parquet")


@pytest.fixture(scope="module")
def real_genes():
    huri = sorted(set(kg.huri_edges(KG_DIR, kg.ensembl_to_symbol(_map(KG_DIR)))["source"]))[:20]
    omnipath = sorted(set(kg.omnipath_edges(KG_DIR)["source"]))[:20]
    go_bp = ["TP53", "MDM2", "CDK1", "CCNB1", "RPL3", "RPS6"]
    return {"huri": huri, "omnipath": omnipath, "go_bp": go_bp}


@needs_data
@pytest.mark.parametrize("source", ["huri", "omnipath", "go_bp"])
def test_knowledge_graph_embeddings(source, real_genes):
    genes = real_genes[source] + ["NOT_A_GENE"]
    knowledge = gene_knowledge.build_gene_knowledge(KG_DIR, genes, gene_map=_map(KG_DIR))
    if source == "go_bp":
        table = embeddings.go_membership_embedding(genes, gene_knowledge.gene_sets(knowledge))
    else:
        database = {"huri": gene_knowledge.HURI, "omnipath": gene_knowledge.OMNIPATH}[source]
        table = embeddings.spectral_embedding(gene_knowledge.graph_edges(knowledge, database))
    assert table.shape[1] == embeddings.N_COMPONENTS
    assert np.isfinite(table.to_numpy()).all()
    rows = table.reindex(genes).fillna(0.0).to_numpy()
    assert (np.abs(rows[:-1]).sum(axis=1) > 0).mean() > 0.5  # most known genes have a vector
    assert not rows[-1].any()
    nonzero = (table.to_numpy() ** 2).sum(axis=1) > 0
    np.testing.assert_allclose((table.to_numpy()[nonzero] ** 2).sum(axis=1).mean(), embeddings.N_COMPONENTS)


@needs_data
def test_the_test_resource_is_the_knowledge_of_its_genes():
    """resources_test's gene_knowledge.parquet is what the loaders write today for that dataset."""
    train, test = ad.read_h5ad(TEST_DATASET / "train.h5ad"), ad.read_h5ad(TEST_DATASET / "test.h5ad")
    genes = embeddings.genes_to_embed(train.var_names, [*train.obs_names, *test.obs_names])
    stored = gene_knowledge.read_gene_knowledge(TEST_DATASET / "gene_knowledge.parquet")
    pd.testing.assert_frame_equal(stored, gene_knowledge.build_gene_knowledge(KG_DIR, genes, gene_map=_map(KG_DIR)))
