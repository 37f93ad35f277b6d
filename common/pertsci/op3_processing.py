"""From single-cell counts to the OP3 task files: pseudobulk, gene filter, limma-voom DE per row.

This is the processing of Szałata et al. 2024 (§3.3 and "Lessons learned" of §4; appendix A):

1. :func:`pseudobulk`: sum the counts of the cells of each (plate, well, cell type); drop samples
   with fewer than ``min_cells`` cells or no counts.
2. :func:`filter_genes`: per cell type, edgeR's ``filterByExpr`` with the design
   ``~0 + sm_name + plate_name``; keep the genes that pass in every cell type.
3. :func:`limma_de`: TMM factors, ``voom`` and ``lmFit`` with the full-rank design
   ``~0 + cell_type:compound + plate``, one contrast per (cell type, compound) against DMSO of the
   same cell type, ``eBayes(robust=TRUE)``, Benjamini-Hochberg over all contrasts and genes, and
   the layers ``logFC, AveExpr, t, P.Value, adj.P.Value, B, is_de, is_de_adj, sign_log10_pval,
   clipped_sign_log10_pval``.
4. :func:`process_sc_counts`: ``de_train`` fitted on the train and control samples, ``de_test`` on
   all samples and restricted to the test rows, and ``id_map`` listing the test rows in order.

The DE itself is :mod:`pertsci.edger` (filterByExpr, TMM), :mod:`pertsci.limma_voom` (voom, lmFit,
contrasts.fit) and :mod:`pertsci.limma_ebayes` (eBayes, Benjamini-Hochberg).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from pertsci import limma_voom

# pertsci.edger and pertsci.limma_ebayes import scipy.stats (about a second of processor time) and
# only the DE functions need them: they are imported there, so that a process which simulates or
# sums cells without testing them (op3_simulation's callers) does not pay for them.

log = logging.getLogger(__name__)

CONTROL_COMPOUND = "Dimethyl Sulfoxide"
#: Layers every DE file has (the task's API) and those written only on request.
REQUIRED_LAYERS = ["logFC", "P.Value", "adj.P.Value", "is_de", "is_de_adj", "sign_log10_pval", "clipped_sign_log10_pval"]
OPTIONAL_LAYERS = ["AveExpr", "t", "B"]
ROW_COLUMNS = ["cell_type", "sm_name", "sm_lincs_id", "SMILES", "split", "control"]
SC_REQUIRED_OBS = ["cell_type", "sm_name", "donor_id", "plate_name", "well", "split"]


def counts_matrix(adata: ad.AnnData, where: str = "single-cell counts") -> sp.csr_matrix:
    """The integer counts of an AnnData: ``layers["counts"]`` when present, else ``X``.

    Parameters
    ----------
    adata
        Cells (or samples) x genes.
    where
        Name of the input in error messages.

    Returns
    -------
    scipy.sparse.csr_matrix
        The counts.

    Raises
    ------
    ValueError
        When the counts are negative or not whole numbers.
    """
    x = adata.layers["counts"] if "counts" in adata.layers else adata.X
    if x is None:
        raise ValueError(f"{where}: no counts in layers['counts'] or X")
    x = sp.csr_matrix(x)
    data = x.data
    if data.size and (np.any(data < 0) or np.any(data != np.round(data))):
        raise ValueError(f"{where}: counts must be non-negative integers (found {data.min()}..{data.max()}, "
                         "non-integers or negatives); pass raw UMI counts in X or layers['counts']")
    return x


def half_of_cells(codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random half of the cells of every group: ``ceil(n / 2)`` of a group of ``n`` cells.

    Parameters
    ----------
    codes
        The group (e.g. pseudobulk sample) of each cell, as integers ``0..G-1``.
    rng
        The random generator of the split.

    Returns
    -------
    numpy.ndarray
        Boolean mask over the cells: ``True`` for the half kept. Every group with a cell keeps at
        least one, so a split never removes a sample.
    """
    codes = np.asarray(codes)
    if codes.size == 0:
        return np.zeros(0, dtype=bool)
    # Cells sorted by group, in random order within it; a cell's rank within its group decides.
    order = np.lexsort((rng.random(codes.size), codes))
    sorted_codes = codes[order]
    rank = np.arange(codes.size) - np.searchsorted(sorted_codes, sorted_codes, side="left")
    size = np.bincount(codes)
    mask = np.zeros(codes.size, dtype=bool)
    mask[order] = rank < (size[sorted_codes] + 1) // 2
    return mask


def pseudobulk(adata: ad.AnnData, keys: Sequence[str] = ("plate_name", "well", "cell_type"), *, min_cells: int = 10,
               where: str = "single-cell counts", half: np.ndarray | None = None) -> ad.AnnData:
    """Sum the counts of the cells of each group.

    Parameters
    ----------
    adata
        Cells x genes with counts (``layers["counts"]`` or ``X``) and the ``keys`` in ``obs``.
    keys
        ``obs`` columns defining a sample.
    min_cells
        Samples with fewer cells are dropped (the paper drops those with < 10 cells).
    where
        Name of the input in error messages.
    half
        Optional boolean mask over the cells (e.g. :func:`half_of_cells`): the counts of the
        cells it selects are also summed per sample, into ``layers["counts_half"]`` and
        ``obs["n_cells_half"]``. Samples are kept or dropped on all their cells.

    Returns
    -------
    anndata.AnnData
        Samples x genes (float counts in ``X``); ``obs`` holds the keys, ``n_cells`` and every
        column with one value per sample (``sm_name``, ``donor_id``, ``split``...).
    """
    missing = [k for k in keys if k not in adata.obs.columns]
    if missing:
        raise ValueError(f"{where}: obs lacks {missing} (needed to pseudobulk by {list(keys)})")
    x = counts_matrix(adata, where)
    group_frame = adata.obs[list(keys)].astype(str)
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(group_frame))
    n_groups = len(uniques)
    indicator = sp.csr_matrix((np.ones(adata.n_obs), (codes, np.arange(adata.n_obs))), shape=(n_groups, adata.n_obs))
    summed = np.asarray((indicator @ x).todense(), dtype=float)
    n_cells = np.bincount(codes, minlength=n_groups)
    obs = pd.DataFrame(list(uniques), columns=list(keys))
    # Columns constant within every group are carried over (one-to-one with the sample).
    first = np.zeros(n_groups, dtype=int)
    first[codes[::-1]] = np.arange(adata.n_obs)[::-1]
    for col in adata.obs.columns:
        if col in keys:
            continue
        values = adata.obs[col]
        per_group = pd.Series(values.to_numpy()).groupby(codes).nunique(dropna=False)
        if (per_group <= 1).all():
            obs[col] = values.to_numpy()[first]
    obs["n_cells"] = n_cells
    obs.index = [" | ".join(map(str, u)) for u in uniques]
    layers = {}
    if half is not None:
        half = np.asarray(half, dtype=bool)
        if half.shape != (adata.n_obs,):
            raise ValueError(f"{where}: the half-cell mask has shape {half.shape}, expected ({adata.n_obs},)")
        layers["counts_half"] = np.asarray((indicator @ sp.diags(half.astype(float)) @ x).todense(), dtype=float)
        obs["n_cells_half"] = np.bincount(codes[half], minlength=n_groups)
    keep = (n_cells >= min_cells) & (summed.sum(axis=1) > 0)
    if not keep.any():
        raise ValueError(f"{where}: no pseudobulk sample has {min_cells} or more cells")
    dropped = int((~keep).sum())
    if dropped:
        log.info("pseudobulk: dropped %d of %d samples with < %d cells or no counts", dropped, n_groups, min_cells)
    return ad.AnnData(X=summed[keep], obs=obs[keep].copy(), var=pd.DataFrame(index=adata.var_names.copy()),
                      layers={k: v[keep] for k, v in layers.items()})


def filter_genes(pb: ad.AnnData, *, cell_type_key: str = "cell_type", factors: Sequence[str] = ("sm_name", "plate_name"),
                 **filter_kwargs) -> np.ndarray:
    """Genes passing edgeR's ``filterByExpr`` in every cell type (design ``~0 + sm_name + plate_name``).

    Parameters
    ----------
    pb
        Pseudobulk samples x genes (counts).
    cell_type_key
        The ``obs`` column of the cell types.
    factors
        The ``obs`` columns of the design; a factor with one level in a cell type is left out
        (except the first, which spans the intercept).
    **filter_kwargs
        Thresholds of :func:`pertsci.edger.filter_by_expr`.

    Returns
    -------
    numpy.ndarray
        Boolean mask over ``pb.var_names``.
    """
    from pertsci import edger  # noqa: PLC0415 - imports scipy.stats, see the module imports

    keep = np.ones(pb.n_vars, dtype=bool)
    for ct in pd.unique(pb.obs[cell_type_key]):
        sub = pb[pb.obs[cell_type_key] == ct]
        design = limma_voom.design_matrix(sub.obs, [f for f in factors if sub.obs[f].nunique() > 1 or f == factors[0]])
        keep &= edger.filter_by_expr(np.asarray(sub.X).T, design.to_numpy(), **filter_kwargs)
    return keep


def _group_label(cell_type: str, sm_name: str) -> str:
    return f"{cell_type}\t{sm_name}"


def design_and_contrasts(pb: ad.AnnData, rows: pd.DataFrame, control: str = CONTROL_COMPOUND
                         ) -> tuple[pd.DataFrame, sp.csc_matrix]:
    """The design ``~0 + cell_type:compound + plate`` of the samples and one contrast per row.

    Parameters
    ----------
    pb
        Pseudobulk samples with ``obs`` columns ``cell_type``, ``sm_name``, ``plate_name``.
    rows
        The rows to test (``cell_type``, ``sm_name``), in contrast order.
    control
        The reference compound.

    Returns
    -------
    design
        Samples x coefficients (``group<cell type>\\t<compound>`` indicators, then ``plate<name>``
        for every plate but the first).
    contrasts
        Coefficients x rows: +1 for the row's group, -1 for DMSO of its cell type.
    """
    obs = pb.obs
    for col in ("cell_type", "sm_name", "plate_name"):
        if col not in obs.columns:
            raise ValueError(f"pseudobulk obs lacks {col!r}")
    group = (obs["cell_type"].astype(str) + "\t" + obs["sm_name"].astype(str)).to_numpy()
    design_obs = pd.DataFrame({"group": pd.Categorical(group), "plate": obs["plate_name"].astype(str).to_numpy()},
                              index=obs.index)
    # ~0 + group + plate; plate drops its first level, and is left out when there is one plate.
    factors = ["group", "plate"] if design_obs["plate"].nunique() > 1 else ["group"]
    design = limma_voom.design_matrix(design_obs, factors)
    coef_index = {name[len("group"):]: j for j, name in enumerate(design.columns) if name.startswith("group")}
    labels = [_group_label(c, s) for c, s in zip(rows["cell_type"].astype(str), rows["sm_name"].astype(str))]
    missing = [lab.replace("\t", ", ") for lab in labels if lab not in coef_index]
    if missing:
        raise ValueError(f"no pseudobulk samples for {len(missing)} row(s), e.g. {missing[:3]}")
    ref_missing = sorted({c for c in rows["cell_type"].astype(str) if _group_label(c, control) not in coef_index})
    if ref_missing:
        raise ValueError(f"no {control} samples for cell type(s) {ref_missing}: cannot form contrasts")
    contrasts = sp.lil_matrix((design.shape[1], len(rows)))
    for j, (lab, ct) in enumerate(zip(labels, rows["cell_type"].astype(str))):
        contrasts[coef_index[lab], j] = 1.0
        contrasts[coef_index[_group_label(ct, control)], j] = -1.0
    return design, contrasts.tocsc()


def limma_de(
    pb: ad.AnnData,
    rows: pd.DataFrame,
    *,
    control: str = CONTROL_COMPOUND,
    robust: bool = True,
    de_cutoff: float = 0.05,
    clip_p: float = 1e-4,
    optional_layers: bool = True,
) -> ad.AnnData:
    """limma-voom DE of each (cell type, compound) row against DMSO of the same cell type.

    Parameters
    ----------
    pb
        Pseudobulk samples x genes (counts) with ``obs`` columns ``cell_type``, ``sm_name``,
        ``plate_name``. All its samples enter the fit.
    rows
        The rows to test (``cell_type``, ``sm_name`` and any row metadata to keep), in output
        order. Every row needs samples in ``pb``, and every cell type DMSO samples.
    control
        The reference compound.
    robust
        ``eBayes(robust=TRUE)``.
    de_cutoff
        Threshold of ``is_de`` (on P.Value) and ``is_de_adj`` (on adj.P.Value).
    clip_p
        p-values are clipped at this value in ``clipped_sign_log10_pval``.
    optional_layers
        Also write ``AveExpr``, ``t`` and ``B``.

    Returns
    -------
    anndata.AnnData
        Rows x genes with the DE layers; ``obs`` is ``rows`` (index ``"<cell type>, <compound>"``).
    """
    from pertsci import edger, limma_ebayes  # noqa: PLC0415 - import scipy.stats, see the module imports

    design, contrasts = design_and_contrasts(pb, rows, control=control)
    counts = np.asarray(pb.X, dtype=float).T  # genes x samples
    t0 = time.perf_counter()
    norm = edger.calc_norm_factors(counts)
    lib = counts.sum(axis=0) * norm
    v = limma_voom.voom(counts, design, lib_size=lib)
    fit = limma_voom.lm_fit(v.E, design, v.weights)
    cfit = limma_ebayes.ebayes(limma_voom.contrasts_fit(fit, contrasts), robust=robust, lods=optional_layers)
    log.info("limma-voom: %d genes x %d samples, %d coefficients, %d contrasts in %.1f s",
             counts.shape[0], counts.shape[1], design.shape[1], len(rows), time.perf_counter() - t0)

    logfc = cfit.coefficients.T
    pval = cfit.p_value.T
    adj = limma_ebayes.p_adjust_bh(pval)  # BH over every contrast and gene at once, as the paper does
    sign = np.sign(logfc)
    eps = np.finfo(float).eps
    layers = {
        "logFC": logfc,
        "P.Value": pval,
        "adj.P.Value": adj,
        "is_de": pval < de_cutoff,
        "is_de_adj": adj < de_cutoff,
        # As the OP3 pipeline: a p-value of exactly 0 counts as machine epsilon.
        "sign_log10_pval": sign * -np.log10(np.where(pval == 0, eps, pval)),
        "clipped_sign_log10_pval": sign * -np.log10(np.maximum(pval, clip_p)),
    }
    if optional_layers:
        layers["AveExpr"] = np.tile(cfit.amean, (len(rows), 1))
        layers["t"] = cfit.t.T
        layers["B"] = cfit.lods.T
    row_obs = rows.reset_index(drop=True).copy()
    row_obs.index = [f"{c}, {s}" for c, s in zip(row_obs["cell_type"], row_obs["sm_name"])]
    return ad.AnnData(obs=row_obs, var=pd.DataFrame(index=pb.var_names.copy()), layers=layers)


def row_table(pb: ad.AnnData, splits: Iterable[str], control: str) -> pd.DataFrame:
    """One row per (cell type, compound) of the given splits (the control excluded), sorted.

    Parameters
    ----------
    pb
        Pseudobulk samples with ``obs`` columns ``cell_type``, ``sm_name``, ``split``.
    splits
        The splits whose rows are listed.
    control
        The reference compound, which has no row.

    Returns
    -------
    pandas.DataFrame
        ``cell_type``, ``sm_name`` and the row metadata present among ``sm_lincs_id``, ``SMILES``,
        ``split``, ``control``.
    """
    obs = pb.obs
    mask = obs["split"].astype(str).isin(set(splits)) & (obs["sm_name"].astype(str) != control)
    cols = [c for c in ROW_COLUMNS if c in obs.columns]
    table = obs.loc[mask, cols].copy()
    for c in cols:
        if c != "control":
            table[c] = table[c].astype(str)
    table = table.drop_duplicates(["cell_type", "sm_name"]).sort_values(["cell_type", "sm_name"]).reset_index(drop=True)
    if "control" in table.columns:
        table["control"] = table["control"].astype(bool)
    return table


def estimable_rows(pb: ad.AnnData, rows: pd.DataFrame, control: str = CONTROL_COMPOUND,
                   what: str = "rows") -> pd.DataFrame:
    """The rows that have pseudobulk samples and DMSO samples of their cell type; logs the others.

    Parameters
    ----------
    pb
        Pseudobulk samples with ``obs`` columns ``cell_type``, ``sm_name``.
    rows
        Candidate rows (``cell_type``, ``sm_name``).
    control
        The reference compound.
    what
        What the rows are, in the log message.

    Returns
    -------
    pandas.DataFrame
        The estimable rows, in their order.
    """
    present = set(zip(pb.obs["cell_type"].astype(str), pb.obs["sm_name"].astype(str)))
    ok = np.array([(c, s) in present and (c, control) in present
                   for c, s in zip(rows["cell_type"].astype(str), rows["sm_name"].astype(str))], dtype=bool)
    if not ok.all():
        dropped = [f"{c}, {s}" for c, s in zip(rows.loc[~ok, "cell_type"], rows.loc[~ok, "sm_name"])]
        log.warning("%d %s dropped: no samples left for the row or for %s of its cell type after filtering (%s)",
                    len(dropped), what, control, "; ".join(dropped[:5]) + (" ..." if len(dropped) > 5 else ""))
    return rows[ok].reset_index(drop=True)


def process_sc_counts(
    sc: ad.AnnData,
    *,
    min_cells: int = 10,
    where: str = "single-cell counts",
    **kwargs,
) -> tuple[ad.AnnData, ad.AnnData, pd.DataFrame]:
    """The whole processing: single-cell counts -> (de_train, de_test, id_map).

    Parameters
    ----------
    sc
        Cells x genes counts; ``obs`` with ``cell_type``, ``sm_name``, ``donor_id``, ``plate_name``,
        ``well``, ``split`` (``control``/``train``/``test``; OP's ``public_test`` counts as train
        when listed in ``train_splits``) and optionally ``sm_lincs_id``, ``SMILES``, ``control``.
    min_cells
        Minimum cells per pseudobulk sample.
    where
        Name of the input in error messages.
    **kwargs
        Passed to :func:`process_pseudobulk`.

    Returns
    -------
    de_train, de_test, id_map
    """
    missing = [c for c in SC_REQUIRED_OBS if c not in sc.obs.columns]
    if missing:
        raise ValueError(f"{where}: obs lacks the columns {missing}; needs {SC_REQUIRED_OBS}")
    control = kwargs.get("control", CONTROL_COMPOUND)
    if control not in set(sc.obs["sm_name"].astype(str)):
        raise ValueError(f"{where}: no cells treated with the control compound {control!r}")
    pb = pseudobulk(sc, min_cells=min_cells, where=where)
    return process_pseudobulk(pb, min_cells=min_cells, where=where, **kwargs)


def process_pseudobulk(
    pb: ad.AnnData,
    *,
    dataset_uns: dict | None = None,
    train_splits: Sequence[str] = ("train", "control"),
    test_splits: Sequence[str] = ("test", "private_test"),
    control: str = CONTROL_COMPOUND,
    min_cells: int = 10,
    optional_layers: bool = True,
    test_row_order: pd.DataFrame | None = None,
    where: str = "pseudobulk counts",
) -> tuple[ad.AnnData, ad.AnnData, pd.DataFrame]:
    """Gene filter and DE of pseudobulk samples -> (de_train, de_test, id_map).

    Parameters
    ----------
    pb
        Samples x genes (from :func:`pseudobulk`), ``obs`` with ``cell_type``, ``sm_name``,
        ``plate_name``, ``split`` and optionally ``sm_lincs_id``, ``SMILES``, ``control``.
    dataset_uns
        ``dataset_*`` metadata copied into both DE files.
    train_splits, test_splits
        Which splits form the training rows (fitted without the test samples) and the test rows.
    control
        The reference compound (DMSO).
    min_cells
        The minimum cells per sample that was applied (for messages).
    optional_layers
        Also write ``AveExpr``, ``t`` and ``B``.
    test_row_order
        ``cell_type``, ``sm_name`` pairs giving the order of the test rows (e.g. the real
        ``id_map``); rows not listed follow, sorted. Default: sorted by cell type and compound.
    where
        Name of the input in error messages.

    Returns
    -------
    de_train, de_test, id_map
    """
    keep = filter_genes(pb)
    if keep.sum() < 2:
        raise ValueError(f"{where}: only {int(keep.sum())} genes pass filterByExpr in every cell type")
    log.info("filterByExpr: %d of %d genes kept (intersection over cell types)", int(keep.sum()), pb.n_vars)
    pb = pb[:, keep].copy()
    splits = pb.obs["split"].astype(str)
    train_rows = row_table(pb, train_splits, control)
    test_rows = row_table(pb, test_splits, control)
    if test_rows.empty:
        raise ValueError(f"{where}: no cells in the test splits {list(test_splits)}")
    if test_row_order is not None:
        rank = {(str(c), str(s)): i for i, (c, s) in enumerate(zip(test_row_order["cell_type"], test_row_order["sm_name"]))}
        pos = [rank.get((c, s), len(rank) + i) for i, (c, s) in enumerate(zip(test_rows["cell_type"], test_rows["sm_name"]))]
        test_rows = test_rows.iloc[np.argsort(pos, kind="stable")].reset_index(drop=True)
    pb_train = pb[splits.isin(set(train_splits)).to_numpy()].copy()
    train_rows = estimable_rows(pb_train, train_rows, control, "training rows")
    test_rows = estimable_rows(pb, test_rows, control, "test rows")
    if test_rows.empty or train_rows.empty:
        raise ValueError(f"{where}: no estimable {'test' if test_rows.empty else 'training'} rows "
                         f"(every row needs samples with >= {min_cells} cells and DMSO samples of its cell type)")
    de_train = limma_de(pb_train, train_rows, control=control, optional_layers=optional_layers)
    de_test = limma_de(pb, test_rows, control=control, optional_layers=optional_layers)
    uns = dict(dataset_uns or {})
    de_train.uns.update(uns)
    de_test.uns.update(uns)
    id_map = pd.DataFrame({"id": np.arange(len(test_rows)), "cell_type": test_rows["cell_type"].to_numpy(),
                           "sm_name": test_rows["sm_name"].to_numpy()})
    return de_train, de_test, id_map


def half_cell_de(
    pb: ad.AnnData,
    de_test: ad.AnnData,
    *,
    control: str = CONTROL_COMPOUND,
    where: str = "pseudobulk counts",
) -> ad.AnnData:
    """The DE of the test rows from a random half of every sample's cells: the half-cell ceiling.

    The same processing as ``de_test`` (same samples, genes and design, TMM, voom, lmFit with
    ``~0 + cell_type:compound + plate``, ``eBayes(robust=TRUE)``; :func:`limma_de`), on the counts
    of half the cells of each sample (``layers["counts_half"]`` of :func:`pseudobulk`). Used as a
    prediction of ``de_test``, it shows what the data's own noise allows: with additive noise, a
    half-cell estimate ``mu + e_A`` scored against the all-cell truth ``mu + (e_A + e_B) / 2`` has
    the expected squared error of a noise-free oracle, ``var(e) / 2``, while two disjoint halves
    scored against each other would count the noise twice. Half the cells also give less power:
    where cell sampling rather than replicate variation limits a row, its half-cell p-values are
    larger, and the ceiling errs low (conservative) rather than high.

    Parameters
    ----------
    pb
        Pseudobulk samples x genes with ``layers["counts_half"]`` (all samples, as for ``de_test``).
    de_test
        The task's ``de_test``: its rows (``obs``: ``cell_type``, ``sm_name`` and row metadata)
        and genes are those of the result.
    control
        The reference compound.
    where
        Name of the input in error messages.

    Returns
    -------
    anndata.AnnData
        Rows and genes of ``de_test`` (same ``obs_names``), with the layers of :func:`limma_de`
        (without ``AveExpr``, ``t``, ``B``) and ``de_test``'s ``uns``.

    Raises
    ------
    ValueError
        Naming ``where``, when the half-cell counts are missing, a gene of ``de_test`` is not in
        ``pb``, or a test row has no samples left in its half.
    """
    if "counts_half" not in pb.layers:
        raise ValueError(f"{where}: no half-cell counts (layers['counts_half']); pseudobulk with a half-cell mask")
    missing = de_test.var_names.difference(pb.var_names)
    if len(missing):
        raise ValueError(f"{where}: {len(missing)} genes of de_test have no counts, e.g. {list(missing[:3])}")
    sub = pb[:, de_test.var_names]
    half = ad.AnnData(X=np.asarray(sub.layers["counts_half"], dtype=float), obs=sub.obs.copy(),
                      var=pd.DataFrame(index=de_test.var_names.copy()))
    half = half[half.X.sum(axis=1) > 0].copy()
    rows = de_test.obs.reset_index(drop=True)
    usable = estimable_rows(half, rows, control, "test rows of the half-cell ceiling")
    if len(usable) != len(rows):
        raise ValueError(f"{where}: {len(rows) - len(usable)} test rows have no samples (or no {control} samples) "
                         "with counts in the half of the cells")
    de = limma_de(half, rows, control=control, optional_layers=False)
    de.obs_names = de_test.obs_names.copy()
    de.uns.update(dict(de_test.uns))
    return de


def half_cell_de_from_cells(sc: ad.AnnData, de_test: ad.AnnData, *, seed: int = 0, min_cells: int = 10,
                            control: str = CONTROL_COMPOUND, where: str = "single-cell counts") -> ad.AnnData:
    """:func:`half_cell_de` from single cells: split every (plate, well, cell type) in half, then DE.

    Parameters
    ----------
    sc
        The single-cell counts ``de_test`` was computed from (:func:`process_sc_counts`).
    de_test
        Its ``de_test``.
    seed
        Seed of the split of the cells.
    min_cells
        The minimum cells per sample used for ``de_test`` (samples are kept on all their cells).
    control
        The reference compound.
    where
        Name of the input in error messages.

    Returns
    -------
    anndata.AnnData
        As :func:`half_cell_de`.
    """
    keys = ["plate_name", "well", "cell_type"]
    missing = [k for k in keys if k not in sc.obs.columns]
    if missing:
        raise ValueError(f"{where}: obs lacks {missing} (needed to split the cells of each sample)")
    codes = pd.factorize(pd.MultiIndex.from_frame(sc.obs[keys].astype(str)))[0]
    half = half_of_cells(codes, np.random.default_rng(seed))
    pb = pseudobulk(sc, min_cells=min_cells, where=where, half=half)
    return half_cell_de(pb, de_test, control=control, where=where)
