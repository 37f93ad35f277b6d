"""Synthetic CRISPRi Perturb-seq screens in the Replogle layout, to test the label pipeline.

:func:`synthetic_perturbseq` draws negative-binomial counts with per-gene means and sizes taken
from a real single-cell baseline (:func:`read_basal_baseline`), knocks each target down and
changes a few downstream genes of most perturbations, and records what it changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

__all__ = ["read_basal_baseline", "synthetic_perturbseq"]


def read_basal_baseline(path: str | Path) -> pd.DataFrame:
    """Read a single-cell baseline (``response_id, relative_expression, expression_size``).

    Returns
    -------
    pandas.DataFrame
        Indexed by Ensembl id, columns ``relative_expression`` (fraction of a cell's UMIs) and
        ``expression_size`` (negative-binomial size).
    """
    path = Path(path)
    df = pd.read_csv(path, sep="\t")
    need = {"response_id", "relative_expression", "expression_size"}
    if not need <= set(df.columns):
        raise ValueError(f"{path}: expected columns {sorted(need)}, found {list(df.columns)}")
    return df.drop_duplicates("response_id").set_index("response_id")[["relative_expression", "expression_size"]]


def synthetic_perturbseq(
    gene_ids: Sequence[str],
    gene_symbols: Sequence[str],
    relative_expression: np.ndarray,
    size: np.ndarray,
    targets: Sequence[str],
    *,
    n_cells: int = 2000,
    control_fraction: float = 0.2,
    umis_per_cell: float = 10_000,
    knockdown: float = 0.15,
    effect_fraction: float = 0.7,
    max_effects: int = 40,
    log2_effect_sd: float = 1.2,
    seed: int = 0,
):
    """Draw a CRISPRi Perturb-seq screen in the Replogle layout.

    Parameters
    ----------
    gene_ids, gene_symbols : sequence of str
        Ensembl ids (``var_names``) and symbols (``var["gene_name"]``) of the measured genes.
    relative_expression, size : numpy.ndarray
        Per gene: mean fraction of a cell's UMIs and negative-binomial size (e.g. from
        :func:`read_basal_baseline`), so that sparsity and mean–variance look real.
    targets : sequence of str
        Perturbed genes (symbols). A target that is measured is knocked down to ``knockdown`` of
        its level.
    n_cells, control_fraction
        Cells, and the share of non-targeting cells.
    umis_per_cell : float
        Median library size; sizes vary log-normally (sd 0.3).
    effect_fraction : float
        Share of perturbations with downstream effects; the others change nothing but their
        target (negative controls).
    max_effects, log2_effect_sd
        An effective perturbation changes 5 to ``max_effects`` genes by a log2 fold change drawn
        from N(0, ``log2_effect_sd``), pushed away from 0 by at least 0.5.
    seed : int

    Returns
    -------
    anndata.AnnData
        Integer counts in ``X`` (CSR, float32); ``obs["gene"]`` the target or ``non-targeting``;
        ``var["gene_name"]`` the symbols; ``uns["true_effects"]`` (``pert, gene, log2fc``), what
        the simulation changed.
    """
    import anndata as ad

    rng = np.random.default_rng(seed)
    gene_ids = np.asarray(gene_ids, dtype=str)
    symbols = np.asarray(gene_symbols, dtype=str)
    frac = np.asarray(relative_expression, dtype=float)
    size = np.asarray(size, dtype=float)
    n_genes = gene_ids.size
    if not (symbols.size == frac.size == size.size == n_genes):
        raise ValueError("gene_ids, gene_symbols, relative_expression and size must have one entry per gene")
    frac = frac / frac.sum()
    targets = [str(t) for t in targets]
    labels = np.where(rng.random(n_cells) < control_fraction, "non-targeting",
                      np.asarray(targets, dtype=object)[rng.integers(0, len(targets), n_cells)])
    log2fc = np.zeros((len(targets), n_genes))
    effects = []
    symbol_index = pd.Index(symbols)
    for k, target in enumerate(targets):
        own = symbol_index.get_indexer([target])[0]
        if rng.random() < effect_fraction:
            n_eff = int(rng.integers(5, max_effects + 1))
            cols = rng.choice(np.setdiff1d(np.arange(n_genes), [own]), size=min(n_eff, n_genes - 1), replace=False)
            lfc = rng.normal(0, log2_effect_sd, cols.size)
            lfc = np.sign(lfc) * np.maximum(np.abs(lfc), 0.5)
            log2fc[k, cols] = lfc
            effects.append(pd.DataFrame({"pert": target, "gene": symbols[cols], "log2fc": lfc}))
        if own >= 0:
            log2fc[k, own] = np.log2(knockdown)
    lib = umis_per_cell * rng.lognormal(0, 0.3, n_cells)
    row_fc = np.ones((n_cells, n_genes))
    is_pert = labels != "non-targeting"
    which = pd.Index(targets).get_indexer(labels[is_pert])
    row_fc[is_pert] = 2.0 ** log2fc[which]
    mean = lib[:, None] * frac[None, :] * row_fc
    # Negative binomial as a gamma-Poisson mixture: mean m, size s (variance m + m^2 / s).
    counts = rng.poisson(rng.gamma(size[None, :], mean / size[None, :]))
    obs = pd.DataFrame({"gene": pd.Categorical(labels)}, index=[f"cell{i}" for i in range(n_cells)])
    var = pd.DataFrame({"gene_name": symbols}, index=pd.Index(gene_ids, name="gene_id"))
    truth = pd.concat(effects, ignore_index=True) if effects else pd.DataFrame(columns=["pert", "gene", "log2fc"])
    return ad.AnnData(X=sp.csr_matrix(counts.astype(np.float32)), obs=obs, var=var, uns={"true_effects": truth})
