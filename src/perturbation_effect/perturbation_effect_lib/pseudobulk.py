"""Pseudobulk profiles of a Perturb-seq screen, from single-cell h5ad files.

A genetic Perturb-seq screen is summarised, as in Ahlmann-Eltze, Huber & Anders (Nature Methods
2025, Methods "Data preprocessing"), by one expression profile per perturbation: the mean of the
cells' log-normalised expression (``log1p`` of counts scaled to a fixed total per cell), plus the
same mean over the control cells.

Two public single-cell layouts are read:

* **GEARS** (Roohani et al. 2024): ``obs["condition"]`` is ``"ctrl"`` for control cells,
  ``"A+ctrl"`` (or ``"ctrl+A"``) for a single perturbation of gene ``A`` and ``"A+B"`` for a
  combination; ``X`` is log-normalised; ``var["gene_name"]`` holds symbols when ``var_names`` are
  Ensembl ids. GEARS's published files (``perturb_processed.h5ad`` of its Harvard Dataverse
  archives) also carry ``obs`` columns ``cell_type``, ``dose_val``, ``control`` and
  ``condition_name`` and, in ``uns``, per-condition DE gene lists (``rank_genes_groups_cov_all``,
  ``top_non_dropout_de_20``...): they are not read (only ``X``, ``obs`` and ``var`` are), which
  spares the memory of millions of gene names in ``uns``.
* **scPerturb** (Peidli et al. 2024): ``obs["perturbation"]`` is ``"control"`` for control cells,
  a gene symbol for a single perturbation and symbols joined by ``"_"`` for a combination (the
  number in ``obs["nperts"]``); ``X`` holds raw counts.
* **PerturBench** (Wu et al. 2024, arXiv:2408.10609; its data configs' ``perturbation_key:
  condition``, ``perturbation_control_value: control``, ``perturbation_combination_delimiter: +``):
  ``obs["condition"]`` is ``"control"`` for control cells, ``"A"`` for a single perturbation and
  ``"A+B"`` for a combination; ``X`` is log-normalised. One file may hold several screens and
  cell lines (``obs["dataset"]``, ``obs["cell_type"]``, ``obs["treatment"]``): the reader refuses
  to pool them, and ``obs_filter`` selects one.

All three are turned into one standard: ``obs["condition"]`` in GEARS style and log-normalised
``X``; ``uns["layout"]`` names the layout read and ``uns["obs_filter"]`` the cells selected.
Conditions are keyed canonically (targets sorted, joined by ``+``; see :func:`condition_key`) so
that ``"A+B"`` and ``"B+A"`` are one perturbation. ``read_perturbseq(..., input_format="auto")``
tells the layouts apart by their control label: ``ctrl`` in ``obs["condition"]`` is GEARS,
``control`` there is PerturBench, and ``obs["perturbation"]`` without ``obs["condition"]`` is scPerturb.
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
    "LAYOUTS",
    "PERTURBENCH_CONTEXT",
    "parse_obs_filter",
    "select_cells",
    "detect_layout",
    "read_gears",
    "read_scperturb",
    "read_perturbench",
    "read_perturbseq",
    "read_gene_list",
    "keep_perturbable",
    "perturbation_keys",
    "pseudobulk",
    "half_pseudobulk",
]

#: The GEARS label of control cells (and the filler of single perturbations, ``A+ctrl``).
CONTROL = "ctrl"
#: Labels of control cells accepted when reading other layouts.
_CONTROL_ALIASES = {"ctrl", "control", "non-targeting", "nontargeting", "non_targeting", ""}
#: PerturBench's label of control cells.
PERTURBENCH_CONTROL = "control"
#: The layouts :func:`read_perturbseq` reads.
LAYOUTS = ("gears", "scperturb", "perturbench")
#: Columns of PerturBench's layout that tell screens, cell lines and co-treatments apart: the
#: cells of one pseudobulk must share their values (PerturBench's ``covariate_keys``, and the
#: ``dataset`` column of a file that holds several screens).
PERTURBENCH_CONTEXT = ("dataset", "cell_type", "treatment")


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


def _standardise(adata: ad.AnnData, conditions: Iterable[str], *, path: str, normalise: bool, layout: str,
                 obs_filter: Sequence[str] | None) -> ad.AnnData:
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
    return ad.AnnData(X=X, obs=obs, var=var, uns={"layout": layout, "obs_filter": list(obs_filter or [])})


def parse_obs_filter(obs_filter: Sequence[str] | None) -> list[tuple[str, str]]:
    """``["dataset=norman19", "cell_type=K562"]`` as ``(column, value)`` pairs (an empty list for none).

    Raises
    ------
    ValueError
        For an entry without ``=`` or with an empty column name.
    """
    if isinstance(obs_filter, str):
        obs_filter = [obs_filter]
    pairs = []
    for entry in obs_filter or []:
        column, sep, value = str(entry).partition("=")
        if not sep or not column.strip():
            raise ValueError(f"obs filter {entry!r}: expected <obs column>=<value>, e.g. dataset=norman19")
        pairs.append((column.strip(), value.strip()))
    return pairs


def select_cells(obs: pd.DataFrame, obs_filter: Sequence[str] | None, *, path: str | Path) -> np.ndarray:
    """The cells whose ``obs`` values equal every ``column=value`` of ``obs_filter`` (compared as strings).

    Parameters
    ----------
    obs
        The cells' metadata.
    obs_filter
        ``column=value`` entries, all of which a selected cell meets; ``None`` or empty selects every cell.
    path
        The file the cells come from, named in errors.

    Returns
    -------
    numpy.ndarray
        A boolean mask over the rows of ``obs``.

    Raises
    ------
    ValueError
        Naming the file, when a column is missing or the filter selects no cell (with the values
        each filtered column has).
    """
    keep = np.ones(len(obs), dtype=bool)
    pairs = parse_obs_filter(obs_filter)
    for column, value in pairs:
        if column not in obs.columns:
            raise ValueError(f"{path}: obs filter {column}={value}: obs has no column {column!r}; found {list(obs.columns)}")
        keep &= (obs[column].astype(str) == value).to_numpy()
    if pairs and not keep.any():
        present = "; ".join(f"obs['{c}'] has {_some(obs[c])}" for c in dict(pairs))
        raise ValueError(f"{path}: obs filter {_describe(obs_filter)} selects no cell ({present})")
    return keep


def _some(values: pd.Series, n: int = 12) -> str:
    """The distinct values of a column, sorted, at most ``n`` of them (for error messages)."""
    distinct = sorted(pd.unique(values.astype(str)))
    return str(distinct[:n])[:-1] + (f", ... ({len(distinct)} in all)]" if len(distinct) > n else "]")


def _describe(obs_filter: Sequence[str] | None) -> str:
    return ", ".join(f"{c}={v}" for c, v in parse_obs_filter(obs_filter))


def detect_layout(obs: pd.DataFrame, *, path: str | Path) -> str:
    """The layout of a Perturb-seq file, from its cells' metadata: ``"gears"``, ``"perturbench"`` or ``"scperturb"``.

    ``obs["condition"]`` labelling control cells ``ctrl`` is GEARS's layout, ``control`` PerturBench's;
    ``obs["perturbation"]`` without ``obs["condition"]`` is scPerturb's.

    Raises
    ------
    ValueError
        Naming the file, when neither column is there, or ``obs["condition"]`` has neither control
        label (or both).
    """
    if "condition" in obs.columns:
        values = pd.unique(obs["condition"].astype(str))
        tokens = {part.strip().lower() for value in values for part in value.split("+")}
        gears, perturbench = CONTROL in tokens, PERTURBENCH_CONTROL in tokens
        if gears != perturbench:
            return "gears" if gears else "perturbench"
        labels = "both 'ctrl' and 'control'" if gears else "neither 'ctrl' (GEARS) nor 'control' (PerturBench)"
        raise ValueError(f"{path}: cannot tell the layout: obs['condition'] labels control cells with {labels}; "
                         f"found {_some(obs['condition'])}")
    if "perturbation" in obs.columns:
        return "scperturb"
    raise ValueError(f"{path}: cannot tell the layout: obs has neither 'condition' (GEARS, PerturBench) nor "
                     f"'perturbation' (scPerturb); found {sorted(obs.columns)}")


def _selected(adata: ad.AnnData, obs_filter: Sequence[str] | None, path: str, *, needs: tuple[str, str, str]) -> ad.AnnData:
    """The cells the obs filter keeps, of a file that has the layout's perturbation column.

    ``needs`` is ``(column, layout, its values)``, for the error when the column is missing.
    """
    column, layout, values = needs
    if column not in adata.obs.columns:
        raise ValueError(f"{path}: {layout} format needs obs[{column!r}] ({values}); "
                         f"found obs columns {list(adata.obs.columns)}")
    if not parse_obs_filter(obs_filter):
        return adata
    return adata[select_cells(adata.obs, obs_filter, path=path)].copy()


def _parsed(obs: pd.DataFrame, column: str, path: str | None = None, *, sep: str = "+", sort: bool = False) -> list:
    """The targets of each cell's ``obs[column]`` (sorted with ``sort``), each distinct value parsed once.

    A screen has thousands of cells per condition. A bad value is one error, naming the file (``path``)
    and the column when given, and the first bad value in the cells' order.
    """
    values = obs[column].astype(str)
    parsed = {}
    for value in pd.unique(values):
        try:
            targets = parse_condition(value, sep=sep)
        except ValueError as err:
            if path is None:
                raise
            raise ValueError(f"{path}: obs[{column!r}]: {err}") from None
        parsed[value] = tuple(sorted(targets)) if sort else targets
    return [parsed[value] for value in values]


def _gears(adata: ad.AnnData, *, path: str, obs_filter: Sequence[str] | None) -> ad.AnnData:
    adata = _selected(adata, obs_filter, path, needs=("condition", "GEARS", "'ctrl', 'A+ctrl', 'A+B'"))
    conditions = [condition_name(t) for t in _parsed(adata.obs, "condition", path)]
    return _standardise(adata, conditions, path=path, normalise=is_count_matrix(adata.X), layout="gears", obs_filter=obs_filter)


def _scperturb(adata: ad.AnnData, *, path: str, obs_filter: Sequence[str] | None) -> ad.AnnData:
    adata = _selected(adata, obs_filter, path, needs=("perturbation", "scPerturb", "'control', 'A', 'A_B'"))
    raw = adata.obs["perturbation"].astype(str).to_numpy()
    targets = _parsed(adata.obs, "perturbation", path, sep="_")
    if "nperts" in adata.obs.columns:
        nperts = pd.to_numeric(adata.obs["nperts"], errors="coerce").to_numpy()
        counts = np.array([len(t) for t in targets])
        bad = np.isfinite(nperts) & (nperts != counts)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{path}: obs['perturbation'] {raw[i]!r} names {counts[i]} target(s) but obs['nperts'] is "
                             f"{nperts[i]:g} ({int(bad.sum())} cells disagree); gene names containing '_' are not supported")
    conditions = [condition_name(t) for t in targets]
    return _standardise(adata, conditions, path=path, normalise=is_count_matrix(adata.X), layout="scperturb", obs_filter=obs_filter)


def _perturbench(adata: ad.AnnData, *, path: str, obs_filter: Sequence[str] | None) -> ad.AnnData:
    adata = _selected(adata, obs_filter, path, needs=("condition", "PerturBench", "'control', 'A', 'A+B'"))
    selected = f" selected by obs filter {_describe(obs_filter)}" if parse_obs_filter(obs_filter) else ""
    mixed = {c: _some(adata.obs[c]) for c in PERTURBENCH_CONTEXT
             if c in adata.obs.columns and len(pd.unique(adata.obs[c].astype(str))) > 1}
    if mixed:
        # The same condition in two screens or cell lines is two perturbations: one mean would pool them.
        column = next(iter(mixed))
        example = sorted(pd.unique(adata.obs[column].astype(str)))[0]
        raise ValueError(f"{path}: the cells{selected} come from more than one screen or context "
                         f"({'; '.join(f'obs[{c!r}]: {v}' for c, v in mixed.items())}); a pseudobulk must not pool them: "
                         f"select one with an obs filter, e.g. {column}={example}")
    conditions = [condition_name(t) for t in _parsed(adata.obs, "condition", path)]
    if CONTROL not in conditions:
        raise ValueError(f"{path}: no control cells (obs['condition'] == 'control') among the cells{selected}")
    return _standardise(adata, conditions, path=path, normalise=is_count_matrix(adata.X), layout="perturbench",
                        obs_filter=obs_filter)


_READERS = {"gears": _gears, "scperturb": _scperturb, "perturbench": _perturbench}


def _read_cells(path: str | Path) -> ad.AnnData:
    """``X``, ``obs`` and ``var`` of an h5ad file, without ``uns``, ``obsm``, ``layers``...

    Files of anndata 0.8 or later are read element by element; older layouts (no encoding
    attributes) are read whole by :func:`anndata.read_h5ad`, which converts them.
    """
    import h5py

    try:
        from anndata.io import read_elem
    except ImportError:  # anndata < 0.11
        from anndata.experimental import read_elem
    with h5py.File(path, "r") as fh:
        if "obs" not in fh or "var" not in fh or "X" not in fh:
            raise ValueError(f"{path}: not an h5ad file with X, obs and var; found {sorted(fh.keys())}")
        if "encoding-type" not in fh["obs"].attrs or "encoding-type" not in fh["var"].attrs:
            legacy = True
        else:
            legacy = False
            obs, var, X = read_elem(fh["obs"]), read_elem(fh["var"]), read_elem(fh["X"])
    if legacy:
        return ad.read_h5ad(path)
    return ad.AnnData(X=X, obs=obs, var=var)


def read_gears(path: str | Path, obs_filter: Sequence[str] | None = None) -> ad.AnnData:
    """Read a GEARS-format Perturb-seq h5ad into the standard layout.

    ``X`` is taken as log-normalised unless it holds raw counts (then it is log-normalised here).
    ``obs_filter`` keeps some of the cells (:func:`select_cells`).

    Raises
    ------
    ValueError
        Naming the file, when ``obs["condition"]`` is missing or a condition cannot be parsed, or
        the filter selects nothing.
    """
    return _gears(_read_cells(path), path=str(path), obs_filter=obs_filter)


def read_scperturb(path: str | Path, obs_filter: Sequence[str] | None = None) -> ad.AnnData:
    """Read an scPerturb-format h5ad (raw counts, ``obs["perturbation"]``) into the standard layout.

    Combinations are written ``A_B`` by scPerturb; ``obs["nperts"]``, when present, must agree with
    the number of targets parsed. ``obs_filter`` keeps some of the cells (:func:`select_cells`).

    Raises
    ------
    ValueError
        Naming the file, when ``obs["perturbation"]`` is missing or disagrees with ``nperts``, or the
        filter selects nothing.
    """
    return _scperturb(_read_cells(path), path=str(path), obs_filter=obs_filter)


def read_perturbench(path: str | Path, obs_filter: Sequence[str] | None = None) -> ad.AnnData:
    """Read a PerturBench-format h5ad (``obs["condition"]`` ``control`` / ``A`` / ``A+B``) into the standard layout.

    ``X`` is taken as log-normalised unless it holds raw counts. A PerturBench file may hold
    several screens (``obs["dataset"]``), cell lines (``obs["cell_type"]``) or co-treatments
    (``obs["treatment"]``); the cells read must share all three, which ``obs_filter`` (e.g.
    ``["dataset=mcfaline23", "cell_type=A172"]``, see :func:`select_cells`) arranges.

    Raises
    ------
    ValueError
        Naming the file, when ``obs["condition"]`` is missing or cannot be parsed, the filter
        selects nothing, the cells read mix screens or contexts, or none of them is a control.
    """
    return _perturbench(_read_cells(path), path=str(path), obs_filter=obs_filter)


def read_perturbseq(path: str | Path, input_format: str = "auto", obs_filter: Sequence[str] | None = None) -> ad.AnnData:
    """Read a Perturb-seq h5ad of any layout (``"gears"``, ``"scperturb"``, ``"perturbench"`` or ``"auto"``).

    ``"auto"`` tells the layout from the cells' metadata (:func:`detect_layout`); ``obs_filter``
    keeps the cells meeting every ``column=value`` entry (:func:`select_cells`).
    """
    if input_format != "auto" and input_format not in _READERS:
        raise ValueError(f"unknown input format {input_format!r}; expected auto, {', '.join(LAYOUTS)}")
    adata = _read_cells(path)
    layout = detect_layout(adata.obs, path=path) if input_format == "auto" else input_format
    return _READERS[layout](adata, path=str(path), obs_filter=obs_filter)


def read_gene_list(path: str | Path) -> list[str]:
    """Genes listed one per line (blank lines and ``#`` comments ignored).

    Raises
    ------
    ValueError
        Naming the file, when it lists no gene.
    """
    genes = [line.strip() for line in Path(path).read_text().splitlines()]
    genes = [g for g in genes if g and not g.startswith("#")]
    if not genes:
        raise ValueError(f"{path}: lists no gene")
    return genes


def keep_perturbable(cells: ad.AnnData, genes: Iterable[str], *, condition_col: str = "condition"
                     ) -> tuple[ad.AnnData, list[str]]:
    """Control cells and the cells of perturbations whose every target is in ``genes``.

    GEARS does this on loading a dataset (``PertData.load``, ``filter_pert_in_go``): a
    perturbation of a gene outside its perturbation graph (genes with GO annotation) is dropped
    before the split, so the paper's splits are drawn over the remaining perturbations only.

    Returns
    -------
    cells, dropped
        The kept cells (a copy; ``cells`` itself when nothing is dropped), and the dropped
        conditions (GEARS strings, sorted).
    """
    allowed = set(genes)
    conditions = cells.obs[condition_col].astype(str).to_numpy()
    verdict = {c: all(g in allowed for g in parse_condition(c)) for c in set(conditions)}
    dropped = sorted(c for c, ok in verdict.items() if not ok)
    if not dropped:
        return cells, dropped
    keep = np.array([verdict[c] for c in conditions], dtype=bool)
    return cells[keep].copy(), dropped


def perturbation_keys(cells: ad.AnnData, *, condition_col: str = "condition") -> list[str]:
    """Every perturbation of a screen (:func:`condition_key`, sorted), control excluded, however few its cells."""
    keys = {condition_key(tuple(sorted(parse_condition(c)))) for c in cells.obs[condition_col].astype(str).unique()}
    return sorted(keys - {CONTROL})


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
    targets = _parsed(adata.obs, condition_col, sort=True)
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
    keys = pd.Index([condition_key(t) for t in _parsed(adata.obs, condition_col, sort=True)])
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
