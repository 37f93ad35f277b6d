"""edgeR's gene filter and library normalisation, ported from R: ``filterByExpr`` and TMM factors.

Both reproduce edgeR's results to numerical precision (tests/pertsci/test_limma_voom.py compares
them with R):

- :func:`filter_by_expr`: edgeR's ``filterByExpr`` (Chen, Lun & Smyth 2016, F1000Research 5:1438):
  keep genes with at least ``min_count`` reads per median library in as many samples as the smallest
  group of the design, and ``min_total_count`` reads in all. The smallest group of a design is
  ``1 / max(leverage)``, with the leverages of R's ``hat`` (:func:`hat_values`).
- :func:`calc_norm_factors`: edgeR's TMM normalisation factors (Robinson & Oshlack 2010, Genome
  Biol. 11:R25), the library scaling that ``voom`` multiplies into the library sizes.

Orientation: as in edgeR, matrices are **genes x samples** (``counts[g, s]``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy import stats

__all__ = ["calc_norm_factors", "filter_by_expr", "hat_values"]


def hat_values(design: np.ndarray) -> np.ndarray:
    """Leverages of a design (R's ``hat``): the diagonal of the projection onto its column space.

    R's ``hat(x, intercept=TRUE)`` adds an intercept column first; for the designs used here
    (which contain a full set of group indicators) the intercept is already in the column space,
    and it is added here too so that both agree for any design.

    Parameters
    ----------
    design
        Samples x coefficients.

    Returns
    -------
    numpy.ndarray
        One leverage per sample.
    """
    x = np.column_stack([np.ones(design.shape[0]), np.asarray(design, dtype=float)])
    u, s, _ = np.linalg.svd(x, full_matrices=False)
    # Same rank rule as LINPACK's dqrdc2 with tol = 1e-7, relative to the largest singular value.
    rank = int(np.sum(s > s[0] * 1e-7)) if s.size else 0
    return np.sum(u[:, :rank] ** 2, axis=1)


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
