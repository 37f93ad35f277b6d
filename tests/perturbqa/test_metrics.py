"""The AUROC metric equals independent computations on the real test splits: per gene from its definition, pooled by sklearn."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from perturbqa_lib.dataset_assembly import perturbqa_dataset
from perturbqa_lib.dataset_files import prediction_frame
from perturbqa_lib.screen_manifest import read_screen_manifest
from project_paths import SHARED_DATA
from sklearn.metrics import roc_auc_score

from openpert.config.viash import find_project_root, read_config
from openpert.run.component import run_component

ROOT = find_project_root(__import__("pathlib").Path(__file__).resolve())
needs_data = pytest.mark.skipif(not (SHARED_DATA / "perturbqa").is_dir(),
                                reason="the shared PerturbQA data (../shared/data/perturbqa) is not present")


def pairwise_auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    """AUROC from its definition: the fraction of (positive, negative) pairs the scores order, ties one half.

    Independent of the metric's rank formula, and cheap enough for every gene of a real split
    (sklearn's roc_auc_score, called once per gene, took seconds there).
    """
    pos, neg = scores[labels == 1], scores[labels == 0]
    diff = pos[:, None] - neg[None, :]
    return float((2 * np.count_nonzero(diff > 0) + np.count_nonzero(diff == 0)) / (2 * diff.size))


def run_auroc(tmp_path, solution: pd.DataFrame, uns: dict, scores: pd.Series) -> ad.AnnData:
    sol_path, pred_path = tmp_path / "solution.h5ad", tmp_path / "prediction.h5ad"
    ad.AnnData(obs=solution, uns={"dataset_id": uns["dataset_id"], "subtask": uns["subtask"]}).write_h5ad(sol_path)
    ad.AnnData(obs=prediction_frame(solution, scores), uns={"dataset_id": uns["dataset_id"], "method_id": "m"}).write_h5ad(pred_path)
    config = read_config(ROOT / "src/perturbqa/metrics/auroc/config.vsh.yaml")
    result = run_component(config, {"input_solution": sol_path, "input_prediction": pred_path, "output": tmp_path / "score.h5ad"},
                           work_dir=tmp_path / "work")
    assert result.succeeded, result.log.read_text()
    return ad.read_h5ad(tmp_path / "score.h5ad")


@needs_data
@pytest.mark.parametrize("screen,subtask", [("k562", "de"), ("rpe1", "dir")])
def test_macro_auroc_equals_its_definition_and_sklearn_on_real_split(tmp_path, screen, subtask):
    manifest = read_screen_manifest(ROOT / "src/perturbqa/datasets/perturbqa/screens" / f"{screen}.yaml")
    ds = perturbqa_dataset(SHARED_DATA / "perturbqa", manifest, [subtask], f"{screen}_{subtask}")
    sol = ds["solution"]
    rng = np.random.default_rng(0)
    # Informative but noisy scores, rounded to make ties (ties count one half in both computations).
    scores = pd.Series(np.round(sol["label"].to_numpy() * 0.3 + rng.random(len(sol)), 1), index=sol.index)
    score = run_auroc(tmp_path, sol, ds["uns"], scores)
    expected = {}
    labels, values = sol["label"].to_numpy(), scores.to_numpy()
    for gene, rows in sol.groupby("gene").indices.items():
        y = labels[rows]
        if 0 < y.sum() < len(y):
            expected[gene] = pairwise_auroc(y, values[rows])
    per_gene = score.obs["macro_auroc"]
    assert len(expected) > 100 and set(per_gene.index) == set(expected)
    np.testing.assert_allclose(per_gene[list(expected)].to_numpy(), list(expected.values()), rtol=1e-12)
    values = dict(zip(score.uns["metric_ids"], score.uns["metric_values"]))
    assert values["macro_auroc"] == pytest.approx(np.mean(list(expected.values())), rel=1e-12)
    assert values["pooled_auroc"] == pytest.approx(roc_auc_score(sol["label"], scores), rel=1e-12)


#: Two genes of two pairs each.
TWO_GENES = pd.DataFrame({"subtask": "de", "pert": ["A", "B", "C", "D"], "gene": ["x", "x", "y", "y"],
                          "label": [1.0, 0.0, 1.0, 0.0], "annotation": ""}, index=[f"de:{p}" for p in "ABCD"])
TWO_GENES_UNS = {"dataset_id": "t", "subtask": "de"}
#: Scores that order gene x's pairs right and gene y's wrong.
TWO_GENES_SCORES = pd.Series([0.9, 0.1, 0.2, 0.8], index=TWO_GENES.index)


@pytest.fixture(scope="module")
def two_genes_score(tmp_path_factory) -> ad.AnnData:
    """The metric's scores of TWO_GENES_SCORES, which two tests read."""
    return run_auroc(tmp_path_factory.mktemp("two_genes"), TWO_GENES, TWO_GENES_UNS, TWO_GENES_SCORES)


def test_auroc_not_applicable_and_partial_scores(tmp_path, two_genes_score):
    sol = TWO_GENES
    for sub in "ac":
        (tmp_path / sub).mkdir()
    # A method that gives no pair any score does not address the subtask: NaN, not a guess.
    score = run_auroc(tmp_path / "a", sol, TWO_GENES_UNS, pd.Series(np.nan, index=sol.index))
    assert np.isnan(score.uns["metric_values"]).all() and score.n_obs == 0
    # gene x: AUROC 1, gene y: 0 -> macro 0.5; pooled: 3 of the 4 positive-negative pairs are ordered.
    assert list(two_genes_score.uns["metric_values"]) == [0.5, 0.75]
    with pytest.raises(AssertionError, match="have no score"):
        run_auroc(tmp_path / "c", sol, TWO_GENES_UNS, pd.Series([0.9, np.nan, 0.2, 0.8], index=sol.index))


def test_auroc_ignores_items_the_solution_lacks(tmp_path, two_genes_score):
    """Decoy pairs of the test file are scored by the method but never by the metric."""
    sol, uns, plain = TWO_GENES, TWO_GENES_UNS, two_genes_score
    test = pd.concat([sol, pd.DataFrame({"subtask": "de", "pert": ["A", "C"], "gene": ["y", "x"]},
                                        index=["de:A:y", "de:C:x"])])
    sol_path, pred_path = tmp_path / "solution.h5ad", tmp_path / "prediction.h5ad"
    ad.AnnData(obs=sol, uns=uns).write_h5ad(sol_path)
    scores = pd.concat([TWO_GENES_SCORES, pd.Series([100.0, -100.0], index=["de:A:y", "de:C:x"])])  # extreme decoy scores
    ad.AnnData(obs=prediction_frame(test, scores), uns={"dataset_id": "t", "method_id": "m"}).write_h5ad(pred_path)
    config = read_config(ROOT / "src/perturbqa/metrics/auroc/config.vsh.yaml")
    result = run_component(config, {"input_solution": sol_path, "input_prediction": pred_path, "output": tmp_path / "score.h5ad"},
                           work_dir=tmp_path / "work")
    assert result.succeeded, result.log.read_text()
    padded = ad.read_h5ad(tmp_path / "score.h5ad")
    np.testing.assert_array_equal(padded.uns["metric_values"], plain.uns["metric_values"])
    assert padded.uns["metric_values"][0] == pytest.approx(0.5)  # x: 1.0, y: 0.0
