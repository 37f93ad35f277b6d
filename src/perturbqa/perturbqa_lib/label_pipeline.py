"""The pipeline that makes PerturbQA labels from a Perturb-seq screen (appendix A.2), and the split.

From a Perturb-seq AnnData in the Replogle/Nadig layout (counts, a perturbation column whose
control cells are ``non-targeting``): :func:`pertsci.normalisation.normalize_log_tp10k`, then
:func:`perturbation_labels` runs :func:`pertsci.wilcoxon.rank_sum_test` of every perturbation
against the controls with Benjamini–Hochberg, drops perturbations with fewer than 5 DEGs except
100 sampled negative-control perturbations (0 DEGs), takes the top 20 DEGs by adjusted p among
adjusted p < 0.01 as positives and 100 genes sampled among adjusted p > 0.1 as negatives, and the
direction from the sign of the mean difference. :func:`split_perturbations` splits 75:25 by
perturbation with similar distributions of DEG counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pertsci.wilcoxon import rank_sum_test

__all__ = ["perturbation_labels", "split_perturbations"]


def perturbation_labels(
    X,
    perturbations: Sequence[str],
    genes: Sequence[str],
    *,
    control: str = "non-targeting",
    min_degs: int = 5,
    deg_alpha: float = 0.05,
    n_negative_perturbations: int = 100,
    positive_alpha: float = 0.01,
    negative_min_p: float = 0.1,
    n_positives: int = 20,
    n_negatives: int = 100,
    seed: int = 0,
    n_threads: int = 1,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Label (perturbation, gene) pairs of a screen as in appendix A.2 of the paper.

    Parameters
    ----------
    X : matrix, shape (n_cells, n_genes)
        log(TP10k+1) expression (see :func:`pertsci.normalisation.normalize_log_tp10k`).
    perturbations : sequence of str
        Target of each cell; ``control`` marks the non-targeting cells.
    genes : sequence of str
        Gene symbols of the columns.
    control : str
        Label of the control cells.
    min_degs, deg_alpha
        A perturbation is kept when at least ``min_degs`` genes have adjusted p < ``deg_alpha``.
    n_negative_perturbations : int
        Perturbations with no DEG kept anyway (sampled uniformly), as negative controls.
    positive_alpha, n_positives
        Positives: the ``n_positives`` genes of smallest adjusted p among adjusted p <
        ``positive_alpha``.
    negative_min_p, n_negatives
        Negatives: ``n_negatives`` genes sampled among adjusted p > ``negative_min_p``.
    seed : int
        Seed of the sampling.
    n_threads : int
        Threads of the Wilcoxon tests (the results do not depend on it).

    Returns
    -------
    labels : pandas.DataFrame
        ``pert, gene, response`` (``unchanged``, ``down``, ``up``: the direction from the sign of
        the mean difference), sorted by perturbation.
    summary : pandas.DataFrame
        Per tested perturbation: ``n_degs`` (adjusted p < ``deg_alpha``) and ``kept`` (bool).

    Notes
    -----
    The perturbed gene itself is never labelled: its knockdown is the intervention, not a
    response. Thresholds apply to Benjamini–Hochberg adjusted p-values.
    """
    rng = np.random.default_rng(seed)
    genes = pd.Index([str(g) for g in genes])
    result = rank_sum_test(X, perturbations, control, genes=genes, n_threads=n_threads)
    padj = result.pvalue_adj.copy()
    # The target's own knockdown is not a downstream effect.
    own = genes.get_indexer(result.groups)
    has_own = own >= 0
    padj[np.flatnonzero(has_own), own[has_own]] = np.nan
    n_degs = np.sum(padj < deg_alpha, axis=1)
    summary = pd.DataFrame({"n_degs": n_degs}, index=pd.Index(result.groups, name="pert"))
    keep = n_degs >= min_degs
    no_effect = np.flatnonzero(n_degs == 0)
    chosen = rng.choice(no_effect, size=min(n_negative_perturbations, no_effect.size), replace=False)
    keep[chosen] = True
    summary["kept"] = keep
    rows = []
    for k in np.flatnonzero(keep):
        p = padj[k]
        ok = ~np.isnan(p)
        pos = np.flatnonzero(ok & (p < positive_alpha))
        pos = pos[np.lexsort((pos, p[pos]))][:n_positives]  # smallest adjusted p, ties by column
        neg_pool = np.flatnonzero(ok & (p > negative_min_p))
        neg = rng.choice(neg_pool, size=min(n_negatives, neg_pool.size), replace=False) if neg_pool.size else neg_pool
        direction = np.where(result.mean_diff[k, pos] > 0, "up", "down")
        rows.append(pd.DataFrame({"pert": result.groups[k], "gene": genes[pos], "response": direction}))
        rows.append(pd.DataFrame({"pert": result.groups[k], "gene": genes[np.sort(neg)], "response": "unchanged"}))
    labels = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["pert", "gene", "response"])
    return labels, summary


def split_perturbations(n_degs: pd.Series, test_fraction: float = 0.25, seed: int = 0) -> pd.Series:
    """Split perturbations into train and test with similar distributions of DEG counts.

    Perturbations are sorted by their number of DEGs (ties broken at random) and cut into
    consecutive strata of ``round(1 / test_fraction)``; one perturbation of each stratum, drawn
    at random, goes to test (appendix A.2: a 75:25 split "sorted ... based on prevalence").

    Parameters
    ----------
    n_degs : pandas.Series
        DEG count (or positive-label count) per perturbation, indexed by perturbation.
    test_fraction : float
        Share of perturbations in test, in (0, 1).
    seed : int

    Returns
    -------
    pandas.Series
        ``"train"`` or ``"test"`` per perturbation.
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    stratum = max(2, int(round(1 / test_fraction)))
    jitter = rng.random(len(n_degs))
    order = np.lexsort((jitter, np.asarray(n_degs, dtype=float)))
    split = np.full(len(n_degs), "train", dtype=object)
    for start in range(0, len(order), stratum):
        block = order[start : start + stratum]
        # A short last stratum still contributes a test item with the matching probability.
        if block.size == stratum or rng.random() < block.size / stratum:
            split[rng.choice(block)] = "test"
    return pd.Series(split, index=n_degs.index, name="split")
