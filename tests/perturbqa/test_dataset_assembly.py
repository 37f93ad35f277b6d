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
    perturbqa_dataset,
    scored_cross,
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
    """Two training perturbations; test perturbations C, D (x, y, z each) and E (y only)."""
    test = [("C", "x", "up"), ("C", "y", "unchanged"), ("C", "z", "down"), ("D", "x", "down"), ("D", "y", "up"),
            ("D", "z", "unchanged"), ("E", "y", "unchanged")]
    return pd.DataFrame([("A", "x", "train", "up"), ("A", "y", "train", "unchanged"), ("B", "x", "train", "down")]
                        + [(p, g, "test", r) for p, g, r in test], columns=["pert", "gene", "split", "response"])


def test_dataset_never_mixes_de_and_dir():
    with pytest.raises(ValueError, match="cannot share"):
        dataset_from_responses(responses(), ["de", "dir"], {"dataset_id": "t"})
    # dir: only x is up for one test perturbation and down for another; y (up once) and z (down
    # once) cannot be scored and are left out.
    ds = dataset_from_responses(responses(), ["dir"], {"dataset_id": "t"})
    assert list(ds["test"].index) == ["dir:C:x", "dir:D:x"] and ds["solution"]["label"].tolist() == [1.0, 0.0]
    assert list(ds["train"].index) == ["A:x", "A:y", "B:x"] and ds["uns"]["subtask"] == "dir"
    assert ds["uns"]["n_decoy_items"] == 0 and ds["uns"]["n_unscored_pairs"] == 2
    # de: x is DE for both C and D (one class: left out); y and z have both classes. Every test
    # perturbation gets y and z, so E gets an unlabelled z.
    ds = dataset_from_responses(responses(), ["de"], {"dataset_id": "t"})
    assert list(ds["test"].index) == ["de:C:y", "de:C:z", "de:D:y", "de:D:z", "de:E:y", "de:E:z"]
    assert list(ds["solution"].index) == ["de:C:y", "de:C:z", "de:D:y", "de:D:z", "de:E:y"]
    assert ds["solution"]["label"].tolist() == [0.0, 1.0, 1.0, 0.0, 0.0]
    assert ds["uns"]["n_decoy_items"] == 1 and ds["uns"]["n_unscored_pairs"] == 2
    description = ds["uns"]["dataset_description"]
    assert "6 test items (de), every test perturbation with every gene macro AUROC scores, 1 of them unlabelled" in description
    assert "2 labelled test pairs of genes with one class only" in description


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
    one_class = responses().query("split == 'train' or pert == 'C'")  # C alone: every gene has one class
    with pytest.raises(ValueError, match=r"k562-de\.csv: no downstream gene of subtask de has both labels"):
        dataset_from_responses(one_class, ["de"], {"dataset_id": "t"}, sources={"de": "k562-de.csv"})


def test_dataset_labels_are_short():
    assert dataset_label("K562", ["de"]) == "K562 DE" and dataset_label("RPE1", ["dir"]) == "RPE1 direction"
    assert dataset_label("K562", ["gse_pert"]) == "K562 pert clusters"
    assert dataset_label("K562", ["de", "gse_gene", "gse_pert"]) == "K562 DE, gene sets, pert sets"
    assert dataset_label("twelve chars", ["dir", "gse_gene", "gse_pert"]) == "twelve chars, 3 subtasks"
    # Never an id: a label shows words, not "gse_gene".
    assert "_" not in dataset_label("RPE1", ["dir", "gse_gene"])
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
    labels = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1])
    return pair_items(pairs, "de"), labels


def test_scored_cross_names_the_same_genes_for_every_perturbation():
    items, labels = labelled_items()
    cross, kept = scored_cross(items, labels)
    # g1 (1, 0, 0) and g2 (1, 0) have both classes; g3 (1, 0) too; g4-g7 one class each.
    assert kept.tolist() == [True, True, True, False, False, False, True, True, True, True, False]
    assert cross.groupby("pert")["gene"].apply(list).to_dict() == {p: ["g1", "g2", "g3"] for p in "ABC"}
    assert list(cross.index) == sorted(cross.index) and (cross["subtask"] == "de").all() and (cross["members"] == "").all()
    assert items.index[kept].isin(cross.index).all() and len(cross) == 9
    with pytest.raises(ValueError, match="listed twice"):
        scored_cross(pd.concat([items, items.iloc[:1]]), np.append(labels, 1))
    with pytest.raises(ValueError, match="one pair subtask"):
        scored_cross(items.assign(subtask="gse_gene"), labels)
    with pytest.raises(ValueError, match="11 labels for 10 items"):
        scored_cross(items.iloc[:10], labels)
    with pytest.raises(ValueError, match="no downstream gene of subtask de has both labels"):
        scored_cross(items, np.ones(len(items)))


def test_the_cross_hides_what_the_published_sampling_reveals():
    """Strong knockdowns list the genes that often respond; the labelled pairs alone give that away."""
    from perturbqa_lib.task_items import pair_items, subtask_labels
    from perturbqa_lib.training_prevalence import item_composition_scores, macro_auroc, perturbation_item_share

    rng = np.random.default_rng(0)
    genes = [f"g{i}" for i in range(60)]
    responsive = np.linspace(0.9, 0.05, len(genes))  # g0 responds most often
    rows = []
    for i in range(160):
        strength = rng.uniform(0.02, 0.4)
        changed = rng.random(len(genes)) < strength * responsive
        positives = [g for g, c in zip(genes, changed) if c][:8]  # the top DE genes, as published
        negatives = list(rng.choice([g for g, c in zip(genes, changed) if not c], 6, replace=False))
        split = "test" if i % 4 == 0 else "train"
        rows += [(f"P{i}", g, split, "up") for g in positives] + [(f"P{i}", g, split, "unchanged") for g in negatives]
    responses = pd.DataFrame(rows, columns=["pert", "gene", "split", "response"])
    ds = dataset_from_responses(responses, ["de"], {"dataset_id": "t"})
    test_pairs = responses[responses["split"] == "test"]
    _, labels = subtask_labels(test_pairs["response"], "de")
    published = pair_items(test_pairs, "de")  # the labelled pairs alone
    sol = ds["solution"]

    def auroc(scores):
        return macro_auroc(sol["label"].to_numpy(), scores.reindex(sol.index).to_numpy(), sol["gene"].to_numpy())

    assert auroc(perturbation_item_share(published)) > 0.6  # weak knockdowns have fewer pairs
    assert auroc(perturbation_item_share(ds["test"])) == 0.5
    assert auroc(item_composition_scores(ds["train"], ds["test"])) == 0.5
    assert len(sol) == int(scored_cross(published, np.asarray(labels))[1].sum())


@pytest.mark.skipif(not (SHARED_DATA / "perturbqa").is_dir(), reason="the shared PerturbQA data is not present")
@pytest.mark.parametrize("screen_name,subtask,n_items,growth", [("k562", "de", 177_555, 7.6), ("rpe1", "dir", 73_533, 13.7)])
def test_published_test_files_cross_the_scored_genes(screen_name, subtask, n_items, growth):
    ds = perturbqa_dataset(SHARED_DATA / "perturbqa", screen(screen_name), [subtask], "t")
    test, sol = ds["test"], ds["solution"]
    genes = test.groupby("pert")["gene"].apply(frozenset)
    assert genes.nunique() == 1 and len(test) == n_items == test["pert"].nunique() * test["gene"].nunique()
    classes = sol.groupby("gene")["label"].agg(["min", "max"])
    assert set(classes.index) == set(test["gene"]) and (classes["min"] == 0).all() and (classes["max"] == 1).all()
    published = len(sol) + ds["uns"]["n_unscored_pairs"]
    assert len(test) / published == pytest.approx(growth, abs=0.05)
    assert ds["uns"]["n_decoy_items"] == len(test) - len(sol) > 0
    # The item-composition control, 0.798 (K562 dir) on the labelled pairs alone, finds nothing.
    from perturbqa_lib.training_prevalence import item_composition_scores, macro_auroc

    scores = item_composition_scores(ds["train"], test).reindex(sol.index).to_numpy()
    assert macro_auroc(sol["label"].to_numpy(), scores, sol["gene"].to_numpy()) == 0.5
