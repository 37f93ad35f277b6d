"""Linear models for RNA-seq counts: a Python port of the limma-voom pipeline and its edgeR helpers.

The functions follow the published algorithms and reproduce R's results to numerical precision:

- :func:`filter_by_expr`: edgeR's ``filterByExpr`` (Chen, Lun & Smyth 2016, F1000Research 5:1438):
  keep genes with at least ``min_count`` reads per median library in as many samples as the smallest
  group of the design, and ``min_total_count`` reads in all.
- :func:`calc_norm_factors`: edgeR's TMM normalisation factors (Robinson & Oshlack 2010, Genome
  Biol. 11:R25), the library scaling that ``voom`` multiplies into the library sizes.
- :func:`voom`: precision weights from the mean-variance trend of log-CPM (Law et al. 2014, Genome
  Biol. 15:R29), with R's ``lowess`` (Cleveland 1979) reimplemented in :func:`lowess`.
- :func:`lm_fit`: weighted least squares per gene (limma's ``lmFit``), vectorised across genes.
- :func:`contrasts_fit`: limma's ``contrasts.fit``, including its approximation of the contrast
  standard errors through the correlation of the unweighted coefficients.
- :func:`ebayes`: moderated t-statistics (Smyth 2004, Stat. Appl. Genet. Mol. Biol. 3:3), with the
  robust empirical Bayes hyperparameters of Phipson et al. 2016 (Ann. Appl. Stat. 10:946) through
  :func:`squeeze_var`, :func:`fit_f_dist` and :func:`fit_f_dist_robustly`, and the B-statistic.
- :func:`top_table` and :func:`p_adjust_bh`: limma's ``topTable`` columns and Benjamini-Hochberg.

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
from scipy import optimize, special, stats

from pertsci.multiple_testing import benjamini_hochberg

__all__ = [
    "LinearModelFit",
    "VoomResult",
    "calc_norm_factors",
    "contrasts_fit",
    "design_matrix",
    "ebayes",
    "filter_by_expr",
    "fit_f_dist",
    "fit_f_dist_robustly",
    "hat_values",
    "lm_fit",
    "lowess",
    "p_adjust_bh",
    "squeeze_var",
    "tmixture_matrix",
    "top_table",
    "trigamma_inverse",
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


def hat_values(design: np.ndarray) -> np.ndarray:
    """Leverages of a design (R's ``hat``): the diagonal of the projection onto its column space.

    R's ``hat(x, intercept=TRUE)`` adds an intercept column first; for the designs used here
    (which contain a full set of group indicators) the intercept is already in the column space,
    and it is added here too so that both agree for any design.
    """
    x = np.column_stack([np.ones(design.shape[0]), np.asarray(design, dtype=float)])
    u, s, _ = np.linalg.svd(x, full_matrices=False)
    # Same rank rule as LINPACK's dqrdc2 with tol = 1e-7, relative to the largest singular value.
    rank = int(np.sum(s > s[0] * 1e-7)) if s.size else 0
    return np.sum(u[:, :rank] ** 2, axis=1)


# --------------------------------------------------------------------------------------------------
# edgeR: filterByExpr and TMM
# --------------------------------------------------------------------------------------------------
def filter_by_expr(
    counts: np.ndarray | sp.spmatrix,
    design: np.ndarray | None = None,
    group: Sequence | None = None,
    lib_size: np.ndarray | None = None,
    min_count: float = 10,
    min_total_count: float = 15,
    large_n: float = 10,
    min_prop: float = 0.7,
) -> np.ndarray:
    """Genes worth testing, as edgeR's ``filterByExpr``.

    Parameters
    ----------
    counts
        Genes x samples counts.
    design
        Samples x coefficients design; the minimum group size is ``1 / max(leverage)``.
    group
        Sample groups (used instead of ``design`` when given).
    lib_size
        Library sizes (default: column sums).
    min_count, min_total_count, large_n, min_prop
        edgeR's thresholds.

    Returns
    -------
    numpy.ndarray
        Boolean mask over genes.
    """
    y = counts.toarray() if sp.issparse(counts) else np.asarray(counts, dtype=float)
    lib = y.sum(axis=0) if lib_size is None else np.asarray(lib_size, dtype=float)
    if group is not None:
        _, sizes = np.unique(np.asarray(group).astype(str), return_counts=True)
        min_size = float(sizes[sizes > 0].min())
    elif design is not None:
        min_size = 1.0 / float(np.max(hat_values(np.asarray(design, dtype=float))))
    else:
        min_size = float(y.shape[1])
    if min_size > large_n:
        min_size = large_n + (min_size - large_n) * min_prop
    cpm_cutoff = min_count / np.median(lib) * 1e6
    cpm = y / lib * 1e6
    tol = 1e-14
    keep_cpm = (cpm >= cpm_cutoff).sum(axis=1) >= (min_size - tol)
    keep_total = y.sum(axis=1) >= (min_total_count - tol)
    return keep_cpm & keep_total


def _quantile7(x: np.ndarray, p: float) -> float:
    """R's default quantile (type 7)."""
    return float(np.quantile(x, p, method="linear"))


def _tmm_factor(obs: np.ndarray, ref: np.ndarray, n_obs: float, n_ref: float, logratio_trim: float,
                sum_trim: float, do_weighting: bool, a_cutoff: float) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        log_r = np.log2((obs / n_obs) / (ref / n_ref))
        abs_e = (np.log2(obs / n_obs) + np.log2(ref / n_ref)) / 2
        v = (n_obs - obs) / n_obs / obs + (n_ref - ref) / n_ref / ref
    fin = np.isfinite(log_r) & np.isfinite(abs_e) & (abs_e > a_cutoff)
    log_r, abs_e, v = log_r[fin], abs_e[fin], v[fin]
    if log_r.size == 0 or np.max(np.abs(log_r)) < 1e-6:
        return 1.0
    n = log_r.size
    lo_l = math.floor(n * logratio_trim) + 1
    hi_l = n + 1 - lo_l
    lo_s = math.floor(n * sum_trim) + 1
    hi_s = n + 1 - lo_s
    # rank() with ties averaged, as R's rank does.
    rank_r = stats.rankdata(log_r)
    rank_e = stats.rankdata(abs_e)
    keep = (rank_r >= lo_l) & (rank_r <= hi_l) & (rank_e >= lo_s) & (rank_e <= hi_s)
    if do_weighting:
        f = np.nansum(log_r[keep] / v[keep]) / np.nansum(1 / v[keep])
    else:
        f = np.nanmean(log_r[keep]) if keep.any() else np.nan
    if not np.isfinite(f):
        f = 0.0
    return float(2.0**f)


def calc_norm_factors(
    counts: np.ndarray | sp.spmatrix,
    lib_size: np.ndarray | None = None,
    method: str = "TMM",
    ref_column: int | None = None,
    logratio_trim: float = 0.3,
    sum_trim: float = 0.05,
    do_weighting: bool = True,
    a_cutoff: float = -1e10,
) -> np.ndarray:
    """Normalisation factors of edgeR's ``calcNormFactors`` (TMM or none).

    Parameters
    ----------
    counts
        Genes x samples counts.
    lib_size
        Library sizes (default: column sums).
    method
        ``"TMM"`` (trimmed mean of M-values, Robinson & Oshlack 2010) or ``"none"``.
    ref_column
        Reference sample (default: the one whose upper quartile is closest to the mean).
    logratio_trim, sum_trim, do_weighting, a_cutoff
        edgeR's TMM parameters.

    Returns
    -------
    numpy.ndarray
        One factor per sample; they multiply to one.
    """
    x = counts.toarray() if sp.issparse(counts) else np.asarray(counts, dtype=float)
    n_samples = x.shape[1]
    lib = x.sum(axis=0) if lib_size is None else np.asarray(lib_size, dtype=float)
    if method not in ("TMM", "none"):
        raise ValueError(f"calc_norm_factors: method {method!r} is not implemented (TMM or none)")
    x = x[(x > 0).sum(axis=1) > 0]
    if x.shape[0] == 0 or n_samples == 1 or method == "none":
        return np.ones(n_samples)
    if ref_column is None:
        f75 = np.array([_quantile7(x[:, j], 0.75) for j in range(n_samples)]) / lib
        if np.median(f75) < 1e-20:
            ref_column = int(np.argmax(np.sqrt(x).sum(axis=0)))
        else:
            ref_column = int(np.argmin(np.abs(f75 - f75.mean())))
    ref = x[:, ref_column]
    f = np.array([_tmm_factor(x[:, i], ref, lib[i], lib[ref_column], logratio_trim, sum_trim, do_weighting, a_cutoff)
                  for i in range(n_samples)])
    return f / np.exp(np.mean(np.log(f)))


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
    # Filled by ebayes():
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


# --------------------------------------------------------------------------------------------------
# Empirical Bayes
# --------------------------------------------------------------------------------------------------
def trigamma_inverse(x: np.ndarray | float) -> np.ndarray:
    """Solve ``trigamma(y) = x`` for y by Newton's method (limma's ``trigammaInverse``)."""
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

    Returns
    -------
    (scale, df2)
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
    """Prior variance of the non-null coefficients, per contrast (limma's ``tmixture.matrix``)."""
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
    """Benjamini-Hochberg adjusted p-values (R's ``p.adjust(method="BH")``) over all entries, NaN kept."""
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
