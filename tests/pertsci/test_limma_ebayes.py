"""pertsci.limma_ebayes: the empirical Bayes hyperparameters, moderated statistics and Benjamini-Hochberg."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from pertsci import limma_ebayes, limma_voom


def test_p_adjust_bh_matches_r_values():
    # p.adjust(c(0.001, 0.01, 0.5), "BH") == c(0.003, 0.015, 0.5) in R
    np.testing.assert_allclose(limma_ebayes.p_adjust_bh(np.array([0.001, 0.01, 0.5])), [0.003, 0.015, 0.5])
    np.testing.assert_allclose(limma_ebayes.p_adjust_bh(np.array([0.05, 0.01, 0.04, 0.02, 0.03])), [0.05] * 5)


def test_p_adjust_bh_adjusts_a_matrix_as_one_family():
    p = np.array([[0.001, 0.01], [0.5, 0.04]])
    np.testing.assert_allclose(limma_ebayes.p_adjust_bh(p), limma_ebayes.p_adjust_bh(p.ravel()).reshape(2, 2))
    np.testing.assert_allclose(limma_ebayes.p_adjust_bh(p), [[0.004, 0.02], [0.5, 0.04 * 4 / 3]])


def test_fit_f_dist_recovers_prior_df():
    """Variances drawn as s2_prior * F(d, d0): the moment estimator finds d0 and s2_prior."""
    rng = np.random.default_rng(2)
    d, d0, s0 = 6.0, 12.0, 0.7
    x = s0 * rng.chisquare(d, 50_000) / d / (rng.chisquare(d0, 50_000) / d0)
    scale, df2 = limma_ebayes.fit_f_dist(x, d)
    assert abs(df2 - d0) / d0 < 0.1
    assert abs(scale - s0) / s0 < 0.05


def test_robust_prior_shrinks_less_for_outlier_variances():
    """Phipson et al. 2016: genes with outlying variances get smaller prior df than the rest."""
    rng = np.random.default_rng(4)
    d = 8.0
    x = rng.chisquare(d, 5000) / d / (rng.chisquare(20, 5000) / 20)
    x[:25] *= 40  # hypervariable genes
    out = limma_ebayes.fit_f_dist_robustly(x, d)
    assert np.median(out["df2_shrunk"][:25]) < 0.5 * np.median(out["df2_shrunk"][25:])
    assert 10 < out["df2"] < 40


def test_trigamma_inverse_inverts_trigamma():
    y = np.array([0.01, 0.5, 3.0, 200.0])
    np.testing.assert_allclose(limma_ebayes.trigamma_inverse(special.polygamma(1, y)), y, rtol=1e-7)


def test_squeeze_var_is_a_weighted_mean_of_prior_and_gene_variance():
    rng = np.random.default_rng(3)
    var = rng.chisquare(4, 3000) / 4 / (rng.chisquare(10, 3000) / 10)  # more dispersed than chi-square
    sq = limma_ebayes.squeeze_var(var, 4.0)
    d0 = sq["df_prior"]
    assert np.all(np.isfinite(d0)) and 5 < d0[0] < 20
    np.testing.assert_allclose(sq["var_post"], (4 * var + d0 * sq["var_prior"]) / (4 + d0))
    # Variances no more dispersed than chi-square: infinite prior df, every gene gets the prior.
    chi2 = limma_ebayes.squeeze_var(rng.chisquare(4, 3000) / 4, 4.0)
    assert np.isinf(chi2["df_prior"]).all()
    np.testing.assert_allclose(chi2["var_post"], chi2["var_prior"])


def test_ebayes_moderated_t_and_top_table():
    """t = coefficient / (stdev_unscaled * posterior sd); p-values from t on the total df; topTable columns."""
    rng = np.random.default_rng(7)
    design = np.column_stack([np.ones(8), np.repeat([0.0, 1.0], 4)])
    y = rng.normal(size=(200, 8))
    y[:10, 4:] += 5  # ten genes change
    fit = limma_ebayes.ebayes(limma_voom.lm_fit(y, design))
    t = fit.coefficients / fit.stdev_unscaled / np.sqrt(fit.s2_post)[:, None]
    np.testing.assert_allclose(fit.t, t)
    np.testing.assert_allclose(fit.p_value, 2 * stats.t.sf(np.abs(t), fit.df_total[:, None]), rtol=1e-8)
    table = limma_ebayes.top_table(fit, 1, genes=[f"g{i}" for i in range(200)], sort_by="p")
    assert list(table.columns) == ["logFC", "AveExpr", "t", "P.Value", "adj.P.Val", "B"]
    assert set(table.index[:10]) == {f"g{i}" for i in range(10)}  # the changed genes come first
    assert (table["B"].iloc[:10] > table["B"].iloc[10:].max()).all()
    with pytest.raises(ValueError, match="run ebayes"):
        limma_ebayes.top_table(limma_voom.lm_fit(y, design), 1)
