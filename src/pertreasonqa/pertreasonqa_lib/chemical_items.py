"""Chemical items of PertReasonQA from the synthetic OP3 experiment (Kim et al. 2026, section 2.2, B.1, B.2.3).

The paper's second modality pairs compound screens with drug targets from INDRA CoGEx. Here the
compounds come from the perturbation_prediction task's synthetic OP3 experiment
(:mod:`pertsci.op3_simulation`), whose generator knows what every compound does: each acts through a
mechanism (sometimes with a weaker second one) that switches one or two transcription factors on
or off. Those factors are the compound's targets, signed by the mechanism's direction, so the
drug-target edges are the simulation's ground truth rather than curated literature.

- :func:`compound_targets`: the drug-target edges recorded in ``uns["simulation"]``.
- :func:`outcome_labels`: section 2.2's outcomes: per cell type, a Wilcoxon rank-sum test of each
  compound's cells against the DMSO cells (:func:`pertsci.wilcoxon.rank_sum_test`) with
  Benjamini-Hochberg correction; up/down where the adjusted p < 0.01, unchanged where the p-value
  > 0.1.
- :func:`chemical_splits`: B.1's alignment of compounds to the functional gene split: a compound
  is OOD when more than 10% of its targets lie in OOD gene clusters.
- :func:`chemical_items`: everything, from the simulation (:func:`simulation_design`) to items with
  their folds.

Choices the paper leaves open
-----------------------------
- **Cells**: the six OP3 cell types. The T cells (CD4+, CD8+, regulatory) are the OOD cells, as
  the paper's "T cells"; B, myeloid and NK cells are the ID cells.
- **Targets**: the transcription factors of the compound's primary and secondary mechanism; a
  factor reached by both with opposite directions gets sign 0 (unknown).
- **Genes tested**: the simulated genes that are nodes of the signed graph and are detected (a
  non-zero count) in at least ``min_detection`` of the cell type's cells.
- **Direction** of a changed gene: the sign of the rank-sum z-score (the group's values larger:
  up).
- **Rank-sum, not signed-rank.** Section 2.2 names the Wilcoxon *signed-rank* test, "following
  PerturbQA". A signed-rank test needs paired samples; compound and DMSO cells are not paired. The
  only pairing the OP3 design offers is the donor (each compound sits in one well per donor, with
  DMSO wells on the same plates), and three donors give three pairs per (cell type, compound):
  the smallest two-sided signed-rank p-value of ``n`` pairs is ``2 / 2**n`` = 0.25
  (:func:`min_signed_rank_pvalue`), so no gene could ever reach the paper's adjusted p < 0.01.
  The cells themselves are the samples here, compared unpaired by the rank-sum test (the
  two-sample Wilcoxon test of single-cell DE tools, which is what "Wilcoxon" means in PerturbQA's
  pipeline as well).
- **Sampling** per (cell type, compound): the ``max_changed`` changed genes of smallest adjusted
  p and a seeded sample of ``max_unchanged`` unchanged genes (the paper samples too: Table 1 has
  about 220 outcome items per compound and cell line).
- **Splits**: the gene clusters are those of the genetic split (the k-means fitted on the
  CRISPRi perturbation genes); targets are placed in their nearest cluster. ID compounds are
  split 80/10/10 into train/valid/test. Items of OOD cells are kept for test compounds only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pertreasonqa_lib.functional_splits import ID_SPLIT, N_CLUSTERS, fold_of_items, split_id_perturbations
from pertreasonqa_lib.genetic_items import genetic_split
from pertsci import op3_simulation as op3_sim
from pertsci.normalisation import normalize_log_tp10k
from pertsci.wilcoxon import rank_sum_test

log = logging.getLogger(__name__)

#: OP3 cell types and whether they are in or out of distribution (B.1: T cells are OOD).
CELLS = {ct: {"distribution": "OOD" if ct.startswith("T ") else "ID"} for ct in op3_sim.CELL_TYPES}
#: ``databases`` of the drug-target edges.
TARGET_DATABASE = "OP3 simulation"
#: B.1: a compound is OOD when more than this share of its targets lie in OOD clusters.
OOD_TARGET_SHARE = 0.1
PERTURBATION_TYPE = "chemical"


def compound_targets(simulation: Mapping) -> pd.DataFrame:
    """Drug-target edges of the simulated compounds.

    Parameters
    ----------
    simulation
        ``uns["simulation"]`` of :func:`pertsci.op3_simulation.simulate_op3`: ``compounds`` (``sm_name``,
        ``mechanism``, ``secondary_mechanism``) and ``mechanisms`` (``mechanism``, ``tfs``
        ``|``-joined, ``direction``).

    Returns
    -------
    pandas.DataFrame
        ``drug``, ``target``, ``sign`` (+1 the compound switches the factor on, -1 off, 0 both
        through different mechanisms), ``mechanisms`` (``;``-joined), one row per pair.
    """
    compounds, mechanisms = simulation["compounds"], simulation["mechanisms"]
    for name, table, cols in (("compounds", compounds, {"sm_name", "mechanism", "secondary_mechanism"}),
                              ("mechanisms", mechanisms, {"mechanism", "tfs", "direction"})):
        missing = cols - set(table.columns)
        if missing:
            raise ValueError(f"simulation {name}: missing columns {sorted(missing)}")
    mech = mechanisms.set_index("mechanism")
    rows = []
    for comp in compounds.itertuples(index=False):
        for m in (comp.mechanism, comp.secondary_mechanism):
            if not isinstance(m, str) or not m:
                continue
            if m not in mech.index:
                raise ValueError(f"simulation compounds: {comp.sm_name} has unknown mechanism {m!r}")
            for tf in str(mech.at[m, "tfs"]).split("|"):
                if tf:
                    rows.append((str(comp.sm_name), tf, int(np.sign(mech.at[m, "direction"])), m))
    table = pd.DataFrame(rows, columns=["drug", "target", "sign", "mechanism"])
    grouped = table.groupby(["drug", "target"], sort=True)
    # Votes of distinct mechanisms: the same factor switched both ways has no single sign.
    out = grouped["sign"].agg(lambda s: int(s.iloc[0]) if s.nunique() == 1 else 0).to_frame()
    out["mechanisms"] = grouped["mechanism"].agg(lambda s: ";".join(sorted(set(s))))
    return out.reset_index()


def outcome_labels(sc, *, control: str = op3_sim.CONTROL_COMPOUND, alpha: float = 0.01, unchanged_min_p: float = 0.1,
                   min_detection: float = 0.05, min_cells: int = 10, max_changed: int = 100, max_unchanged: int = 100,
                   seed: int = 0, n_threads: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Up/down/unchanged outcomes of every (cell type, compound) against the control (section 2.2).

    Parameters
    ----------
    sc : anndata.AnnData
        Single-cell counts with ``obs`` ``cell_type`` and ``sm_name`` (and ``total_counts`` when
        ``X`` holds a subset of the genes).
    control
        The reference compound.
    alpha
        Changed: Benjamini-Hochberg adjusted p below it.
    unchanged_min_p
        Unchanged: p-value above it. Genes in between are not labelled.
    min_detection
        Genes detected in fewer of a cell type's cells are not tested there.
    min_cells
        Compounds with fewer cells of a type are not tested in it.
    max_changed, max_unchanged
        Items kept per (cell type, compound) (0: all); see the module notes.
    seed
        Seed of the sampling of unchanged genes.
    n_threads
        Threads of the Wilcoxon tests (the results do not depend on it).

    Returns
    -------
    items, summary
        Items ``cell``, ``perturbation``, ``perturbation_type``, ``gene``, ``label``, ``pvalue``,
        ``pvalue_adj``; per (cell type, compound): ``n_cells``, ``n_genes_tested``, ``n_up``,
        ``n_down``, ``n_unchanged`` before sampling.
    """
    for col in ("cell_type", "sm_name"):
        if col not in sc.obs.columns:
            raise ValueError(f"single-cell counts: obs has no {col!r} column")
    rng = np.random.default_rng(seed)
    genes = sc.var_names.astype(str)
    totals = sc.obs["total_counts"].to_numpy() if "total_counts" in sc.obs.columns else None
    items, summary = [], []
    for cell in sorted(sc.obs["cell_type"].astype(str).unique()):
        rows = np.flatnonzero(sc.obs["cell_type"].astype(str).to_numpy() == cell)
        counts = sc.X[rows]
        detected = np.asarray((counts > 0).sum(axis=0)).ravel() / len(rows)
        cols = np.flatnonzero(detected >= min_detection)
        groups = sc.obs["sm_name"].astype(str).to_numpy()[rows]
        sizes = pd.Series(groups).value_counts()
        tested = [g for g in sizes.index.sort_values() if g != control and sizes[g] >= min_cells]
        if control not in sizes.index or not tested or not len(cols):
            log.warning("%s: nothing to test (%d control cells, %d compounds, %d genes)", cell,
                        int(sizes.get(control, 0)), len(tested), len(cols))
            continue
        x = normalize_log_tp10k(counts, totals=None if totals is None else totals[rows])[:, cols]
        res = rank_sum_test(x, groups, control, genes=genes[cols], group_order=tested, n_threads=n_threads)
        for k, comp in enumerate(res.groups):
            p, padj, z = res.pvalue[k], res.pvalue_adj[k], res.zscore[k]
            changed = np.flatnonzero(padj < alpha)
            changed = changed[np.lexsort((changed, padj[changed]))]  # smallest adjusted p first
            unchanged = np.flatnonzero(p > unchanged_min_p)
            summary.append({"cell": cell, "perturbation": comp, "n_cells": int(res.n_cells[k]), "n_genes_tested": len(cols),
                            "n_up": int((z[changed] > 0).sum()), "n_down": int((z[changed] < 0).sum()),
                            "n_unchanged": len(unchanged)})
            if max_changed > 0:
                changed = changed[:max_changed]
            if 0 < max_unchanged < len(unchanged):
                unchanged = np.sort(rng.choice(unchanged, max_unchanged, replace=False))
            keep = np.concatenate([changed, unchanged])
            label = np.where(np.arange(len(keep)) < len(changed), np.where(z[keep] > 0, "up", "down"), "unchanged")
            items.append(pd.DataFrame({"cell": cell, "perturbation": comp, "perturbation_type": PERTURBATION_TYPE,
                                       "gene": res.genes[keep], "label": label, "pvalue": p[keep], "pvalue_adj": padj[keep]}))
    columns = ["cell", "perturbation", "perturbation_type", "gene", "label", "pvalue", "pvalue_adj"]
    table = pd.concat(items, ignore_index=True) if items else pd.DataFrame(columns=columns)
    return table, pd.DataFrame(summary)


def min_signed_rank_pvalue(n_pairs: int) -> float:
    """Smallest two-sided p-value of an exact Wilcoxon signed-rank test on ``n_pairs`` pairs: ``2 / 2**n``.

    All differences of one sign is the most extreme of the ``2**n`` equally likely sign patterns
    under the null, and there are two such patterns (all positive, all negative).
    """
    if n_pairs < 1:
        raise ValueError(f"a signed-rank test needs at least one pair, got {n_pairs}")
    return min(1.0, 2.0 / 2.0 ** n_pairs)


def chemical_splits(targets: pd.DataFrame, drugs: Sequence[str], clusters: pd.Series, ood_clusters: Sequence[int], *,
                    ood_target_share: float = OOD_TARGET_SHARE, id_split: Mapping[str, float] = ID_SPLIT,
                    seed: int = 0) -> pd.DataFrame:
    """Compounds to ID/OOD by their targets' clusters, then ID compounds to train/valid/test (B.1).

    Parameters
    ----------
    targets
        ``drug``, ``target`` (:func:`compound_targets`).
    drugs
        Every compound to split (one without targets is ID).
    clusters
        Gene -> functional cluster; every target must have one.
    ood_clusters
        The clusters of the OOD genes.
    ood_target_share
        A compound is OOD when more than this share of its targets lie in OOD clusters.
    id_split, seed
        Shares of train/valid/test among ID compounds and the seed of their permutation.

    Returns
    -------
    pandas.DataFrame
        Indexed by compound: ``n_targets``, ``ood_target_share``, ``distribution``, ``split``.
    """
    missing = sorted(set(targets["target"]) - set(clusters.index))
    if missing:
        raise ValueError(f"{len(missing)} targets have no functional cluster (e.g. {missing[:3]})")
    drugs = pd.Index(sorted(dict.fromkeys(map(str, drugs))))
    ood = targets["target"].map(clusters).isin(list(ood_clusters))
    share = ood.groupby(targets["drug"]).mean().reindex(drugs).fillna(0.0)
    n_targets = targets.groupby("drug").size().reindex(drugs).fillna(0).astype(int)
    is_ood = (share > ood_target_share).to_numpy()
    split = split_id_perturbations(is_ood, id_split, np.random.default_rng(seed))
    return pd.DataFrame({"n_targets": n_targets.to_numpy(), "ood_target_share": share.to_numpy(),
                         "distribution": np.where(is_ood, "OOD", "ID"), "split": split}, index=drugs)


def chemical_items(gene_nodes: Sequence[str], edges: pd.DataFrame, data_dir: str | Path, *,
                   simulation: Mapping | None = None, n_clusters: int = N_CLUSTERS, seed: int = 0,
                   label_params: Mapping | None = None) -> dict:
    """Chemical items with their folds, from a fresh simulation of the OP3 experiment.

    Parameters
    ----------
    gene_nodes
        Genes of the signed graph: the genes tested.
    edges
        Directed gene edges for B.1's functional clusters (``source``, ``target``).
    data_dir
        The shared data folder, holding ``op3/`` (the OP3 design), ``basal_expression/``,
        ``perturbqa/`` and ``knowledge_graphs/`` (for the genetic split's clusters).
    simulation
        Arguments of :func:`pertsci.op3_simulation.simulate_op3` (default: the full-size experiment of
        the perturbation_prediction task's ``op3_synthetic_full`` dataset, seed 0).
    n_clusters, seed
        As the genetic split (the clusters are the same).
    label_params
        Arguments of :func:`outcome_labels`.

    Returns
    -------
    dict
        ``items`` (indexed ``cell|perturbation|gene``, with ``fold``), ``splits`` (per compound),
        ``targets`` (:func:`compound_targets`), ``summary`` (per cell type and compound), ``n_cells``.
    """
    meta = op3_sim.load_op3_metadata(data_dir)
    # The six cell populations as labels (CELLS, prompts): not the T-cell grouping of OP3's final annotation.
    sc = op3_sim.simulate_op3(meta, keep_genes=list(gene_nodes), **{"group_t_cells": False, **dict(simulation or {})})
    log.info("simulated %d cells x %d graph genes", sc.n_obs, sc.n_vars)
    targets = compound_targets(sc.uns["simulation"])
    items, summary = outcome_labels(sc, **dict(label_params or {}))
    _, gene_splits, clusters = genetic_split(edges, data_dir, n_clusters=n_clusters, seed=seed,
                                             assign=sorted(targets["target"].unique()))
    ood_clusters = sorted(gene_splits.loc[gene_splits["distribution"] == "OOD", "cluster"].unique())
    drugs = [d for d in sc.uns["simulation"]["compounds"]["sm_name"]]
    splits = chemical_splits(targets, drugs, clusters, ood_clusters, seed=seed)
    items["fold"] = fold_of_items(items, splits, CELLS).to_numpy()
    items = items[items["fold"] != "unused"]
    items.index = pd.Index(items["cell"] + "|" + items["perturbation"] + "|" + items["gene"], name="item_id")
    return {"items": items, "splits": splits, "targets": targets, "summary": summary, "n_cells": int(sc.n_obs)}


def simulation_design(n_compounds: int, plates_per_donor: int, dmso_wells: int, cells_per_well: float,
                      seed: int) -> dict:
    """Arguments of :func:`pertsci.op3_simulation.simulate_op3` for a screen of the given size.

    Parameters
    ----------
    n_compounds
        Compounds simulated, positive controls included; 0 for all 146 (the full-size design).
    plates_per_donor, dmso_wells, cells_per_well
        Plates per donor, DMSO wells per plate and mean cells per well.
    seed
        Seed of the simulation.

    Returns
    -------
    dict
        The keyword arguments; a reduced screen holds a third of its compounds (at least one) as
        the simulator's test compounds, as the full design does.
    """
    design = {"n_compounds": n_compounds or None, "plates_per_donor": plates_per_donor,
              "dmso_wells_per_plate": dmso_wells, "cells_per_well": cells_per_well, "seed": seed}
    if design["n_compounds"] is not None:
        design["n_test_compounds"] = max(1, design["n_compounds"] // 3)
    return design

