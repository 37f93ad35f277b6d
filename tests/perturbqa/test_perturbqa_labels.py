"""perturbqa_lib.labels: published-file readers, the label pipeline on a synthetic screen, the split."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from perturbqa_lib.labels import (
    dataset_from_responses,
    gene_prevalence,
    perturbation_labels,
    prediction_frame,
    read_clusters_json,
    read_label_csv,
    responses_from_labels,
    split_perturbations,
    subtask_labels,
    synthetic_perturbseq,
)

from pertsci.normalisation import normalize_log_tp10k


def write_csv(path, rows):
    pd.DataFrame(rows, columns=["pert", "gene", "label", "split"]).to_csv(path, index=False)
    return path


def test_read_label_csv_checks(tmp_path):
    good = write_csv(tmp_path / "ok.csv", [("A", "x", 1, "train"), ("A", "y", 0, "train"), ("B", "x", 0, "test")])
    assert len(read_label_csv(good)) == 3
    with pytest.raises(ValueError, match="label must be 0 or 1"):
        read_label_csv(write_csv(tmp_path / "a.csv", [("A", "x", 2, "train")]))
    with pytest.raises(ValueError, match="duplicated"):
        read_label_csv(write_csv(tmp_path / "b.csv", [("A", "x", 1, "train"), ("A", "x", 0, "train")]))
    with pytest.raises(ValueError, match="both splits"):
        read_label_csv(write_csv(tmp_path / "c.csv", [("A", "x", 1, "train"), ("A", "y", 0, "test")]))
    pd.DataFrame({"pert": ["A"], "gene": ["x"]}).to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ValueError, match=r"d\.csv: missing column"):
        read_label_csv(tmp_path / "d.csv")


def test_responses_and_subtask_labels(tmp_path):
    de = read_label_csv(write_csv(tmp_path / "de.csv", [("A", "x", 1, "train"), ("A", "y", 0, "train"), ("A", "z", 1, "train")]))
    direction = read_label_csv(write_csv(tmp_path / "dir.csv", [("A", "x", 1, "train"), ("A", "z", 0, "train")]))
    r = responses_from_labels(de, direction)
    assert list(r["response"]) == ["up", "unchanged", "down"]
    mask, y = subtask_labels(r["response"], "dir")
    assert list(mask) == [True, False, True] and list(y) == [1, 0]
    with pytest.raises(ValueError, match="not differentially expressed"):
        bad = read_label_csv(write_csv(tmp_path / "bad.csv", [("A", "y", 1, "train")]))
        responses_from_labels(de, bad)


def test_dataset_never_mixes_de_and_dir_and_prevalence():
    responses = pd.DataFrame({"pert": ["A", "A", "B", "C", "C"], "gene": ["x", "y", "x", "x", "y"],
                              "split": ["train", "train", "train", "test", "test"],
                              "response": ["up", "unchanged", "down", "up", "unchanged"]})
    with pytest.raises(ValueError, match="cannot share"):
        dataset_from_responses(responses, ["de", "dir"], {"dataset_id": "t"})
    ds = dataset_from_responses(responses, ["dir"], {"dataset_id": "t"})
    assert list(ds["test"].index) == ["dir:C:x"] and ds["solution"]["label"].tolist() == [1.0]
    per_gene, overall = gene_prevalence(ds["train"], "de")
    assert per_gene["x"] == 1.0 and per_gene["y"] == 0.0 and overall == pytest.approx(2 / 3)
    pred = prediction_frame(ds["test"], scores={"dir:C:x": 0.3})
    assert pred.loc["dir:C:x", "score"] == 0.3 and pred.loc["dir:C:x", "text"] == ""


def test_read_clusters_json(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('[{"genes": ["A", "B"], "label": "x"}, {"genes": ["C"], "label": null}]')
    c = read_clusters_json(path)
    assert c["annotation"].tolist() == ["x", ""] and c["members"][0] == ["A", "B"]
    path.write_text('[{"genes": [], "label": "x"}]')
    with pytest.raises(ValueError, match="cluster 1"):
        read_clusters_json(path)


def test_normalize_log_tp10k():
    counts = sp.csr_matrix(np.array([[1.0, 3.0, 0.0], [0.0, 0.0, 0.0], [2.0, 2.0, 6.0]]))
    X = normalize_log_tp10k(counts).toarray()
    np.testing.assert_allclose(X[0], np.log1p([2500.0, 7500.0, 0.0]), rtol=1e-6)
    assert (X[1] == 0).all()


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
