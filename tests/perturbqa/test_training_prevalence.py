"""perturbqa_lib.training_prevalence: each gene's training prevalence, and the control's scores."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from perturbqa_lib.dataset_assembly import training_obs
from perturbqa_lib.task_items import pair_items
from perturbqa_lib.training_prevalence import gene_prevalence, prevalence_scores


def published_design(responses: pd.DataFrame) -> dict:
    """Training pairs as a dataset has them, and the labelled de test pairs alone as test items.

    The datasets cross every test perturbation with the same genes, under which the controls
    that read a perturbation's items are constant; the published design (the labelled pairs
    alone) is where they have something to find.
    """
    return {"train": training_obs(responses[responses["split"] == "train"]),
            "test": pair_items(responses[responses["split"] == "test"], "de")}


def test_gene_prevalence_and_scores():
    responses = pd.DataFrame({"pert": ["A", "A", "B", "C", "C", "C"], "gene": ["x", "y", "x", "x", "y", "z"],
                              "split": ["train", "train", "train", "test", "test", "test"],
                              "response": ["up", "unchanged", "down", "up", "unchanged", "down"]})
    ds = published_design(responses)
    per_gene, overall = gene_prevalence(ds["train"], "de")
    assert per_gene["x"] == 1.0 and per_gene["y"] == 0.0 and overall == pytest.approx(2 / 3)
    per_gene, overall = gene_prevalence(ds["train"], "dir")
    assert per_gene["x"] == 0.5 and overall == 0.5
    scores = prevalence_scores(ds["train"], ds["test"])
    # z was never measured in training: the prevalence over all training pairs.
    assert scores.tolist() == pytest.approx([1.0, 0.0, 2 / 3])
    items = pd.concat([ds["test"], pd.DataFrame({"subtask": ["gse_gene"], "pert": [""], "gene": [""], "members": ["x;y"]},
                                                index=["gse_gene:1"])])
    assert np.isnan(prevalence_scores(ds["train"], items)["gse_gene:1"])


def test_perturbation_item_share_follows_the_test_file():
    from perturbqa_lib.training_prevalence import perturbation_item_share

    items = pd.DataFrame({"subtask": ["de", "de", "de", "dir", "gse_gene"], "pert": ["A", "A", "B", "B", ""],
                          "gene": ["x", "y", "x", "x", ""], "members": ["", "", "", "", "x;y"]},
                         index=["de:A:x", "de:A:y", "de:B:x", "dir:B:x", "gse_gene:1"])
    scores = perturbation_item_share(items)
    assert scores[["de:A:x", "de:A:y", "de:B:x", "dir:B:x"]].tolist() == [1.0, 1.0, 0.5, 1.0]
    assert np.isnan(scores["gse_gene:1"])


def test_macro_auroc_equals_sklearn_per_group():
    from perturbqa_lib.training_prevalence import macro_auroc
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    labels, scores, groups = rng.integers(0, 2, 400), np.round(rng.random(400), 1), rng.integers(0, 15, 400)
    expected = [roc_auc_score(labels[groups == g], scores[groups == g]) for g in np.unique(groups)
                if 0 < labels[groups == g].sum() < (groups == g).sum()]
    assert macro_auroc(labels, scores, groups) == pytest.approx(np.mean(expected), rel=1e-12)
    assert np.isnan(macro_auroc(np.ones(3), np.arange(3.0), np.zeros(3)))


def random_screen(seed, strong_lists_rare_genes):
    """Training and test pairs where the genes a perturbation lists depend on how many it changes."""
    rng = np.random.default_rng(seed)
    common, rare = [f"c{i}" for i in range(10)], [f"r{i}" for i in range(30)]
    rows = []
    for i in range(60):
        strong = i % 2 == 0
        favoured = rare if strong == strong_lists_rare_genes else common
        genes = list(rng.choice(favoured, 6, replace=False)) + list(rng.choice(common + rare, 4, replace=False))
        for g in dict.fromkeys(genes):
            changed = rng.random() < (0.7 if strong else 0.2) * (1.5 if g.startswith("c") else 1.0)
            rows.append((f"P{i}", g, "train" if i < 45 else "test", "up" if changed else "unchanged"))
    return published_design(pd.DataFrame(rows, columns=["pert", "gene", "split", "response"]))


@pytest.mark.parametrize("strong_lists_rare_genes", [True, False])
def test_item_composition_is_constant_per_perturbation_and_signed_on_training(strong_lists_rare_genes):
    from perturbqa_lib.training_prevalence import item_composition_scores, macro_auroc

    ds = random_screen(0, strong_lists_rare_genes)
    test = ds["test"]
    scores = item_composition_scores(ds["train"], test)
    assert (scores.groupby(test["pert"]).nunique() == 1).all()
    per_gene, overall = gene_prevalence(ds["train"], "de")
    magnitude = test["gene"].map(per_gene).fillna(overall).groupby(test["pert"]).mean()
    np.testing.assert_allclose(scores.abs(), test["pert"].map(magnitude.abs()))
    # The sign is the one under which the statistic ranks the training pairs (leave one perturbation out).
    train = ds["train"].assign(label=(ds["train"]["response"] != "unchanged").astype(int))
    loo = {}
    for pert, own in train.groupby("pert"):
        others = train[train["pert"] != pert].groupby("gene")["label"].mean()
        loo[pert] = own["gene"].map(others).fillna(overall).mean()
    on_training = macro_auroc(train["label"], train["pert"].map(loo), train["gene"])
    sign = np.sign(scores.iloc[0]) * np.sign(magnitude[test["pert"].iloc[0]])
    assert sign == (1 if on_training >= 0.5 else -1)


def test_item_composition_flips_its_sign_when_training_says_so():
    from perturbqa_lib.training_prevalence import item_composition_scores

    # X knockdowns list the always-up genes h* and leave s unchanged; Y knockdowns list the
    # never-changed l* and change s. Across perturbations, s is DE where the statistic is low.
    rows = []
    for i in range(1, 6):
        split = "test" if i == 5 else "train"
        rows += [(f"X{i}", g, split, "up") for g in ("h1", "h2", "h3")] + [(f"X{i}", "s", split, "unchanged")]
        rows += [(f"Y{i}", g, split, "unchanged") for g in ("l1", "l2", "l3")] + [(f"Y{i}", "s", split, "up")]
    ds = published_design(pd.DataFrame(rows, columns=["pert", "gene", "split", "response"]))
    scores = item_composition_scores(ds["train"], ds["test"])
    assert scores["de:Y5:s"] > scores["de:X5:s"] and (scores < 0).all()
