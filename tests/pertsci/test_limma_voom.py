"""pertsci.limma_voom against R's limma/edgeR (the whole DE pipeline, lowess), and against first principles."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pertsci import edger, limma_ebayes, limma_voom, op3_processing, op3_simulation

R_SCRIPT = Path(__file__).with_name("limma_voom_reference.R")


def _r_limma_available() -> tuple[bool, str]:
    if shutil.which("Rscript") is None:
        return False, "Rscript not on PATH (apt-get install r-base-core r-bioc-limma r-bioc-edger r-cran-statmod)"
    probe = subprocess.run(["Rscript", "-e", "library(limma); library(edgeR); requireNamespace('statmod', quietly=TRUE) || quit(status=3)"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return False, f"R packages limma, edgeR or statmod missing: {probe.stderr.strip()[-200:]}"
    return True, ""


R_OK, R_REASON = _r_limma_available()
needs_r = pytest.mark.skipif(not R_OK, reason=R_REASON)


@pytest.fixture(scope="module")
def pseudobulk_case():
    """Pseudobulk counts of a small simulated screen (made-up names: no shared data needed)."""
    meta = op3_simulation.synthetic_metadata(n_genes=400, n_compounds=10, n_test_compounds=3, seed=3)
    sc = op3_simulation.simulate_op3(meta, n_donors=3, plates_per_donor=2, dmso_wells_per_plate=3, cells_per_well=60,
                                     mean_library_size=3000, n_mechanisms=6, seed=3)
    pb = op3_processing.pseudobulk(sc, min_cells=5)
    keep = op3_processing.filter_genes(pb)
    pb = pb[:, keep].copy()
    rows = op3_processing.row_table(pb, ["train", "control", "test"], op3_processing.CONTROL_COMPOUND)
    rows = op3_processing.estimable_rows(pb, rows)
    design, contrasts = op3_processing.design_and_contrasts(pb, rows)
    return sc, pb, rows, design, contrasts


@needs_r
def test_pipeline_agrees_with_r_limma(pseudobulk_case, tmp_path):
    """Same pseudobulk counts through R (edgeR + limma) and the port: the issue's agreement criteria."""
    _, pb, rows, design, contrasts = pseudobulk_case
    counts = np.asarray(pb.X).T
    genes = list(pb.var_names)
    samples = [f"s{i}" for i in range(pb.n_obs)]
    pd.DataFrame(counts, index=genes, columns=samples).to_csv(tmp_path / "counts.csv")
    coef_names = [f"c{j}" for j in range(design.shape[1])]
    pd.DataFrame(design.to_numpy(), index=samples, columns=coef_names).to_csv(tmp_path / "design.csv")
    pd.DataFrame(contrasts.toarray(), index=coef_names, columns=[f"k{j}" for j in range(contrasts.shape[1])]).to_csv(tmp_path / "contrasts.csv")
    res = subprocess.run(["Rscript", str(R_SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr

    de = op3_processing.limma_de(pb, rows)
    r_logfc = pd.read_csv(tmp_path / "r_logfc.csv", index_col=0).to_numpy().T
    r_p = pd.read_csv(tmp_path / "r_pvalue.csv", index_col=0).to_numpy().T
    py_logfc = de.layers["logFC"]
    py_p = de.layers["P.Value"]
    # The criteria ...
    rel = np.abs(py_logfc - r_logfc) / np.maximum(np.abs(r_logfc), 1e-12)
    assert np.median(rel) <= 1e-4
    tiny = np.finfo(float).tiny  # p-values underflowing to 0 count as the smallest double
    r = np.corrcoef(-np.log10(np.maximum(py_p, tiny)).ravel(), -np.log10(np.maximum(r_p, tiny)).ravel())[0, 1]
    assert r >= 0.999
    # ... and the much tighter agreement the port actually reaches.
    assert np.max(np.abs(py_logfc - r_logfc)) < 1e-8
    assert np.max(np.abs(np.log10(np.maximum(py_p, tiny)) - np.log10(np.maximum(r_p, tiny)))) < 1e-3

    # Step by step: edgeR's TMM factors and filterByExpr, voom's weights, eBayes' hyperparameters.
    lib = counts.sum(axis=0)
    nf = edger.calc_norm_factors(counts)
    np.testing.assert_allclose(nf, pd.read_csv(tmp_path / "r_norm_factors.csv", index_col=0)["norm_factors"], rtol=1e-10)
    keep = edger.filter_by_expr(counts, design.to_numpy())
    np.testing.assert_array_equal(keep, pd.read_csv(tmp_path / "r_keep.csv", index_col=0)["keep"].to_numpy())
    v = limma_voom.voom(counts, design, lib_size=lib * nf)
    np.testing.assert_allclose(v.weights, pd.read_csv(tmp_path / "r_weights.csv", index_col=0).to_numpy(), rtol=1e-8)
    fit = limma_ebayes.ebayes(limma_voom.contrasts_fit(limma_voom.lm_fit(v.E, design, v.weights), contrasts), robust=True)
    r_eb = pd.read_csv(tmp_path / "r_ebayes.csv", index_col=0)
    np.testing.assert_allclose(fit.df_prior, r_eb["df_prior"], rtol=1e-4)
    np.testing.assert_allclose(fit.s2_post, r_eb["s2_post"], rtol=1e-6)


@needs_r
def test_lowess_matches_r(tmp_path):
    """R's clowess, including ties, the delta shortcut and robustness iterations."""
    rng = np.random.default_rng(0)
    x = np.round(rng.gamma(2, 2, 700), 1)  # many ties
    y = np.sin(x) + rng.standard_t(2, x.size) * 0.3
    pd.DataFrame({"x": x, "y": y}).to_csv(tmp_path / "lowess.csv", index=False)
    # Minimal inputs for the reference script: it always runs the DE part too.
    counts = rng.poisson(50, (20, 6))
    pd.DataFrame(counts, index=[f"g{i}" for i in range(20)], columns=[f"s{i}" for i in range(6)]).to_csv(tmp_path / "counts.csv")
    design = np.column_stack([np.repeat([1, 0], 3), np.repeat([0, 1], 3)])
    pd.DataFrame(design, index=[f"s{i}" for i in range(6)], columns=["a", "b"]).to_csv(tmp_path / "design.csv")
    pd.DataFrame([[1.0], [-1.0]], index=["a", "b"], columns=["ab"]).to_csv(tmp_path / "contrasts.csv")
    res = subprocess.run(["Rscript", str(R_SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    ref = pd.read_csv(tmp_path / "r_lowess.csv")
    lx, ly = limma_voom.lowess(x, y, f=0.3)
    np.testing.assert_allclose(lx, ref["x"], rtol=0, atol=0)
    np.testing.assert_allclose(ly, ref["y"], rtol=1e-10, atol=1e-12)


# --- without R --------------------------------------------------------------------------------------
def test_weighted_lm_fit_equals_per_gene_least_squares():
    """The structured (Schur complement) solver gives per-gene weighted least squares exactly."""
    rng = np.random.default_rng(1)
    groups = rng.integers(0, 7, 60)
    groups[:7] = np.arange(7)
    design = np.column_stack([(groups == g).astype(float) for g in range(7)] + [rng.normal(size=60), (rng.random(60) < 0.5).astype(float)])
    y = rng.normal(size=(25, 60))
    w = rng.uniform(0.2, 3, size=(25, 60))
    fit = limma_voom.lm_fit(y, design, w, chunk_size=10)
    for g in range(25):
        sw = np.sqrt(w[g])
        xw = design * sw[:, None]
        beta, rss, *_ = np.linalg.lstsq(xw, y[g] * sw, rcond=None)
        np.testing.assert_allclose(fit.coefficients[g], beta, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(fit.stdev_unscaled[g], np.sqrt(np.diag(np.linalg.inv(xw.T @ xw))), rtol=1e-9)
        np.testing.assert_allclose(fit.sigma[g] ** 2, rss[0] / (60 - design.shape[1]), rtol=1e-9)


def test_lm_fit_rejects_rank_deficient_design():
    design = np.column_stack([np.ones(6), np.ones(6)])
    with pytest.raises(ValueError, match="not of full rank"):
        limma_voom.lm_fit(np.zeros((3, 6)), design)


def test_design_matrix_follows_model_matrix():
    obs = pd.DataFrame({"g": ["b", "a", "b", "c"], "p": ["x", "x", "y", "y"]})
    d = limma_voom.design_matrix(obs, ["g", "p"])
    assert list(d.columns) == ["ga", "gb", "gc", "py"]
    np.testing.assert_array_equal(d.to_numpy(), [[0, 1, 0, 0], [1, 0, 0, 0], [0, 1, 0, 1], [0, 0, 1, 1]])


def test_contrasts_fit_of_an_unweighted_fit_is_the_exact_contrast():
    """Without weights limma's approximation is exact: the contrast of coefficients and its standard error."""
    rng = np.random.default_rng(5)
    design = np.column_stack([np.repeat([1.0, 0.0], 5), np.repeat([0.0, 1.0], 5), rng.normal(size=10)])
    y = rng.normal(size=(4, 10))
    fit = limma_voom.lm_fit(y, design)
    contrast = np.array([[1.0], [-1.0], [0.0]])
    cfit = limma_voom.contrasts_fit(fit, contrast, contrast_names=["a_vs_b"])
    np.testing.assert_allclose(cfit.coefficients[:, 0], fit.coefficients[:, 0] - fit.coefficients[:, 1])
    cov = np.linalg.inv(design.T @ design)
    np.testing.assert_allclose(cfit.stdev_unscaled[:, 0], np.sqrt(contrast[:, 0] @ cov @ contrast[:, 0]))
    assert cfit.coef_names == ["a_vs_b"] and cfit.t is None


def test_voom_weights_follow_the_mean_variance_trend():
    """Counts of a lowly expressed gene are noisier on the log scale: voom gives them smaller weights."""
    rng = np.random.default_rng(6)
    means = np.r_[np.full(50, 5.0), np.full(50, 500.0)]
    counts = rng.poisson(means[:, None] * np.ones((1, 8)))
    design = np.column_stack([np.ones(8), np.repeat([0.0, 1.0], 4)])
    v = limma_voom.voom(counts, design)
    lib = counts.sum(axis=0)
    np.testing.assert_allclose(v.E, np.log2((counts + 0.5) / (lib + 1) * 1e6))
    assert v.weights.shape == counts.shape and np.all(v.weights > 0)
    assert np.median(v.weights[:50]) < np.median(v.weights[50:])


def test_lowess_fits_a_line_exactly():
    """A local linear fit reproduces a straight line, whatever the span."""
    x = np.linspace(0, 10, 60)[::-1]
    lx, ly = limma_voom.lowess(x, 2 * x + 1, f=0.3)
    np.testing.assert_array_equal(lx, np.sort(x))
    np.testing.assert_allclose(ly, 2 * lx + 1, atol=1e-10)
