"""Pseudobulk profiles of a Perturb-seq screen, from single-cell h5ad files.

A genetic Perturb-seq screen is summarised, as in Ahlmann-Eltze, Huber & Anders (Nature Methods
2025, Methods "Data preprocessing"), by one expression profile per perturbation: the mean of the
cells' log-normalised expression (``log1p`` of counts scaled to a fixed total per cell), plus the
same mean over the control cells.

Two public single-cell layouts are read:

* **GEARS** (Roohani et al. 2024): ``obs["condition"]`` is ``"ctrl"`` for control cells,
  ``"A+ctrl"`` (or ``"ctrl+A"``) for a single perturbation of gene ``A`` and ``"A+B"`` for a
  combination; ``X`` is log-normalised; ``var["gene_name"]`` holds symbols when ``var_names`` are
  Ensembl ids.
* **scPerturb** (Peidli et al. 2024): ``obs["perturbation"]`` is ``"control"`` for control cells,
  a gene symbol for a single perturbation and symbols joined by ``"_"`` for a combination (the
  number in ``obs["nperts"]``); ``X`` holds raw counts.

Both are turned into one standard: ``obs["condition"]`` in GEARS style and log-normalised ``X``.
Conditions are keyed canonically (targets sorted, joined by ``+``; see :func:`condition_key`) so
that ``"A+B"`` and ``"B+A"`` are one perturbation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

__all__ = [
    "CONTROL",
    "parse_condition",
    "condition_key",
    "condition_name",
    "log_normalize",
    "is_count_matrix",
    "read_gears",
    "read_scperturb",
    "read_perturbseq",
    "pseudobulk",
    "half_pseudobulk",
]

#: The GEARS label of control cells (and the filler of single perturbations, ``A+ctrl``).
CONTROL = "ctrl"
#: Labels of control cells accepted when reading other layouts.
_CONTROL_ALIASES = {"ctrl", "control", "non-targeting", "nontargeting", "non_targeting", ""}


def parse_condition(condition: str, *, sep: str = "+") -> tuple[str, ...]:
    """Target genes of a GEARS condition string.

    Parameters
    ----------
    condition
        ``"ctrl"``, ``"A+ctrl"``, ``"ctrl+A"`` or ``"A+B"`` (whitespace around names is ignored).
    sep
        Separator of the parts.

    Returns
    -------
    tuple of str
        The targets in the order given, without ``ctrl``; empty for a control condition.

    Raises
    ------
    ValueError
        For an empty part (``"A+"``) or the same gene twice (``"A+A"``).

    Examples
    --------
    >>> parse_condition("ctrl"), parse_condition("KLF1+ctrl"), parse_condition("CBL+CNN1")
    ((), ('KLF1',), ('CBL', 'CNN1'))
    """
    parts = [p.strip() for p in str(condition).split(sep)]
    if any(p == "" for p in parts) and str(condition).strip() != "":
        raise ValueError(f"condition {condition!r}: empty target name")
    targets = tuple(p for p in parts if p.lower() not in _CONTROL_ALIASES)
    if len(set(targets)) != len(targets):
        raise ValueError(f"condition {condition!r}: a gene appears twice")
    return targets


def condition_key(targets: Sequence[str]) -> str:
    """Canonical id of a perturbation: sorted targets joined by ``+`` (``"ctrl"`` for none)."""
    return "+".join(sorted(targets)) if targets else CONTROL


def condition_name(targets: Sequence[str]) -> str:
    """GEARS condition string of a set of targets: ``"A+ctrl"``, ``"A+B"`` (sorted) or ``"ctrl"``."""
    targets = sorted(targets)
    if not targets:
        return CONTROL
    return f"{targets[0]}+{CONTROL}" if len(targets) == 1 else "+".join(targets)


def is_count_matrix(X, *, n_check: int = 100_000) -> bool:
    """Whether a matrix looks like raw counts: non-negative integers (checked on a sample of values)."""
    values = X.data if sp.issparse(X) else np.asarray(X).ravel()
    values = values[:n_check]
    return bool(values.size == 0 or (np.all(values >= 0) and np.all(values == np.round(values))))


def log_normalize(counts, *, target_sum: float = 1e4) -> sp.csr_matrix:
    """``log1p`` of counts scaled so that every cell sums to ``target_sum`` (scanpy's defaults).

    Cells with no counts stay zero. Returns a float32 CSR matrix.
    """
    X = sp.csr_matrix(counts, dtype=np.float64)
    totals = np.asarray(X.sum(axis=1)).ravel()
    scale = np.divide(target_sum, totals, out=np.zeros_like(totals), where=totals > 0)
    X = sp.diags(scale) @ X
    X.data = np.log1p(X.data)
    return sp.csr_matrix(X, dtype=np.float32)


def _symbols(var: pd.DataFrame, var_names: pd.Index) -> pd.Index:
    """Gene symbols: ``var["gene_name"]`` (GEARS) or ``var["gene_symbol"]`` when present, else the names."""
    for col in ("gene_name", "gene_symbol", "gene_symbols"):
        if col in var.columns:
            return pd.Index(var[col].astype(str).to_numpy())
    return pd.Index(np.asarray(var_names).astype(str))


def _standardise(adata: ad.AnnData, conditions: Iterable[str], *, path: str, normalise: bool) -> ad.AnnData:
    X = adata.X
    if X is None:
        raise ValueError(f"{path}: X is empty; expected expression values")
    if normalise:
        X = log_normalize(X)
    elif not sp.issparse(X):
        X = np.asarray(X, dtype=np.float32)
    symbols = _symbols(adata.var, adata.var_names)
    if symbols.has_duplicates:
        # Two Ensembl ids can share a symbol; keep the first so that symbols index the genes.
        keep = ~symbols.duplicated()
        X = X[:, np.flatnonzero(keep)]
        symbols = symbols[keep]
    obs = pd.DataFrame({"condition": list(conditions)}, index=adata.obs_names.astype(str))
    var = pd.DataFrame(index=symbols)
    var.index.name = None
    return ad.AnnData(X=X, obs=obs, var=var)


def read_gears(path: str | Path) -> ad.AnnData:
    """Read a GEARS-format Perturb-seq h5ad into the standard layout.

    ``X`` is taken as log-normalised unless it holds raw counts (then it is log-normalised here).

    Raises
    ------
    ValueError
        Naming the file, when ``obs["condition"]`` is missing or a condition cannot be parsed.
    """
    adata = ad.read_h5ad(path)
    if "condition" not in adata.obs.columns:
        raise ValueError(f"{path}: GEARS format needs obs['condition'] ('ctrl', 'A+ctrl', 'A+B'); "
                         f"found obs columns {list(adata.obs.columns)}")
    conditions = []
    for value in adata.obs["condition"].astype(str):
        try:
            conditions.append(condition_name(parse_condition(value)))
        except ValueError as err:
            raise ValueError(f"{path}: obs['condition']: {err}") from None
    return _standardise(adata, conditions, path=str(path), normalise=is_count_matrix(adata.X))


def read_scperturb(path: str | Path) -> ad.AnnData:
    """Read an scPerturb-format h5ad (raw counts, ``obs["perturbation"]``) into the standard layout.

    Combinations are written ``A_B`` by scPerturb; ``obs["nperts"]``, when present, must agree with
    the number of targets parsed.

    Raises
    ------
    ValueError
        Naming the file, when ``obs["perturbation"]`` is missing or disagrees with ``nperts``.
    """
    adata = ad.read_h5ad(path)
    if "perturbation" not in adata.obs.columns:
        raise ValueError(f"{path}: scPerturb format needs obs['perturbation'] ('control', 'A', 'A_B'); "
                         f"found obs columns {list(adata.obs.columns)}")
    raw = adata.obs["perturbation"].astype(str).to_numpy()
    targets = []
    for value in raw:
        try:
            targets.append(parse_condition(value, sep="_"))
        except ValueError as err:
            raise ValueError(f"{path}: obs['perturbation']: {err}") from None
    if "nperts" in adata.obs.columns:
        nperts = pd.to_numeric(adata.obs["nperts"], errors="coerce").to_numpy()
        counts = np.array([len(t) for t in targets])
        bad = np.isfinite(nperts) & (nperts != counts)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{path}: obs['perturbation'] {raw[i]!r} names {counts[i]} target(s) but obs['nperts'] is "
                             f"{nperts[i]:g} ({int(bad.sum())} cells disagree); gene names containing '_' are not supported")
    conditions = [condition_name(t) for t in targets]
    return _standardise(adata, conditions, path=str(path), normalise=is_count_matrix(adata.X))


def read_perturbseq(path: str | Path, input_format: str = "auto") -> ad.AnnData:
    """Read a Perturb-seq h5ad of either layout (``"gears"``, ``"scperturb"`` or ``"auto"``)."""
    if input_format == "auto":
        import h5py

        with h5py.File(path, "r") as fh:
            columns = set(fh["obs"].keys()) if "obs" in fh else set()
        if "condition" in columns:
            input_format = "gears"
        elif "perturbation" in columns:
            input_format = "scperturb"
        else:
            raise ValueError(f"{path}: cannot tell the layout: obs has neither 'condition' (GEARS) nor "
                             f"'perturbation' (scPerturb); found {sorted(columns)}")
    if input_format == "gears":
        return read_gears(path)
    if input_format == "scperturb":
        return read_scperturb(path)
    raise ValueError(f"unknown input format {input_format!r}; expected auto, gears or scperturb")


def pseudobulk(adata: ad.AnnData, *, condition_col: str = "condition", min_cells: int = 1) -> tuple[ad.AnnData, pd.Series]:
    """Mean expression per perturbation and of the control cells.

    Parameters
    ----------
    adata
        Cells x genes, log-normalised ``X`` (dense or sparse), GEARS conditions in ``obs``.
    condition_col
        The ``obs`` column of GEARS condition strings.
    min_cells
        Perturbations with fewer cells are dropped (their mean is too noisy to score).

    Returns
    -------
    profiles, control
        ``profiles``: perturbations x genes (float64 ``X``), indexed by :func:`condition_key`, with
        ``obs`` columns ``condition`` (GEARS string), ``target_genes`` (targets joined by ``+``),
        ``n_targets`` and ``n_cells``; ``control``: the mean of the control cells per gene.

    Raises
    ------
    ValueError
        When there are no control cells or no perturbation with ``min_cells`` cells.
    """
    if condition_col not in adata.obs.columns:
        raise ValueError(f"obs has no column {condition_col!r}; found {list(adata.obs.columns)}")
    targets = [tuple(sorted(parse_condition(c))) for c in adata.obs[condition_col].astype(str)]
    keys = pd.Index([condition_key(t) for t in targets])
    codes, uniques = pd.factorize(keys, sort=True)
    # One sparse indicator product sums the cells of every group at once.
    indicator = sp.csr_matrix((np.ones(len(codes)), (codes, np.arange(len(codes)))), shape=(len(uniques), len(codes)))
    n_cells = np.asarray(indicator.sum(axis=1)).ravel()
    sums = indicator @ adata.X
    sums = sums.toarray() if sp.issparse(sums) else np.asarray(sums)
    means = sums.astype(np.float64) / n_cells[:, None]
    uniques = pd.Index(uniques)
    if CONTROL not in uniques:
        raise ValueError("no control cells (condition 'ctrl'); a pseudobulk change needs a control baseline")
    ctrl = uniques.get_loc(CONTROL)
    control = pd.Series(means[ctrl], index=adata.var_names.copy(), name="control_mean")
    keep = (np.arange(len(uniques)) != ctrl) & (n_cells >= min_cells)
    if not keep.any():
        raise ValueError(f"no perturbation has at least {min_cells} cells")
    names = uniques[keep]
    target_lists = [k.split("+") for k in names]
    obs = pd.DataFrame({
        "condition": [condition_name(t) for t in target_lists],
        "target_genes": list(names),
        "n_targets": np.array([len(t) for t in target_lists], dtype=np.int64),
        "n_cells": n_cells[keep].astype(np.int64),
    }, index=names.astype(str))
    profiles = ad.AnnData(X=means[keep], obs=obs, var=pd.DataFrame(index=adata.var_names.copy()))
    return profiles, control


def half_pseudobulk(adata: ad.AnnData, profiles: ad.AnnData, *, seed: int = 0,
                    condition_col: str = "condition") -> tuple[np.ndarray, np.ndarray]:
    """Mean expression of a random half of each perturbation's cells (a replicate of its profile).

    For a perturbation of ``n`` cells, ``floor(n / 2)`` cells (at least one) are drawn without
    replacement. Its distance to the mean of all ``n`` cells has the same expectation, per gene,
    as the distance of the true mean to the observed one (``sigma^2 / n`` when the halves are
    equal), so it predicts as a perfect model would under the data's own noise: the ceiling of
    an expression task.

    Parameters
    ----------
    adata
        Cells x genes, as given to :func:`pseudobulk`.
    profiles
        The output of :func:`pseudobulk` on ``adata`` (its rows are the perturbations to cover).
    seed
        Seed of :func:`numpy.random.default_rng`.
    condition_col
        The ``obs`` column of GEARS condition strings.

    Returns
    -------
    means, n_cells
        ``profiles.n_obs`` x genes half means (float64) and the cells each one averages.
    """
    keys = pd.Index([condition_key(tuple(sorted(parse_condition(c)))) for c in adata.obs[condition_col].astype(str)])
    # Each perturbation's cells, grouped once (a stable sort keeps them in file order).
    group = pd.Index(profiles.obs_names).get_indexer(keys)
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(profiles.n_obs + 1))
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    n_half = np.zeros(profiles.n_obs, dtype=np.int64)
    for i, key in enumerate(profiles.obs_names):
        cells = order[bounds[i]:bounds[i + 1]]
        if cells.size == 0:
            raise ValueError(f"perturbation {key!r} has no cells in the single-cell data")
        chosen = rng.choice(cells, size=max(1, cells.size // 2), replace=False)
        rows.extend([i] * chosen.size)
        cols.extend(chosen.tolist())
        n_half[i] = chosen.size
    indicator = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(profiles.n_obs, adata.n_obs))
    sums = indicator @ adata.X
    sums = sums.toarray() if sp.issparse(sums) else np.asarray(sums)
    return sums.astype(np.float64) / n_half[:, None], n_half
