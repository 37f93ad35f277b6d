"""perturbqa_lib.dataset_assembly: training pairs, test items and solution of a dataset, never de with dir."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from perturbqa_lib.dataset_assembly import (
    KNOWLEDGE_LICENSE,
    MAX_DATASET_LABEL,
    dataset_from_responses,
    dataset_label,
    pad_with_decoys,
    perturbqa_dataset,
    screen_metadata,
)
from perturbqa_lib.screen_manifest import read_screen_manifest
from project_paths import SHARED_DATA

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "resources_test" / "perturbqa" / "raw" / "perturbqa"
SCREENS = ROOT / "src" / "perturbqa" / "datasets" / "perturbqa" / "screens"


def screen(name):
    return read_screen_manifest(SCREENS / f"{name}.yaml")


def responses():
    return pd.DataFrame({"pert": ["A", "A", "B", "C", "C"], "gene": ["x", "y", "x", "x", "y"],
                         "split": ["train", "train", "train", "test", "test"],
                         "response": ["up", "unchanged", "down", "up", "unchanged"]})


def test_dataset_never_mixes_de_and_dir():
    with pytest.raises(ValueError, match="cannot share"):
        dataset_from_responses(responses(), ["de", "dir"], {"dataset_id": "t"})
    ds = dataset_from_responses(responses(), ["dir"], {"dataset_id": "t"})
    assert list(ds["test"].index) == ["dir:C:x"] and ds["solution"]["label"].tolist() == [1.0]
    assert list(ds["train"].index) == ["A:x", "A:y", "B:x"] and ds["uns"]["subtask"] == "dir"
    ds = dataset_from_responses(responses(), ["de"], {"dataset_id": "t"})
    assert ds["solution"]["label"].tolist() == [1.0, 0.0] and "2 test items (de)" in ds["uns"]["dataset_description"]


def test_clusters_need_annotations_and_the_k562_screen():
    clusters = pd.DataFrame({"cluster": [1, 2], "members": [["G1", "G2"], ["G3"]], "annotation": ["shared", ""]})
    ds = dataset_from_responses(responses(), ["de", "gse_gene"], {"dataset_id": "t"}, clusters={"gse_gene": clusters})
    gse = ds["solution"][ds["solution"]["subtask"] == "gse_gene"]
    # Only annotated clusters are test items (appendix A.1); they have an annotation and no label.
    assert list(gse.index) == ["gse_gene:1"] and gse["annotation"].tolist() == ["shared"] and np.isnan(gse["label"]).all()
    with pytest.raises(ValueError, match="needs its clusters"):
        dataset_from_responses(responses(), ["gse_pert"], {"dataset_id": "t"})
    with pytest.raises(ValueError, match=r"k562_set\.yaml: the screen declares no files\.gse_gene"):
        perturbqa_dataset(RAW, screen("k562_set"), ["gse_gene"], "t")


def test_perturbqa_dataset_from_the_published_subset():
    ds = perturbqa_dataset(RAW, screen("k562_set"), ["de"], "k562_set_de")
    assert ds["uns"]["cell_line"] == "K562" and ds["uns"]["downstream_type"] == "gene_set"
    assert ds["uns"]["dataset_name"] == "K562-set DE" and "expression programs" in ds["uns"]["dataset_description"]
    assert ds["uns"]["dataset_reference"] == "10.48550/arXiv.2502.21290; 10.1016/j.cell.2022.05.013"
    assert set(ds["test"]["gene"]) <= set(ds["sets"]["set_name"])
    assert not set(ds["train"]["pert"]) & set(ds["test"]["pert"])  # unseen perturbations
    with pytest.raises(ValueError, match="subtasks must be among"):
        perturbqa_dataset(RAW, screen("k562"), ["ranking"], "t")


def test_a_subtask_without_items_is_an_error_naming_the_file():
    no_test = responses().assign(split="train")
    with pytest.raises(ValueError, match=r"k562-dir\.csv: no test items for subtask dir"):
        dataset_from_responses(no_test, ["dir"], {"dataset_id": "t"}, sources={"dir": "k562-dir.csv"})
    unannotated = pd.DataFrame({"cluster": [1], "members": [["G1"]], "annotation": [""]})
    with pytest.raises(ValueError, match=r"gse\.json: no test items for subtask gse_gene \(no annotated cluster\)"):
        dataset_from_responses(responses(), ["gse_gene"], {"dataset_id": "t"}, clusters={"gse_gene": unannotated},
                               sources={"gse_gene": "gse.json"})
    with pytest.raises(ValueError, match="screen.h5ad: no training pairs"):
        dataset_from_responses(responses().assign(split="test"), ["de"], {"dataset_id": "t"}, sources={"de": "screen.h5ad"})


def test_dataset_labels_are_short():
    assert dataset_label("K562", ["de"]) == "K562 DE" and dataset_label("RPE1", ["dir"]) == "RPE1 direction"
    assert dataset_label("K562", ["gse_pert"]) == "K562 pert clusters"
    assert dataset_label("K562", ["de", "gse_gene", "gse_pert"]) == "K562: de+gse_gene+gse_pert"
    assert dataset_label("twelve chars", ["dir", "gse_gene", "gse_pert"]) == "twelve chars: 3 subtasks"
    for name in ("k562", "rpe1", "k562_set"):
        for subtasks in (["de"], ["dir"], ["gse_gene"], ["gse_pert"], ["dir", "gse_gene", "gse_pert"]):
            assert len(dataset_label(screen(name).label, subtasks)) <= MAX_DATASET_LABEL
    with pytest.raises(ValueError, match="too long"):
        dataset_label("a label far too long for any header", ["de", "gse_gene"])


def test_screen_metadata():
    sentence = "RPE1 cells are a non-cancerous cell line."
    uns = screen_metadata("screen_de", "/data/replogle_rpe1.h5ad", ["de"], "RPE1", sentence)
    assert uns["dataset_name"] == "RPE1 DE" and "replogle_rpe1.h5ad" in uns["dataset_summary"]
    assert uns["cell_line"] == "RPE1" and uns["cell_line_description"] == sentence
    assert uns["dataset_license"].endswith(KNOWLEDGE_LICENSE) and uns["downstream_type"] == "gene"
    with pytest.raises(ValueError, match="s.h5ad: a screen needs its cell line and the sentence"):
        screen_metadata("x", "s.h5ad", ["de"], "HeLa", " ")


def labelled_items():
    """Test pairs of a de subtask: A changes many genes (many items), B and C few."""
    from perturbqa_lib.task_items import pair_items

    pairs = pd.DataFrame({"pert": ["A"] * 6 + ["B"] * 2 + ["C"] * 3,
                          "gene": ["g1", "g2", "g3", "g4", "g5", "g6", "g1", "g2", "g1", "g3", "g7"]})
    return pair_items(pairs, "de")


def test_decoys_give_every_perturbation_as_many_items():
    items = labelled_items()
    padded = pad_with_decoys(items, seed=0)
    assert padded.groupby("pert").size().tolist() == [6, 6, 6]
    assert padded.index.is_unique and items.index.isin(padded.index).all()
    decoys = padded.drop(items.index)
    assert len(decoys) == 7 and (decoys["subtask"] == "de").all() and (decoys["members"] == "").all()
    # A decoy's gene is a labelled gene of the subtask, never one of its own perturbation's.
    assert set(decoys["gene"]) <= set(items["gene"])
    for pert, group in decoys.groupby("pert"):
        assert not set(group["gene"]) & set(items.loc[items["pert"] == pert, "gene"])
    assert padded.equals(pad_with_decoys(items, seed=0)) and not padded.equals(pad_with_decoys(items, seed=1))
    # Already balanced: nothing to add.
    assert pad_with_decoys(padded, seed=0).equals(padded)
    assert pad_with_decoys(items, seed=0, items_per_perturbation=7).groupby("pert").size().tolist() == [7, 7, 7]
    with pytest.raises(ValueError, match="labelled items are never dropped"):
        pad_with_decoys(items, items_per_perturbation=5)
    with pytest.raises(ValueError, match="name only 7 genes"):
        pad_with_decoys(items, items_per_perturbation=8)
    with pytest.raises(ValueError, match="listed twice"):
        pad_with_decoys(pd.concat([items, items.iloc[:1]]))
    with pytest.raises(ValueError, match="one pair subtask"):
        pad_with_decoys(items.assign(subtask="gse_gene"))


def test_decoy_genes_follow_the_labelled_genes_frequency():
    from perturbqa_lib.task_items import pair_items

    rng = np.random.default_rng(0)
    # 200 perturbations; gene "common" is an item of half of them, 300 rare genes of few each.
    perts, genes = [], []
    for i in range(200):
        own = list(rng.choice([f"r{j}" for j in range(300)], size=int(rng.integers(2, 12)), replace=False))
        if i % 2 == 0:
            own.append("common")
        perts += [f"P{i}"] * len(own)
        genes += own
    items = pair_items(pd.DataFrame({"pert": perts, "gene": genes}), "de")
    decoys = pad_with_decoys(items, seed=0).drop(items.index)
    # "common" is 100 of about 1,400 labelled items: a decoy is "common" about 7% of the time where it
    # may be (perturbations without it), against 0.3% for a uniform draw over the 301 genes.
    can_draw = ~decoys["pert"].isin(items.loc[items["gene"] == "common", "pert"])
    decoy_share = (decoys.loc[can_draw, "gene"] == "common").mean()
    labelled_share = (items["gene"] == "common").mean()
    assert 0.5 * labelled_share < decoy_share < 2 * labelled_share


def test_dataset_pads_the_test_file_not_the_solution():
    r = pd.concat([responses(), pd.DataFrame({"pert": ["D"] * 3, "gene": ["x", "y", "z"], "split": "test",
                                               "response": ["up", "down", "unchanged"]})], ignore_index=True)
    ds = dataset_from_responses(r, ["de"], {"dataset_id": "t"}, seed=0)
    test, sol = ds["test"], ds["solution"]
    assert test.groupby("pert").size().to_dict() == {"C": 3, "D": 3}
    assert ds["uns"]["n_decoy_items"] == 1 and len(sol) == 5 and sol.index.isin(test.index).all()
    assert list(test.index) == sorted(test.index)  # sorted by pair: the order marks no decoy
    assert "of which 1 unlabelled decoy pairs" in ds["uns"]["dataset_description"]
    assert set(test.index) - set(sol.index) == {"de:C:z"}  # z: the only labelled gene C lacks
    ds = dataset_from_responses(r, ["dir"], {"dataset_id": "t"}, seed=0)
    # dir: C's one DE gene (x) gets one decoy among the others' DE genes (D's x and y), never x.
    assert ds["test"].groupby("pert").size().to_dict() == {"C": 2, "D": 2}
    assert set(ds["test"].index) - set(ds["solution"].index) == {"dir:C:y"}


@pytest.mark.skipif(not (SHARED_DATA / "perturbqa").is_dir(), reason="the shared PerturbQA data is not present")
@pytest.mark.parametrize("screen_name,subtask,growth", [("k562", "de", 1.2), ("rpe1", "dir", 1.5)])
def test_published_test_files_are_balanced_and_small(screen_name, subtask, growth):
    ds = perturbqa_dataset(SHARED_DATA / "perturbqa", screen(screen_name), [subtask], "t")
    counts = ds["test"].groupby("pert").size()
    assert counts.nunique() == 1 and len(ds["test"]) <= growth * len(ds["solution"])
    assert ds["uns"]["n_decoy_items"] == len(ds["test"]) - len(ds["solution"]) > 0
