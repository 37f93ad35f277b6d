"""perturbqa_lib.synthetic_screen: the simulated screen's layout, knockdowns and recorded effects."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from perturbqa_lib.synthetic_screen import read_basal_baseline, synthetic_perturbseq


def test_screen_layout_knockdown_and_truth():
    n_genes = 50
    symbols = [f"G{j}" for j in range(n_genes)]
    frac = np.full(n_genes, 1.0 / n_genes)
    adata = synthetic_perturbseq([f"ENSG{j:011d}" for j in range(n_genes)], symbols, frac, np.full(n_genes, 50.0),
                                 ["G0", "G1", "ABSENT"], n_cells=3000, control_fraction=0.3, umis_per_cell=5000,
                                 effect_fraction=1.0, seed=0)
    assert adata.shape == (3000, n_genes) and list(adata.var["gene_name"]) == symbols
    assert adata.var_names[0] == "ENSG00000000000"
    assert set(adata.obs["gene"]) == {"non-targeting", "G0", "G1", "ABSENT"}
    assert abs((adata.obs["gene"] == "non-targeting").mean() - 0.3) < 0.03
    X = adata.X.toarray()
    assert np.array_equal(X, np.round(X)) and (X >= 0).all()
    control = X[(adata.obs["gene"] == "non-targeting").to_numpy()].mean(axis=0)
    knocked = X[(adata.obs["gene"] == "G0").to_numpy()].mean(axis=0)
    # The target falls to about 15% of its level (knockdown=0.15), library sizes being equal in distribution.
    assert 0.08 < knocked[0] / control[0] < 0.25
    truth = adata.uns["true_effects"]
    assert set(truth["pert"]) == {"G0", "G1", "ABSENT"} and (truth["log2fc"].abs() >= 0.5).all()
    assert not (truth["pert"] == truth["gene"]).any()
    assert truth.groupby("pert").size().between(5, 40).all()
    again = synthetic_perturbseq([f"ENSG{j:011d}" for j in range(n_genes)], symbols, frac, np.full(n_genes, 50.0),
                                 ["G0", "G1", "ABSENT"], n_cells=3000, control_fraction=0.3, umis_per_cell=5000,
                                 effect_fraction=1.0, seed=0)
    assert (again.X != adata.X).nnz == 0
    with pytest.raises(ValueError, match="one entry per gene"):
        synthetic_perturbseq(["E1", "E2"], ["G1"], np.ones(2), np.ones(2), ["G1"])


def test_read_basal_baseline(tmp_path):
    path = tmp_path / "baseline.tsv"
    pd.DataFrame({"response_id": ["E1", "E2", "E1"], "relative_expression": [0.1, 0.2, 0.3],
                  "expression_size": [1.0, 2.0, 3.0]}).to_csv(path, sep="\t", index=False)
    baseline = read_basal_baseline(path)
    assert list(baseline.index) == ["E1", "E2"] and baseline.loc["E1", "relative_expression"] == 0.1
    pd.DataFrame({"response_id": ["E1"]}).to_csv(path, sep="\t", index=False)
    with pytest.raises(ValueError, match=r"baseline\.tsv: expected columns"):
        read_basal_baseline(path)
