"""limma's linear models for RNA-seq, ported from R: design matrices, ``voom``, ``lmFit``, ``contrasts.fit``.

The functions follow the published algorithms and reproduce R's results to numerical precision:

- :func:`design_matrix`: R's ``model.matrix`` for categorical factors.
- :func:`voom`: precision weights from the mean-variance trend of log-CPM (Law et al. 2014, Genome
  Biol. 15:R29), with R's ``lowess`` (Cleveland 1979) reimplemented in :func:`lowess`.
- :func:`lm_fit`: weighted least squares per gene (limma's ``lmFit``), vectorised across genes.
- :func:`contrasts_fit`: limma's ``contrasts.fit``, including its approximation of the contrast
  standard errors through the correlation of the unweighted coefficients.

The rest of the pipeline lives beside it: edgeR's gene filter and TMM factors in
:mod:`pertsci.edger`, the empirical Bayes moderation (``eBayes``) and ``topTable`` in
:mod:`pertsci.limma_ebayes`. :func:`pertsci.op3_processing.limma_de` chains them as the OP3
benchmark does.

Orientation: as in limma and edgeR, matrices are **genes x samples** (``counts[g, s]``). The design
is samples x coefficients. Weighted fits exploit the structure of designs such as
``~0 + group + batch``: columns that are 0/1 indicators of disjoint sample groups are solved in
closed form and only the remaining columns by dense algebra (a Schur complement), so a design with
hundreds of group coefficients fits thousands of genes in seconds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

__all__ = [
    "LinearModelFit",
    "VoomResult",
    "contrasts_fit",
    "design_matrix",
    "lm_fit",
    "lowess",
    "voom",
]


# --------------------------------------------------------------------------------------------------
# Design matrices
# --------------------------------------------------------------------------------------------------
def design_matrix(obs: pd.DataFrame, factors: Sequence[str], *, intercept: bool = False) -> pd.DataFrame:
    """A design matrix of categorical factors, built as R's ``model.matrix`` does.

    ``design_matrix(obs, ["a", "b"])`` is ``model.matrix(~0 + a + b)``: every level of the first
    factor gets an indicator column, later factors drop their first level (treatment contrasts).
    With ``intercept=True`` it is ``model.matrix(~a + b)``. Levels are sorted as R sorts factor
    levels of character vectors (lexicographically), unless a column is already categorical.

    Parameters
    ----------
    obs
        One row per sample.
    factors
        Column names of ``obs``.
    intercept
        Add an intercept column (and drop the first level of the first factor too).

    Returns
    -------
    pandas.DataFrame
        Samples x coefficients, float, columns named ``<factor><level>`` as R names them.
    """
    cols: dict[str, np.ndarray] = {}
    if intercept:
        cols["(Intercept)"] = np.ones(len(obs))
    for i, factor in enumerate(factors):
        if factor not in obs.columns:
            raise KeyError(f"design_matrix: no column {factor!r} in obs (columns: {list(obs.columns)})")
        values = obs[factor]
        if isinstance(values.dtype, pd.CategoricalDtype):
            levels = [lv for lv in values.cat.categories if (values == lv).any()]
        else:
            levels = sorted(pd.unique(values.astype(str)))
        values = values.astype(str).to_numpy()
        drop_first = intercept or i > 0
        for level in levels[1:] if drop_first else levels:
            cols[f"{factor}{level}"] = (values == str(level)).astype(float)
    return pd.DataFrame(cols, index=obs.index)


# --------------------------------------------------------------------------------------------------
# lowess (R's clowess)
# --------------------------------------------------------------------------------------------------
def _lowest(x: np.ndarray, y: np.ndarray, xs: float, nleft: int, nright: int, rw: np.ndarray | None,
            x_range: float) -> tuple[float, bool]:
    """Local weighted linear fit at ``xs`` over the window ``[nleft, nright]`` (plus ties on the right)."""
    h = max(xs - x[nleft], x[nright] - xs)
    h9, h1 = 0.999 * h, 0.001 * h
    seg = x[nleft:]
    r = np.abs(seg - xs)
    # The window ends at the first point to the right of xs farther than h9 (ties are picked up).
    stop = np.flatnonzero((r > h9) & (seg > xs))
    end = int(stop[0]) if stop.size else seg.size
    r, xseg = r[:end], seg[:end]
    w = np.zeros(end)
    inside = r <= h9
    ri = r[inside]
    w[inside] = np.where(ri <= h1, 1.0, (1.0 - (ri / h) ** 3) ** 3) if h > 0 else 1.0
    if rw is not None:
        w *= rw[nleft:nleft + end]
    a = w.sum()
    if a <= 0.0:
        return 0.0, False
    w = w / a
    if h > 0.0:
        centre = float(np.dot(w, xseg))
        b = xs - centre
        c = float(np.dot(w, (xseg - centre) ** 2))
        if math.sqrt(c) > 0.001 * x_range:
            # Points are spread enough to fit a slope.
            w = w * (b / c * (xseg - centre) + 1.0)
    return float(np.dot(w, y[nleft:nleft + end])), True


def lowess(x: np.ndarray, y: np.ndarray, f: float = 2 / 3, iters: int = 3, delta: float | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """Robust locally weighted regression, as R's ``lowess`` (Cleveland 1979; R's ``clowess``).

    Parameters
    ----------
    x, y
        The points.
    f
        Span: the fraction of points that influence each fitted value.
    iters
        Robustifying iterations.
    delta
        Points closer than ``delta`` to the last fitted point are interpolated
        (default: 1% of the range of ``x``).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``x`` sorted and the fitted values at those points.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    n = x.size
    if n < 2:
        return x, y.copy()
    if delta is None:
        delta = 0.01 * (x[-1] - x[0])
    x_range = x[-1] - x[0]
    ns = max(2, min(n, int(f * n + 1e-7)))
    ys = np.empty(n)
    rw: np.ndarray | None = None
    for it in range(iters + 1):
        nleft, nright, last, i = 0, ns - 1, -1, 0
        while True:
            if nright < n - 1:
                # Move the window right while that does not increase its radius.
                if x[i] - x[nleft] > x[nright + 1] - x[i]:
                    nleft += 1
                    nright += 1
                    continue
            value, ok = _lowest(x, y, x[i], nleft, nright, rw, x_range)
            ys[i] = value if ok else y[i]
            if last < i - 1:
                # Interpolate the points skipped since the last fitted one.
                j = np.arange(last + 1, i)
                alpha = (x[j] - x[last]) / (x[i] - x[last])
                ys[j] = alpha * ys[i] + (1.0 - alpha) * ys[last]
            last = i
            cut = x[last] + delta
            i = last + 1
            while i < n:
                if x[i] > cut:
                    break
                if x[i] == x[last]:
                    ys[i] = ys[last]
                    last = i
                i += 1
            i = max(last + 1, i - 1)
            if last >= n - 1:
                break
        res = y - ys
        if it >= iters:
            break
        sc = np.sum(np.abs(res)) / n
        ares = np.abs(res)
        cmad = 6.0 * float(np.median(ares))
        if cmad < 1e-7 * sc:
            break
        c9, c1 = 0.999 * cmad, 0.001 * cmad
        with np.errstate(divide="ignore", invalid="ignore"):  # cmad may be 0; those branches are not taken
            rw = np.where(ares <= c1, 1.0, np.where(ares <= c9, (1.0 - (ares / cmad) ** 2) ** 2, 0.0))
    return x, ys


def _approx_rule2(x_knots: np.ndarray, y_knots: np.ndarray, x_new: np.ndarray) -> np.ndarray:
    """R's ``approxfun(x, y, rule=2, ties=mean)`` on sorted knots: linear, constant outside."""
    ux, inverse = np.unique(x_knots, return_inverse=True)
    if ux.size < x_knots.size:
        y_knots = np.bincount(inverse, weights=y_knots) / np.bincount(inverse)
    return np.interp(x_new, ux, y_knots)


# --------------------------------------------------------------------------------------------------
# Linear models
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class LinearModelFit:
    """A fitted linear model per gene (limma's ``MArrayLM``).

    Attributes
    ----------
    coefficients
        Genes x coefficients (or contrasts).
    stdev_unscaled
        Genes x coefficients: standard errors divided by ``sigma``.
    sigma
        Residual standard deviation per gene.
    df_residual
        Residual degrees of freedom per gene.
    cov_coefficients
        Unscaled covariance of the coefficients of the unweighted design.
    amean
        Average log-expression per gene.
    coef_names
        Names of the coefficients (columns of ``coefficients``).
    design
        The design the model was fitted with.
    """

    coefficients: np.ndarray
    stdev_unscaled: np.ndarray
    sigma: np.ndarray
    df_residual: np.ndarray
    cov_coefficients: np.ndarray
    amean: np.ndarray
    coef_names: list[str]
    design: np.ndarray
    # Filled by pertsci.limma_ebayes.ebayes():
    t: np.ndarray | None = None
    p_value: np.ndarray | None = None
    lods: np.ndarray | None = None
    df_prior: np.ndarray | float | None = None
    s2_prior: float | None = None
    s2_post: np.ndarray | None = None
    df_total: np.ndarray | None = None
    var_prior: np.ndarray | None = None


def _split_design(design: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Columns that are 0/1 indicators of disjoint sample sets (the group block) and the others.

    Indicators are taken greedily in column order; a column overlapping an earlier indicator goes to
    the dense block. Returns (group column indices, dense column indices).
    """
    covered = np.zeros(design.shape[0], dtype=bool)
    group, dense = [], []
    for j in range(design.shape[1]):
        col = design[:, j]
        is_ind = np.all((col == 0) | (col == 1)) and col.any()
        if is_ind and not np.any(covered & (col == 1)):
            group.append(j)
            covered |= col == 1
        else:
            dense.append(j)
    return np.array(group, dtype=int), np.array(dense, dtype=int)


def _check_rank(design: np.ndarray) -> None:
    s = np.linalg.svd(design, compute_uv=False)
    rank = int(np.sum(s > s[0] * 1e-7 * max(design.shape) / 10)) if s.size else 0
    if rank < design.shape[1]:
        raise ValueError(f"design matrix is not of full rank ({rank} < {design.shape[1]} coefficients): "
                         "some coefficients are not estimable; remove confounded or empty columns")


def _wls_structured(y: np.ndarray, w: np.ndarray, design: np.ndarray, group: np.ndarray, dense: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weighted least squares of many genes with a design [A | Z] (A: disjoint indicators).

    Solves the normal equations per gene by the Schur complement of the diagonal block ``A'WA``.

    Returns
    -------
    coefficients, variances (diagonal of (X'WX)^-1), weighted residual sum of squares
    """
    n_genes = y.shape[0]
    p = design.shape[1]
    a_mat = design[:, group]
    z_mat = design[:, dense]
    pa, pz = group.size, dense.size
    if pa:
        sample_group = np.full(design.shape[0], -1)
        rows, cols = np.nonzero(a_mat)
        sample_group[rows] = cols
        in_group = sample_group >= 0
        ind = sp.csr_matrix((np.ones(in_group.sum()), (np.flatnonzero(in_group), sample_group[in_group])),
                            shape=(design.shape[0], pa))
    wy = w * y
    coef = np.empty((n_genes, p))
    var = np.empty((n_genes, p))
    if pa:
        d = np.asarray((ind.T @ w.T).T)  # genes x pa: sum of weights per group
        a_rhs = np.asarray((ind.T @ wy.T).T)
        if np.any(d <= 0):
            raise ValueError("a group coefficient has no sample with positive weight")
    if pz:
        z_rhs = wy @ z_mat
        e = np.einsum("gi,ij,il->gjl", w, z_mat, z_mat, optimize=True)
        if pa:
            # B[g, k, j] = sum over samples of group k of w * Z[:, j]
            b = np.stack([np.asarray((ind.T @ (w * z_mat[:, j]).T).T) for j in range(pz)], axis=2)
            m = b / d[:, :, None]
            s_mat = e - np.einsum("gkj,gkl->gjl", b, m)
            rhs = z_rhs - np.einsum("gkj,gk->gj", m, a_rhs)
        else:
            s_mat, rhs = e, z_rhs
        s_inv = np.linalg.inv(s_mat)
        zc = np.einsum("gjl,gl->gj", s_inv, rhs)
        coef[:, dense] = zc
        var[:, dense] = np.diagonal(s_inv, axis1=1, axis2=2)
        if pa:
            ac = (a_rhs - np.einsum("gkj,gj->gk", b, zc)) / d
            coef[:, group] = ac
            var[:, group] = 1.0 / d + np.einsum("gkj,gjl,gkl->gk", m, s_inv, m)
    else:
        coef[:, group] = a_rhs / d
        var[:, group] = 1.0 / d
    fitted = coef @ design.T
    rss = np.sum(w * (y - fitted) ** 2, axis=1)
    return coef, var, rss


def lm_fit(
    expr: np.ndarray,
    design: np.ndarray | pd.DataFrame,
    weights: np.ndarray | None = None,
    *,
    chunk_size: int = 1024,
) -> LinearModelFit:
    """Fit a linear model per gene by (weighted) least squares, as limma's ``lmFit``.

    Parameters
    ----------
    expr
        Genes x samples log-expression (e.g. ``voom``'s ``E``).
    design
        Samples x coefficients, of full column rank.
    weights
        Genes x samples precision weights (e.g. ``voom``'s ``weights``); ``None`` for ordinary
        least squares.
    chunk_size
        Genes solved at once (bounds memory for designs with several dense columns).

    Returns
    -------
    LinearModelFit
        Coefficients, unscaled standard errors, residual standard deviations, residual degrees
        of freedom, the unscaled covariance of the unweighted design and the average expression.
    """
    coef_names = list(design.columns) if isinstance(design, pd.DataFrame) else [f"x{i + 1}" for i in range(np.shape(design)[1])]
    x = np.asarray(design, dtype=float)
    y = np.asarray(expr, dtype=float)
    if y.ndim != 2 or y.shape[1] != x.shape[0]:
        raise ValueError(f"lm_fit: expression is {y.shape} (genes x samples) but the design has {x.shape[0]} samples")
    if not np.all(np.isfinite(y)):
        raise ValueError("lm_fit: expression values must be finite")
    _check_rank(x)
    n_genes, n = y.shape
    p = x.shape[1]
    df = n - p
    xtx_inv = np.linalg.inv(x.T @ x)
    if weights is None:
        coef = np.linalg.solve(x.T @ x, x.T @ y.T).T
        resid = y - coef @ x.T
        sigma = np.sqrt(np.sum(resid**2, axis=1) / df) if df > 0 else np.full(n_genes, np.nan)
        stdev = np.tile(np.sqrt(np.diag(xtx_inv)), (n_genes, 1))
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != y.shape:
            raise ValueError(f"lm_fit: weights are {w.shape} but expression is {y.shape}")
        if np.any(~np.isfinite(w)) or np.any(w <= 0):
            raise ValueError("lm_fit: weights must be finite and positive")
        group, dense = _split_design(x)
        coef = np.empty((n_genes, p))
        var = np.empty((n_genes, p))
        rss = np.empty(n_genes)
        for start in range(0, n_genes, chunk_size):
            sl = slice(start, start + chunk_size)
            coef[sl], var[sl], rss[sl] = _wls_structured(y[sl], w[sl], x, group, dense)
        stdev = np.sqrt(var)
        sigma = np.sqrt(rss / df) if df > 0 else np.full(n_genes, np.nan)
    return LinearModelFit(coefficients=coef, stdev_unscaled=stdev, sigma=sigma,
                          df_residual=np.full(n_genes, float(df)), cov_coefficients=xtx_inv,
                          amean=y.mean(axis=1), coef_names=coef_names, design=x)


# --------------------------------------------------------------------------------------------------
# voom
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class VoomResult:
    """Output of :func:`voom` (limma's ``EList``): log-CPM, weights, and what they came from."""

    E: np.ndarray
    weights: np.ndarray
    lib_size: np.ndarray
    design: np.ndarray
    trend_x: np.ndarray
    trend_y: np.ndarray


def voom(counts: np.ndarray | sp.spmatrix, design: np.ndarray | pd.DataFrame, lib_size: np.ndarray | None = None,
         span: float = 0.5) -> VoomResult:
    """Log-CPM with precision weights from the mean-variance trend (Law et al. 2014).

    Parameters
    ----------
    counts
        Genes x samples counts.
    design
        Samples x coefficients.
    lib_size
        Effective library sizes (library size times TMM factor); default column sums.
    span
        Span of the lowess trend of sqrt(residual sd) against average log count.

    Returns
    -------
    VoomResult
    """
    y_counts = counts.toarray() if sp.issparse(counts) else np.asarray(counts, dtype=float)
    if y_counts.shape[0] < 2:
        raise ValueError("voom: need at least two genes to fit a mean-variance trend")
    if np.any(y_counts < 0) or np.any(~np.isfinite(y_counts)):
        raise ValueError("voom: counts must be finite and non-negative")
    x = np.asarray(design, dtype=float)
    lib = y_counts.sum(axis=0) if lib_size is None else np.asarray(lib_size, dtype=float)
    e = np.log2((y_counts + 0.5) / (lib + 1) * 1e6)
    fit = lm_fit(e, design)
    sx = fit.amean + np.mean(np.log2(lib + 1)) - np.log2(1e6)
    sy = np.sqrt(fit.sigma)
    nonzero = y_counts.sum(axis=1) != 0
    lx, ly = lowess(sx[nonzero], sy[nonzero], f=span)
    fitted = fit.coefficients @ x.T
    fitted_logcount = np.log2(1e-6 * (2.0**fitted) * (lib + 1))
    w = 1.0 / _approx_rule2(lx, ly, fitted_logcount.ravel()).reshape(fitted.shape) ** 4
    return VoomResult(E=e, weights=w, lib_size=lib, design=x, trend_x=lx, trend_y=ly)


# --------------------------------------------------------------------------------------------------
# Contrasts
# --------------------------------------------------------------------------------------------------
def contrasts_fit(fit: LinearModelFit, contrasts: np.ndarray | sp.spmatrix | pd.DataFrame,
                  contrast_names: Sequence[str] | None = None) -> LinearModelFit:
    """Estimate contrasts of the coefficients, as limma's ``contrasts.fit``.

    The standard error of a contrast combines each gene's coefficient standard errors with the
    correlation of the coefficients of the *unweighted* design, limma's approximation for
    weighted fits.

    Parameters
    ----------
    fit
        From :func:`lm_fit`.
    contrasts
        Coefficients x contrasts matrix (dense or sparse).
    contrast_names
        Names of the contrasts (default: the DataFrame's columns, or c1, c2...).

    Returns
    -------
    LinearModelFit
        A copy whose coefficients are the contrasts (moderated statistics cleared).
    """
    if isinstance(contrasts, pd.DataFrame):
        contrast_names = list(contrasts.columns) if contrast_names is None else contrast_names
        contrasts = contrasts.to_numpy(dtype=float)
    c = sp.csc_matrix(contrasts, dtype=float)
    n_coef = fit.coefficients.shape[1]
    if c.shape[0] != n_coef:
        raise ValueError(f"contrasts_fit: the contrast matrix has {c.shape[0]} rows but the fit {n_coef} coefficients")
    cov = fit.cov_coefficients
    sd = np.sqrt(np.diag(cov))
    corr = cov / np.outer(sd, sd)
    coef = np.asarray((c.T @ fit.coefficients.T).T)
    n_genes, n_con = fit.coefficients.shape[0], c.shape[1]
    stdev = np.empty((n_genes, n_con))
    for j in range(n_con):
        idx = c.indices[c.indptr[j]:c.indptr[j + 1]]
        vals = c.data[c.indptr[j]:c.indptr[j + 1]]
        v = fit.stdev_unscaled[:, idx] * vals  # genes x nnz
        stdev[:, j] = np.sqrt(np.einsum("ga,ab,gb->g", v, corr[np.ix_(idx, idx)], v))
    names = list(contrast_names) if contrast_names is not None else [f"c{j + 1}" for j in range(n_con)]
    cov_con = np.asarray((c.T @ cov) @ c)
    return dataclasses.replace(fit, coefficients=coef, stdev_unscaled=stdev, cov_coefficients=cov_con,
                               coef_names=names, t=None, p_value=None, lods=None)
