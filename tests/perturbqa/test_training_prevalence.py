"""perturbqa_lib.training_prevalence: each gene's training prevalence, and the control's scores."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from perturbqa_lib.dataset_assembly import dataset_from_responses
from perturbqa_lib.training_prevalence import gene_prevalence, prevalence_scores


def test_gene_prevalence_and_scores():
    responses = pd.DataFrame({"pert": ["A", "A", "B", "C", "C", "C"], "gene": ["x", "y", "x", "x", "y", "z"],
                              "split": ["train", "train", "train", "test", "test", "test"],
                              "response": ["up", "unchanged", "down", "up", "unchanged", "down"]})
    ds = dataset_from_responses(responses, ["de"], {"dataset_id": "t"})
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
