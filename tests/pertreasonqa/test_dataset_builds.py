"""A build written and read back is what was built, value for value and type for type; its folds' metadata."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from pertreasonqa_lib.dataset_builds import BUILD_OUTPUTS, Build, fold_uns, read_build, write_build
from pertreasonqa_lib.signed_graph import build_signed_graph


def toy_build() -> Build:
    """Compound D activates T; T -> G, P -| G; items of two cells in three folds, an int index as the loaders make."""
    genes = build_signed_graph(pd.DataFrame({"source": ["T", "P"], "target": ["G", "G"], "sign": [1, -1],
                                             "database": "OmniPath"}))
    graph = genes.with_drug_targets(pd.DataFrame({"drug": ["D"], "target": ["T"], "sign": [1]}), "OP3 simulation")
    items = pd.DataFrame({"cell": ["c", "c", "o"], "perturbation": ["P", "D", "D"],
                          "perturbation_type": ["CRISPRi", "chemical", "chemical"], "gene": "G",
                          "label": ["up", "down", "unchanged"], "fold": ["train", "id_cell_id_pert", "ood_cell_id_pert"],
                          "pvalue_adj": [0.001, 0.004, 0.5]}, index=[7, 3, 11])
    basal = pd.DataFrame({"c": {"T": 5.0, "G": np.nan, "P": 4.0}, "o": {"T": 1.5, "G": 2.0, "P": 0.25}})
    thresholds = pd.DataFrame({"tau_low": [1.0, 0.5], "tau_high": [8.0, 7.5], "n_background": [3, 3],
                               "labels_from": ["own", "pooled"]}, index=["c", "o"])
    facts = {"modality": "chemical", "n_compounds": 16, "seed": 0, "n_cells": 1234,
             "basal_stats": {"n_hpa_genes": 20, "n_mapped": np.int64(18)}}
    return Build(items, graph, basal, thresholds, {"c": {"distribution": "ID"}, "o": {"distribution": "OOD"}}, facts)


def test_a_build_reads_back_as_it_was_made(tmp_path):
    built = toy_build()
    paths = {k: tmp_path / f"{k}.out" for k in BUILD_OUTPUTS}
    write_build(built, paths)
    read = read_build(paths["items"], paths["network"], paths["cells"])
    # the items keep their index, column order and dtypes: the split samples and sorts by them
    pd.testing.assert_frame_equal(read.items, built.items, check_exact=True)
    assert read.graph.to_frame().equals(built.graph.to_frame()) and list(read.graph.nodes) == list(built.graph.nodes)
    assert read.graph.drug_edge.tolist() == built.graph.drug_edge.tolist()
    pd.testing.assert_frame_equal(read.basal, built.basal, check_exact=True, check_names=False)
    pd.testing.assert_frame_equal(read.thresholds, built.thresholds, check_exact=True, check_names=False)
    assert read.cells == built.cells
    assert read.facts == {**built.facts, "basal_stats": {"n_hpa_genes": 20, "n_mapped": 18}}
    assert type(read.facts["basal_stats"]["n_mapped"]) is int


def test_a_folds_metadata_is_its_modalitys(tmp_path):
    uns = fold_uns(toy_build().facts, "chemical_x", "ood_cell_id_pert", ["ood_cell_id_pert"])
    assert uns["dataset_id"] == "chemical_x" and uns["fold"] == "ood_cell_id_pert"
    assert "16 compounds, seed 0" in uns["dataset_description"] and "1234 cells" in uns["dataset_description"]
    genetic = fold_uns({"modality": "genetic", "basal_stats": {"n_hpa_genes": 20, "n_mapped": 18}}, "g", "all",
                       ["id_cell_id_pert"])
    assert genetic["dataset_name"].startswith("CRISPRi")


def test_a_build_of_an_unknown_modality_or_a_foreign_cells_file_is_refused(tmp_path):
    built = toy_build()
    built.facts = {"modality": "proteomic"}
    with pytest.raises(ValueError, match="modality 'proteomic'"):
        write_build(built, {k: tmp_path / k for k in BUILD_OUTPUTS})
    ad.AnnData(np.zeros((1, 1))).write_h5ad(tmp_path / "cells.h5ad")
    built = toy_build()
    paths = {k: tmp_path / f"{k}.out" for k in BUILD_OUTPUTS}
    write_build(built, paths)
    with pytest.raises(ValueError, match="cells.h5ad: not the cells file of a build"):
        read_build(paths["items"], paths["network"], tmp_path / "cells.h5ad")
