"""What a dataset keeps: its test folds, the seeded subsampling of test resources, the graph's scope."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pertreasonqa_lib.dataset_selection import folds_to_test, items_with_paths, sample_items, sample_perturbations, scope_graph
from pertreasonqa_lib.path_serialisation import paths_from_json
from pertreasonqa_lib.signed_graph import build_signed_graph


def chain_graph():
    """P -> A -> G and Q -> B -> H; X has no out-edge."""
    return build_signed_graph(pd.DataFrame({"source": ["P", "A", "Q", "B", "G"], "target": ["A", "G", "B", "H", "X"],
                                            "sign": 1, "database": "OmniPath"}))


def test_folds_to_test_checks_the_arguments():
    assert folds_to_test("all", "full") == ["id_cell_id_pert", "id_cell_ood_pert", "ood_cell_id_pert", "ood_cell_ood_pert"]
    assert folds_to_test("ood_cell_id_pert", "paths") == ["ood_cell_id_pert"]
    with pytest.raises(ValueError, match="--fold 'test'"):
        folds_to_test("test", "full")
    with pytest.raises(ValueError, match="--graph_scope 'some'"):
        folds_to_test("all", "some")


def test_sample_perturbations_per_fold_among_graph_nodes():
    items = pd.DataFrame({"perturbation": ["P", "Q", "X", "P", "Z"], "fold": ["train", "train", "train", "valid", "valid"]})
    kept = sample_perturbations(items, chain_graph(), 5, np.random.default_rng(0), in_graph_only=True)
    # X has no out-edge and Z is no node: neither is drawn; every P row is kept (it was drawn in a fold)
    assert sorted(kept["perturbation"]) == ["P", "P", "Q"]
    # one per fold: one of the train perturbations and one of the valid ones (the same P, or two)
    drawn = set(sample_perturbations(items, chain_graph(), 1, np.random.default_rng(0))["perturbation"])
    assert drawn & {"P", "Q", "X"} and drawn & {"P", "Z"} and len(drawn) <= 2


def test_sample_items_puts_items_with_paths_first():
    items = pd.DataFrame({"cell": "c", "perturbation": "P", "n_candidate_paths": [0, 0, 2, 0, 1]}, index=list("abcde"))
    kept = sample_items(items, 2, np.random.default_rng(0))
    assert list(kept.index) == ["c", "e"]  # the two items with candidate paths, in index order
    assert len(sample_items(items, 3, np.random.default_rng(1))) == 3


def test_scope_graph_and_items_with_paths():
    graph = chain_graph()
    items = pd.DataFrame({"cell": "k", "perturbation": ["P", "Q"], "perturbation_type": "CRISPRi", "gene": ["G", "H"],
                          "label": ["down", "down"], "fold": ["train", "id_cell_id_pert"]}, index=["k|P|G", "k|Q|H"])
    basal = pd.DataFrame({"k": {"P": 5.0}})
    thresholds = pd.DataFrame({"tau_low": [1.0], "tau_high": [8.0]}, index=["k"])
    kept, cut = items_with_paths(items, graph, basal, thresholds, ["id_cell_id_pert"], np.random.default_rng(0), graph_scope="paths")
    assert paths_from_json(kept.loc["k|P|G", "candidate_paths"]) == [[("P", 1, "A"), ("A", 1, "G")]]
    # paths: only the edges of candidate paths; walks: edges on walks P..G or Q..H of at most D_max edges
    assert sorted(zip(cut.to_frame()["source"], cut.to_frame()["target"])) == [("A", "G"), ("B", "H"), ("P", "A"), ("Q", "B")]
    walks = scope_graph(graph, kept.iloc[:1], "walks")
    assert sorted(zip(walks.to_frame()["source"], walks.to_frame()["target"])) == [("A", "G"), ("P", "A")]
    assert scope_graph(graph, kept, "full") is graph
    with pytest.raises(ValueError, match="graph scope 'none'"):
        scope_graph(graph, kept, "none")
    # items of folds that are not written are dropped before the search
    only_train, _ = items_with_paths(items, graph, basal, thresholds, ["ood_cell_ood_pert"], np.random.default_rng(0))
    assert list(only_train.index) == ["k|P|G"]
