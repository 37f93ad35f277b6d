"""limma's empirical Bayes moderation, ported from R: ``eBayes``, ``squeezeVar``, ``fitFDist``, ``topTable``.

The functions follow the published algorithms and reproduce R's results to numerical precision:

- :func:`ebayes`: moderated t-statistics (Smyth 2004, Stat. Appl. Genet. Mol. Biol. 3:3), with the
  robust empirical Bayes hyperparameters of Phipson et al. 2016 (Ann. Appl. Stat. 10:946) through
  :func:`squeeze_var`, :func:`fit_f_dist` and :func:`fit_f_dist_robustly`, and the B-statistic
  (:func:`tmixture_matrix`).
- :func:`top_table` and :func:`p_adjust_bh`: limma's ``topTable`` columns and Benjamini-Hochberg.

They moderate a :class:`pertsci.limma_voom.LinearModelFit` (from ``lm_fit`` or ``contrasts_fit``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import optimize, special, stats

from pertsci.limma_voom import LinearModelFit
from pertsci.multiple_testing import benjamini_hochberg

__all__ = [
    "ebayes",
    "fit_f_dist",
    "fit_f_dist_robustly",
    "p_adjust_bh",
    "squeeze_var",
    "tmixture_matrix",
    "top_table",
    "trigamma_inverse",
]


def trigamma_inverse(x: np.ndarray | float) -> np.ndarray:
    """Solve ``trigamma(y) = x`` for y by Newton's method (limma's ``trigammaInverse``).

    Parameters
    ----------
    x
        Values of the trigamma function (positive).

    Returns
    -------
    numpy.ndarray
        ``y`` with ``trigamma(y) = x``, at least one-dimensional; NaN where ``x`` is negative.
    """
    x = np.atleast_1d(np.asarray(x, dtype=float))
    y = np.full_like(x, np.nan)
    big = x > 1e7
    small = x < 1e-6
    y[big] = 1 / np.sqrt(x[big])
    y[small] = 1 / x[small]
    mid = ~big & ~small & (x >= 0)
    ym = 0.5 + 1 / x[mid]
    xm = x[mid]
    for _ in range(50):
        tri = special.polygamma(1, ym)
        dif = tri * (1 - tri / xm) / special.polygamma(2, ym)
        ym = ym + dif
        if ym.size == 0 or np.max(-dif / ym) < 1e-8:
            break
    y[mid] = ym
    return y


def fit_f_dist(x: np.ndarray, df1: np.ndarray | float) -> tuple[float, float]:
    """Moment estimation of a scaled F distribution's scale and df2 (limma's ``fitFDist``, Smyth 2004).

    Parameters
    ----------
    x
        Residual variances (one per gene); non-finite or negative values are ignored.
    df1
        Their degrees of freedom (one value, or one per gene).

    Returns
    -------
    (float, float)
        ``(scale, df2)``: the prior variance and the prior degrees of freedom (``inf`` when the
        variances are no more dispersed than chi-square).
    """
    x = np.asarray(x, dtype=float)
    df1 = np.broadcast_to(np.asarray(df1, dtype=float), x.shape)
    ok = np.isfinite(df1) & (df1 > 1e-15) & np.isfinite(x) & (x > -1e-15)
    x, df1 = x[ok], df1[ok]
    n = x.size
    if n == 0:
        return np.nan, np.nan
    if n == 1:
        return float(x[0]), 0.0
    x = np.maximum(x, 0)
    m = np.median(x)
    if m == 0:
        m = 1.0
    x = np.maximum(x, 1e-5 * m)
    e = np.log(x) - special.digamma(df1 / 2) + np.log(df1 / 2)
    emean = e.mean()
    evar = np.sum((e - emean) ** 2) / (n - 1)
    evar = evar - np.mean(special.polygamma(1, df1 / 2))
    if evar > 0:
        df2 = 2 * float(trigamma_inverse(evar)[0])
        s20 = float(np.exp(emean + special.digamma(df2 / 2) - np.log(df2 / 2)))
    else:
        df2 = np.inf
        s20 = float(np.mean(x))
    return s20, df2


def _r_trimmed_mean(z: np.ndarray, trim: float) -> float:
    """R's ``mean(x, trim=)``: drop ``floor(n * trim)`` values at each end."""
    n = z.size
    lo = math.floor(n * trim)
    return float(np.mean(np.sort(z)[lo:n - lo])) if trim > 0 else float(np.mean(z))


def _f_ppf(p: np.ndarray, df1: float, df2: float) -> np.ndarray:
    if np.isinf(df2):
        return stats.chi2.ppf(p, df1) / df1
    return stats.f.ppf(p, df1, df2)


def _f_pdf(x: np.ndarray, df1: float, df2: float) -> np.ndarray:
    if np.isinf(df2):
        return stats.chi2.pdf(x * df1, df1) * df1
    return stats.f.pdf(x, df1, df2)


# Gauss-Legendre nodes on [0, 1] with weights summing to one (statmod's gauss.quad.prob, uniform).
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(128)
_GL_NODES = (_GL_NODES + 1) / 2
_GL_WEIGHTS = _GL_WEIGHTS / 2


def _winsorized_moments(df1: float, df2: float, tail_p: tuple[float, float]) -> tuple[float, float]:
    """Mean and variance of the Winsorized log of an F(df1, df2) variable.

    The integral over the central part is taken on the scale u = F/(1+F) by Gauss-Legendre
    quadrature; the tails contribute their Winsorizing values.
    """
    fq = _f_ppf(np.array([tail_p[0], 1 - tail_p[1]]), df1, df2)
    zq = np.log(fq)
    q = fq / (1 + fq)
    nodes = q[0] + (q[1] - q[0]) * _GL_NODES
    fnodes = nodes / (1 - nodes)
    znodes = np.log(fnodes)
    dens = _f_pdf(fnodes, df1, df2) / (1 - nodes) ** 2
    q21 = q[1] - q[0]
    tails = np.array(tail_p)
    mean = q21 * np.sum(_GL_WEIGHTS * dens * znodes) + np.sum(zq * tails)
    var = q21 * np.sum(_GL_WEIGHTS * dens * (znodes - mean) ** 2) + np.sum((zq - mean) ** 2 * tails)
    return float(mean), float(var)


def fit_f_dist_robustly(x: np.ndarray, df1: float, winsor_tail_p: tuple[float, float] = (0.05, 0.1)) -> dict:
    """Robust estimation of a scaled F distribution (Phipson et al. 2016; limma's ``fitFDistRobustly``).

    The prior degrees of freedom are found by matching the variance of the Winsorized log
    variances to its theoretical value; genes whose variance is an outlier get shrunken prior
    degrees of freedom (``df2_shrunk``), so that they are squeezed less towards the prior.

    Parameters
    ----------
    x
        Residual variances (one per gene).
    df1
        Their degrees of freedom (equal for all genes).
    winsor_tail_p
        Lower and upper tail proportions to Winsorize.

    Returns
    -------
    dict
        ``scale`` (prior variance), ``df2`` (prior df), ``df2_shrunk`` (per-gene prior df),
        ``df2_outlier``, ``tail_p_value``, ``prob_outlier``.
    """
    x = np.asarray(x, dtype=float).copy()
    df1_arr = np.atleast_1d(np.asarray(df1, dtype=float))
    if df1_arr.size > 1:
        if not np.allclose(df1_arr, df1_arr[0]):
            raise ValueError("fit_f_dist_robustly: unequal residual degrees of freedom are not supported")
    df1 = float(df1_arr[0])
    n = x.size
    if n < 2:
        return {"scale": np.nan, "df2": np.nan, "df2_shrunk": np.full(n, np.nan)}
    if n == 2:
        s, d = fit_f_dist(x, df1)
        return {"scale": s, "df2": d, "df2_shrunk": np.full(n, d)}
    if not (np.all(np.isfinite(x)) and df1 > 1e-6):
        raise ValueError("fit_f_dist_robustly: variances must be finite and df1 positive")
    m = np.median(x)
    if m <= 0:
        raise ValueError("fit_f_dist_robustly: variances are mostly <= 0")
    x[x < m * 1e-12] = m * 1e-12
    nr_scale, nr_df2 = fit_f_dist(x, df1)
    tail_p = (float(winsor_tail_p[0]), float(winsor_tail_p[1]))
    prob = np.array([tail_p[0], 1 - tail_p[1]])
    if tail_p[0] < 1 / n and tail_p[1] < 1 / n:
        return {"scale": nr_scale, "df2": nr_df2, "df2_shrunk": np.full(n, nr_df2)}
    z = np.log(x)
    ztrend = _r_trimmed_mean(z, tail_p[1])
    zresid = z - ztrend
    zrq = np.quantile(zresid, prob, method="linear")
    zwins = np.clip(zresid, zrq[0], zrq[1])
    zwmean = zwins.mean()
    zwvar = np.mean((zwins - zwmean) ** 2) * n / (n - 1)

    def link(v: float) -> float:
        return v / (1 + v)

    def linkinv(v: float) -> float:
        return v / (1 - v)

    mom_inf = _winsorized_moments(df1, np.inf, tail_p)
    funval_inf = math.log(zwvar / mom_inf[1])
    ranks = stats.rankdata(np.exp(zresid))  # rank of Fstat == rank of zresid (monotone)
    if funval_inf <= 0:
        # The variances are no more dispersed than chi-square: infinite prior df.
        ztrend_c = ztrend + zwmean - mom_inf[0]
        fstat = np.exp(z - ztrend_c)
        tail = stats.chi2.sf(fstat * df1, df1)
        emp = (n - ranks + 0.5) / n
        prob_not = np.minimum(tail / emp, 1)
        df2_shrunk = np.full(n, np.inf)
        out = prob_not < 1
        if out.any():
            df2_shrunk[out] = prob_not[out] * n * df1
            o = np.argsort(tail, kind="stable")
            df2_shrunk[o] = np.maximum.accumulate(df2_shrunk[o])
        return {"scale": float(np.exp(ztrend_c)), "df2": np.inf, "df2_shrunk": df2_shrunk, "tail_p_value": tail}

    def fun(u: float) -> float:
        return math.log(zwvar / _winsorized_moments(df1, linkinv(u), tail_p)[1])

    if np.isinf(nr_df2):
        return {"scale": nr_scale, "df2": nr_df2, "df2_shrunk": np.full(n, nr_df2)}
    rbx = link(nr_df2)
    funval_low = fun(rbx)
    if funval_low >= 0:
        df2 = nr_df2
    else:
        df2 = linkinv(_brent_root(fun, rbx, funval_low, tol=1e-8))
    mom = _winsorized_moments(df1, df2, tail_p)
    ztrend_c = ztrend + zwmean - mom[0]
    s20 = float(np.exp(ztrend_c))
    fstat = np.exp(z - ztrend_c)
    log_tail = stats.f.logsf(fstat, df1, df2)
    log_emp = np.log(n - ranks + 0.5) - math.log(n)
    log_not = np.minimum(log_tail - log_emp, 0)
    prob_not = np.exp(log_not)
    prob_out = -np.expm1(log_not)
    if np.any(log_not < 0):
        min_log_tail = float(np.min(log_tail))
        if min_log_tail == -np.inf:
            df2_outlier = 0.0
            df2_shrunk = prob_not * df2
        else:
            df2_outlier = math.log(0.5) / min_log_tail * df2
            new_log_tail = float(stats.f.logsf(np.max(fstat), df1, df2_outlier))
            df2_outlier = math.log(0.5) / new_log_tail * df2_outlier
            df2_shrunk = prob_not * df2 + prob_out * df2_outlier
        # Force df2_shrunk to be monotonic in the tail probability.
        o = np.argsort(log_tail, kind="stable")
        ordered = df2_shrunk[o]
        means = np.cumsum(ordered) / np.arange(1, n + 1)
        imin = int(np.argmin(means))
        ordered[: imin + 1] = means[imin]
        df2_shrunk = np.empty(n)
        df2_shrunk[o] = np.maximum.accumulate(ordered)
    else:
        df2_outlier = df2
        df2_shrunk = np.full(n, df2)
    return {"scale": s20, "df2": df2, "df2_shrunk": df2_shrunk, "df2_outlier": df2_outlier,
            "tail_p_value": np.exp(log_tail), "prob_outlier": prob_out}


def _brent_root(fun, a: float, fa: float, tol: float) -> float:
    """Root of ``fun`` on ``(a, 1)`` on the link scale u = df2/(1+df2), as R's ``uniroot`` finds it.

    R brackets the root with the value at u = 1 (df2 = Inf), which it knows from the limit; here the
    upper end is taken just below 1 (df2 = 1e12), where the F distribution equals its limit to
    double precision.
    """
    hi = 1.0 - 1e-12
    f_hi = fun(hi)
    if np.sign(f_hi) == np.sign(fa):
        return hi
    return optimize.brentq(fun, a, hi, xtol=tol, rtol=4 * np.finfo(float).eps)


def squeeze_var(var: np.ndarray, df: np.ndarray | float, robust: bool = False,
                winsor_tail_p: tuple[float, float] = (0.05, 0.1)) -> dict:
    """Empirical Bayes posterior variances (limma's ``squeezeVar``).

    Parameters
    ----------
    var
        Residual variances (one per gene).
    df
        Their degrees of freedom.
    robust
        Robust estimation of the prior (:func:`fit_f_dist_robustly`), else :func:`fit_f_dist`.
    winsor_tail_p
        Tail proportions Winsorized by the robust estimation.

    Returns
    -------
    dict
        ``var_post`` per gene, ``var_prior`` and ``df_prior`` (per gene when robust).
    """
    var = np.asarray(var, dtype=float)
    n = var.size
    if n == 0:
        raise ValueError("squeeze_var: no variances")
    if n == 1:
        return {"var_post": var.copy(), "var_prior": var.copy(), "df_prior": 0.0}
    df_arr = np.broadcast_to(np.asarray(df, dtype=float), var.shape)
    if robust:
        fit = fit_f_dist_robustly(var, df_arr, winsor_tail_p)
        df_prior = fit["df2_shrunk"]
        var_prior = fit["scale"]
    else:
        var_prior, df2 = fit_f_dist(var, df_arr)
        df_prior = np.full(n, df2)
    df_prior = np.asarray(df_prior, dtype=float)
    if np.any(np.isnan(df_prior)):
        raise ValueError("squeeze_var: could not estimate the prior degrees of freedom")
    finite = np.isfinite(df_prior)
    var_post = np.full(n, float(var_prior))
    var_post[finite] = (df_arr[finite] * var[finite] + df_prior[finite] * var_prior) / (df_arr[finite] + df_prior[finite])
    return {"var_post": var_post, "var_prior": float(var_prior), "df_prior": df_prior}


def _tmixture_vector(tstat: np.ndarray, stdev_unscaled: np.ndarray, df: np.ndarray, proportion: float,
                     v0_lim: tuple[float, float] | None) -> float:
    ok = ~np.isnan(tstat)
    tstat, stdev_unscaled, df = tstat[ok], stdev_unscaled[ok], df[ok]
    n_genes = tstat.size
    ntarget = math.ceil(proportion / 2 * n_genes)
    if ntarget < 1:
        return np.nan
    p = max(ntarget / n_genes, proportion)
    tstat = np.abs(tstat)
    max_df = float(np.max(df))
    lower = df < max_df
    if lower.any():
        log_tail = stats.t.logsf(tstat[lower], df[lower])
        tstat = tstat.copy()
        tstat[lower] = stats.t.isf(np.exp(log_tail), max_df)
    o = np.argsort(-tstat, kind="stable")[:ntarget]
    tstat = tstat[o]
    v1 = stdev_unscaled[o] ** 2
    r = np.arange(1, ntarget + 1)
    p0 = 2 * stats.t.sf(tstat, max_df)
    ptarget = ((r - 0.5) / n_genes - (1 - p) * p0) / p
    v0 = np.zeros(ntarget)
    pos = ptarget > p0
    if pos.any():
        qtarget = stats.t.isf(ptarget[pos] / 2, max_df)
        v0[pos] = v1[pos] * ((tstat[pos] / qtarget) ** 2 - 1)
    if v0_lim is not None:
        v0 = np.clip(v0, v0_lim[0], v0_lim[1])
    return float(np.mean(v0))


def tmixture_matrix(tstat: np.ndarray, stdev_unscaled: np.ndarray, df: np.ndarray, proportion: float,
                    v0_lim: tuple[float, float] | None = None) -> np.ndarray:
    """Prior variance of the non-null coefficients, per contrast (limma's ``tmixture.matrix``).

    Parameters
    ----------
    tstat, stdev_unscaled
        Genes x contrasts moderated t-statistics and unscaled standard errors.
    df
        Total degrees of freedom per gene.
    proportion
        Assumed proportion of differentially expressed genes.
    v0_lim
        Limits of the estimates (``None``: unlimited).

    Returns
    -------
    numpy.ndarray
        One prior variance per contrast (NaN when too few genes).
    """
    return np.array([_tmixture_vector(tstat[:, j], stdev_unscaled[:, j], df, proportion, v0_lim)
                     for j in range(tstat.shape[1])])


def ebayes(fit: LinearModelFit, proportion: float = 0.01, stdev_coef_lim: tuple[float, float] = (0.1, 4),
           robust: bool = False, winsor_tail_p: tuple[float, float] = (0.05, 0.1), lods: bool = True
           ) -> LinearModelFit:
    """Moderated t-statistics, p-values and log-odds of differential expression (limma's ``eBayes``).

    Parameters
    ----------
    fit
        From :func:`lm_fit` or :func:`contrasts_fit`.
    proportion
        Assumed proportion of differentially expressed genes (for the B-statistic).
    stdev_coef_lim
        Limits of the prior standard deviation of non-null log-fold changes.
    robust
        Robust estimation of the prior (Phipson et al. 2016), as ``eBayes(robust=TRUE)``.
    winsor_tail_p
        Tail proportions Winsorized by the robust estimation.
    lods
        Compute the B-statistic (log-odds).

    Returns
    -------
    LinearModelFit
        A copy with ``t``, ``p_value``, ``lods``, ``df_prior``, ``s2_prior``, ``s2_post``,
        ``df_total`` and ``var_prior`` set.
    """
    sigma = fit.sigma
    df_res = fit.df_residual
    if np.max(df_res) == 0:
        raise ValueError("ebayes: no residual degrees of freedom")
    sq = squeeze_var(sigma**2, df_res, robust=robust, winsor_tail_p=winsor_tail_p)
    s2_post = sq["var_post"]
    t = fit.coefficients / fit.stdev_unscaled / np.sqrt(s2_post)[:, None]
    df_total = np.minimum(df_res + sq["df_prior"], np.nansum(df_res))
    p_value = 2 * special.stdtr(df_total[:, None], -np.abs(t))
    out = dataclasses.replace(fit, t=t, p_value=p_value, df_prior=sq["df_prior"], s2_prior=sq["var_prior"],
                              s2_post=s2_post, df_total=df_total)
    if lods:
        var_prior_lim = np.array(stdev_coef_lim) ** 2 / sq["var_prior"]
        var_prior = tmixture_matrix(t, fit.stdev_unscaled, df_total, proportion, tuple(var_prior_lim))
        var_prior = np.where(np.isnan(var_prior), 1 / sq["var_prior"], var_prior)
        r = (fit.stdev_unscaled**2 + var_prior[None, :]) / fit.stdev_unscaled**2
        t2 = t**2
        dft = df_total[:, None]
        inf_df = np.broadcast_to((np.asarray(sq["df_prior"]) > 1e6)[:, None] if np.ndim(sq["df_prior"]) else
                                 np.full((t.shape[0], 1), sq["df_prior"] > 1e6), t.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            kernel = np.where(inf_df, t2 * (1 - 1 / r) / 2, (1 + dft) / 2 * np.log((t2 + dft) / (t2 / r + dft)))
        out.lods = math.log(proportion / (1 - proportion)) - np.log(r) / 2 + kernel
        out.var_prior = var_prior
    return out


# --------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------
def p_adjust_bh(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (R's ``p.adjust(method="BH")``) over all entries, NaN kept.

    Parameters
    ----------
    p
        P-values of any shape: all entries form one family of tests (the OP3 pipeline adjusts over
        every contrast and gene at once).

    Returns
    -------
    numpy.ndarray
        Adjusted p-values, of the shape of ``p``.
    """
    p = np.asarray(p, dtype=float)
    return benjamini_hochberg(p.ravel()).reshape(p.shape)


def top_table(fit: LinearModelFit, coef: int | str, genes: Sequence[str] | None = None, sort_by: str = "none"
              ) -> pd.DataFrame:
    """limma's ``topTable`` for one coefficient: logFC, AveExpr, t, P.Value, adj.P.Val, B.

    Parameters
    ----------
    fit
        From :func:`ebayes`.
    coef
        Column index or name.
    genes
        Row names (default 0..n-1).
    sort_by
        ``"none"`` (input order) or ``"p"``.

    Returns
    -------
    pandas.DataFrame
        One row per gene: ``logFC``, ``AveExpr``, ``t``, ``P.Value``, ``adj.P.Val`` and ``B`` (when
        the fit has log-odds).
    """
    if fit.t is None:
        raise ValueError("top_table: run ebayes() first")
    j = fit.coef_names.index(coef) if isinstance(coef, str) else int(coef)
    df = pd.DataFrame({
        "logFC": fit.coefficients[:, j],
        "AveExpr": fit.amean,
        "t": fit.t[:, j],
        "P.Value": fit.p_value[:, j],
        "adj.P.Val": p_adjust_bh(fit.p_value[:, j]),
    }, index=list(genes) if genes is not None else None)
    if fit.lods is not None:
        df["B"] = fit.lods[:, j]
    if sort_by == "p":
        df = df.sort_values("P.Value", kind="stable")
    return df
