"""perturbqa_lib.label_pipeline: the labels of appendix A.2 on a synthetic screen, and the 75:25 split."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from perturbqa_lib.label_pipeline import perturbation_labels, split_perturbations
from perturbqa_lib.synthetic_screen import synthetic_perturbseq

from pertsci.normalisation import normalize_log_tp10k


@pytest.fixture(scope="module")
def screen():
    rng = np.random.default_rng(0)
    n_genes = 120
    symbols = [f"G{j}" for j in range(n_genes)]
    frac = rng.lognormal(-7, 1.0, n_genes)
    return synthetic_perturbseq([f"ENSG{j:011d}" for j in range(n_genes)], symbols, frac,
                                np.full(n_genes, 5.0), [f"G{j}" for j in range(12)] + ["NOTMEASURED"],
                                n_cells=2600, control_fraction=0.25, umis_per_cell=20000, effect_fraction=0.6, seed=1)


def test_label_pipeline_recovers_simulated_effects(screen):
    X = normalize_log_tp10k(screen.X)
    labels, summary = perturbation_labels(X, screen.obs["gene"].astype(str).to_numpy(), screen.var["gene_name"],
                                          n_negative_perturbations=2, n_negatives=30, seed=0)
    truth = screen.uns["true_effects"]
    true_pairs = set(zip(truth["pert"], truth["gene"]))
    de = labels[labels["response"] != "unchanged"]
    # Positives are simulated effects; negatives almost never are.
    precision = np.mean([(p, g) in true_pairs for p, g in zip(de["pert"], de["gene"])])
    assert len(de) > 30 and precision > 0.9
    neg = labels[labels["response"] == "unchanged"]
    assert np.mean([(p, g) in true_pairs for p, g in zip(neg["pert"], neg["gene"])]) < 0.1
    # Direction follows the sign of the simulated log fold change.
    lfc = truth.set_index(["pert", "gene"])["log2fc"]
    hits = [(r.response == "up") == (lfc[(r.pert, r.gene)] > 0) for r in de.itertuples() if (r.pert, r.gene) in lfc.index]
    assert np.mean(hits) > 0.95
    # Rules of appendix A.2: <= 20 positives, never the target itself, dropped perturbations had < 5 DEGs.
    assert de.groupby("pert").size().max() <= 20
    assert not (labels["pert"] == labels["gene"]).any()
    assert (summary.loc[~summary["kept"], "n_degs"] < 5).all()
    kept_without = summary[summary["kept"] & (summary["n_degs"] < 5)]
    assert (kept_without["n_degs"] == 0).all() and len(kept_without) <= 2


def test_split_is_75_25_with_similar_deg_counts():
    rng = np.random.default_rng(0)
    n_degs = pd.Series(rng.integers(0, 60, 400), index=[f"p{i}" for i in range(400)])
    split = split_perturbations(n_degs, 0.25, seed=0)
    assert (split == "test").sum() == 100
    test, train = n_degs[split == "test"], n_degs[split == "train"]
    assert abs(test.median() - train.median()) <= 3 and abs(test.mean() - train.mean()) < 2
    assert split.equals(split_perturbations(n_degs, 0.25, seed=0))
    with pytest.raises(ValueError, match="test_fraction"):
        split_perturbations(n_degs, 1.0)
