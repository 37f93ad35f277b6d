"""The files of a dataset: written by the loaders (train, test, solution, context, graph, gene
descriptions) and read back by methods and metrics."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from pertreasonqa_lib.dataset_files import OUTPUTS, read_context, read_gene_descriptions, read_graph, write_dataset
from pertreasonqa_lib.reference_paths import reference_paths_for_items
from pertreasonqa_lib.signed_graph import build_signed_graph


def written_dataset(folder):
    """Compound D activates T; T -> G. Items of cell c: a train item (P's), a test item of D."""
    genes = build_signed_graph(pd.DataFrame({"source": ["T", "P"], "target": ["G", "G"], "sign": [1, -1],
                                             "database": "OmniPath"}))
    graph = genes.with_drug_targets(pd.DataFrame({"drug": ["D"], "target": ["T"], "sign": [1]}), "test")
    items = pd.DataFrame({"cell": "c", "perturbation": ["P", "D"], "perturbation_type": ["CRISPRi", "chemical"],
                          "gene": "G", "label": ["up", "up"], "fold": ["train", "id_cell_id_pert"]}, index=["c|P|G", "c|D|G"])
    basal = pd.DataFrame({"c": {"T": 5.0, "G": 2.0, "P": 4.0}})
    thresholds = pd.DataFrame({"tau_low": [1.0], "tau_high": [8.0]}, index=["c"])
    items = items.join(reference_paths_for_items(items, graph, basal, thresholds))
    outputs = {k: folder / f"{k}.out" for k in OUTPUTS}
    counts = write_dataset(items, graph, basal, thresholds, {"c": {"distribution": "ID"}}, {"dataset_id": "toy"},
                           ["id_cell_id_pert"], outputs, go_sets={"t1": ["T", "G"], "t2": ["X"]},
                           descriptions={"T": "a factor", "G": "", "P": "a kinase", "D": "no compound is a gene"},
                           basal_uns={"n_mapped_genes": 3})
    return graph, items, outputs, counts


def test_write_dataset_files(tmp_path):
    graph, items, outputs, counts = written_dataset(tmp_path)
    assert counts == {"n_train": 1, "n_test": 1, "n_genes": 3, "n_edges": 3, "n_descriptions": 2}
    train, test, solution = (ad.read_h5ad(outputs[k]) for k in ("train", "test", "solution"))
    assert list(train.obs_names) == ["c|P|G"] and train.obs["split"].tolist() == ["train"]
    assert list(test.obs_names) == ["c|D|G"] and "label" not in test.obs and "reference_paths" not in test.obs
    assert solution.obs["n_reference_paths"].tolist() == [1]  # D -> T -> G (+, +): up
    assert test.uns["dataset_id"] == solution.uns["dataset_id"] == "toy"
    # the context holds genes only (the compound is no gene), with the GO terms that annotate one of them
    context = ad.read_h5ad(outputs["context"])
    assert list(context.var_names) == ["G", "P", "T"] and context.var["in_graph"].all()
    assert list(context.uns["go_bp_terms"]) == ["t1"] and context.uns["n_mapped_genes"] == 3
    # the descriptions: genes of the context with a non-empty description
    assert read_gene_descriptions(outputs["gene_descriptions"]) == {"P": "a kinase", "T": "a factor"}
    assert read_graph(outputs["graph"]).to_frame().equals(graph.to_frame())


def test_read_context_splits_expression_thresholds_and_go(tmp_path):
    _, _, outputs, _ = written_dataset(tmp_path)
    basal, thresholds, go = read_context(ad.read_h5ad(outputs["context"]))
    assert basal.loc["T", "c"] == 5.0 and basal.loc["P", "c"] == 4.0 and basal.shape == (3, 1)
    assert thresholds.loc["c"].tolist() == [1.0, 8.0]
    # t1 annotates T and G; idf = log(3 annotated genes in the GMT / 2 members)
    assert go.idf.tolist() == pytest.approx([np.log(3 / 2)])
    assert go.profile(["T"]).tolist() == pytest.approx([np.log(3 / 2)]) and go.profile(["P"]).tolist() == [0.0]


def test_read_gene_descriptions_checks_the_file(tmp_path):
    path = tmp_path / "d.parquet"
    pd.DataFrame({"gene": ["A"], "text": ["x"]}).to_parquet(path)
    with pytest.raises(ValueError, match=r"d.parquet: missing columns \['description'\]"):
        read_gene_descriptions(path)
    pd.DataFrame({"gene": ["A", "A"], "description": ["x", "y"]}).to_parquet(path)
    with pytest.raises(ValueError, match="duplicated genes, e.g. 'A'"):
        read_gene_descriptions(path)
