"""PerturbQA labels: the published files, the pipeline that makes them from a screen, the split.

PerturbQA (Wu et al., ICLR 2025) asks, for a CRISPRi Perturb-seq screen, whether knocking down a
gene *p* differentially expresses a gene *g* (``de``), whether a differentially expressed *g* goes
up or down (``dir``), and what a cluster of genes or of perturbations shares (``gse``).

Published files (``<shared data>/perturbqa/``)
    :func:`read_label_csv` reads ``<screen>-de.csv`` / ``<screen>-dir.csv`` (``pert, gene, label,
    split``), :func:`read_clusters_json` the gene-set enrichment clusters and
    :func:`read_set_mapping` the K562 gene clusters used as downstream entities of K562-set.
    :func:`responses_from_labels` joins the two label files into one ternary response per pair
    (``unchanged``, ``down``, ``up``), the form every method of the task trains on.

The label pipeline (appendix A.2 of the paper)
    From a Perturb-seq AnnData in the Replogle/Nadig layout (counts, a perturbation column whose
    control cells are ``non-targeting``): :func:`pertsci.normalisation.normalize_log_tp10k`, then
    :func:`perturbation_labels` runs :func:`pertsci.wilcoxon.rank_sum_test` of every perturbation
    against the controls with Benjamini–Hochberg, drops perturbations with fewer than 5 DEGs
    except 100 sampled negative-control perturbations (0 DEGs), takes the top 20 DEGs by adjusted
    p among adjusted p < 0.01 as positives and 100 genes sampled among adjusted p > 0.1 as
    negatives, and the direction from the sign of the mean difference. :func:`split_perturbations`
    splits 75:25 by perturbation with similar distributions of DEG counts.

Synthetic screens
    :func:`synthetic_perturbseq` draws a small screen in the same layout (negative-binomial counts
    with per-gene means and sizes taken from a real baseline) for tests of the pipeline.

Items of the task
    Every dataset of the task is a table of *items* (questions): a pair ``(pert, gene)`` for
    ``de``/``dir``, a cluster for ``gse_gene``/``gse_pert``. :func:`pair_items` and
    :func:`cluster_items` build them; :func:`prediction_frame` is what a method writes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from pertsci.wilcoxon import rank_sum_test

log = logging.getLogger(__name__)

__all__ = [
    "SUBTASKS", "PAIR_SUBTASKS", "CLUSTER_SUBTASKS", "RESPONSES", "CELL_LINES", "LICENSE",
    "read_label_csv", "read_clusters_json", "read_set_mapping", "responses_from_labels",
    "subtask_labels", "pair_items", "cluster_items", "prediction_frame", "set_members",
    "perturbation_labels", "split_perturbations", "synthetic_perturbseq",
    "read_basal_baseline", "SCREENS", "load_screen", "perturbqa_dataset", "write_dataset", "read_dataset",
    "subsample_published", "dataset_from_responses", "training_pairs", "gene_prevalence", "prevalence_scores", "write_prediction",
]

#: Subtasks of the task: binary questions about pairs, and text about clusters.
PAIR_SUBTASKS = ("de", "dir")
CLUSTER_SUBTASKS = ("gse_gene", "gse_pert")
SUBTASKS = PAIR_SUBTASKS + CLUSTER_SUBTASKS
#: The ternary response of a gene to a perturbation, the training target of every pair method.
RESPONSES = ("unchanged", "down", "up")
LICENSE = ("Genentech Non-Commercial Software License (PerturbQA labels, Wu et al. 2025); knowledge graphs: "
           "CORUM CC BY-NC 4.0, HuRI, Reactome, GO, OmniPath and STRING under their own terms. For "
           "benchmarking only.")

#: Cell lines: name and the sentence the paper's prompts use (appendix D.3).
CELL_LINES = {
    "K562": "K562 cells are immortalised myelogenous leukemia cells of the erythroleukemia type.",
    "RPE1": "RPE1 cells are a non-cancerous, hTERT-immortalized, near-euploid, adherent, and p53-positive cell line.",
    "Jurkat": "Jurkat cells are an immortalized line of human T lymphocyte cells.",
    "HepG2": "HepG2 cells are a human liver cancer cell line, derived from a patient with a well-differentiated "
             "hepatocellular carcinoma.",
}

_LABEL_COLUMNS = ["pert", "gene", "label", "split"]


# --- published files ---------------------------------------------------------------------------
def read_label_csv(path: str | Path) -> pd.DataFrame:
    """Read a PerturbQA label file (``pert, gene, label, split``).

    Raises
    ------
    ValueError
        Naming the file, for missing columns, labels other than 0/1, splits other than
        train/test, duplicated pairs, or a perturbation in both splits.
    """
    path = Path(path)
    df = pd.read_csv(path, dtype={"pert": str, "gene": str, "split": str})
    missing = [c for c in _LABEL_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; a PerturbQA label file has {_LABEL_COLUMNS}")
    df = df[_LABEL_COLUMNS].copy()
    if df[["pert", "gene"]].isna().any().any():
        raise ValueError(f"{path}: empty pert or gene in {int(df[['pert', 'gene']].isna().any(axis=1).sum())} rows")
    bad = ~df["label"].isin([0, 1])
    if bad.any():
        raise ValueError(f"{path}: label must be 0 or 1; row {int(np.flatnonzero(bad)[0]) + 2} has {df['label'][bad].iloc[0]!r}")
    bad = ~df["split"].isin(["train", "test"])
    if bad.any():
        raise ValueError(f"{path}: split must be train or test; found {sorted(df['split'][bad].unique())[:3]}")
    dup = df.duplicated(["pert", "gene"])
    if dup.any():
        raise ValueError(f"{path}: {int(dup.sum())} duplicated (pert, gene) pairs, e.g. {tuple(df[dup].iloc[0][['pert', 'gene']])}")
    both = df.groupby("pert")["split"].nunique()
    if (both > 1).any():
        raise ValueError(f"{path}: perturbations in both splits, e.g. {list(both[both > 1].index[:3])}")
    df["label"] = df["label"].astype(int)
    return df.reset_index(drop=True)


def read_clusters_json(path: str | Path) -> pd.DataFrame:
    """Read a gene-set enrichment file: a list of ``{"genes": [...], "label": str or null}``.

    Returns
    -------
    pandas.DataFrame
        ``cluster`` (position in the file, from 1), ``members`` (list of str), ``annotation``
        (str, ``""`` when the cluster was not annotated).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON: {err}") from None
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of clusters")
    rows = []
    for i, entry in enumerate(data, 1):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("genes"), list) or not entry["genes"]:
            raise ValueError(f"{path}: cluster {i} needs a non-empty list 'genes'")
        label = entry.get("label")
        rows.append({"cluster": i, "members": [str(g) for g in entry["genes"]], "annotation": "" if label is None else str(label).strip()})
    return pd.DataFrame(rows)


def read_set_mapping(path: str | Path) -> dict[str, list[str]]:
    """Read the K562 gene clusters used as downstream entities (``{"<id>-<name>": [genes]}``)."""
    path = Path(path)
    data = json.loads(path.read_text())
    if not isinstance(data, Mapping) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError(f"{path}: expected a mapping of set name -> list of genes")
    return {str(k): [str(g) for g in v] for k, v in data.items()}


def responses_from_labels(de: pd.DataFrame, direction: pd.DataFrame, *, where: str = "") -> pd.DataFrame:
    """Join the ``de`` and ``dir`` label tables into one ternary response per pair.

    Parameters
    ----------
    de, direction
        Tables from :func:`read_label_csv`. Every ``dir`` pair must be a DE pair of ``de``, with
        the same split.
    where
        Prefix of error messages (e.g. the screen's file names).

    Returns
    -------
    pandas.DataFrame
        ``pert, gene, split, response`` with response ``unchanged`` (not DE), ``down`` or ``up``.
    """
    merged = de.merge(direction, on=["pert", "gene"], how="left", suffixes=("", "_dir"), validate="one_to_one")
    orphans = direction.merge(de, on=["pert", "gene"], how="left", indicator=True)
    if (orphans["_merge"] == "left_only").any():
        raise ValueError(f"{where}: {int((orphans['_merge'] == 'left_only').sum())} direction pairs are not in the DE file")
    has_dir = merged["label_dir"].notna()
    if (merged.loc[has_dir, "label"] != 1).any():
        raise ValueError(f"{where}: direction labels given for pairs that are not differentially expressed")
    if (merged.loc[has_dir, "split"] != merged.loc[has_dir, "split_dir"]).any():
        raise ValueError(f"{where}: a pair is in different splits of the DE and direction files")
    missing = (merged["label"] == 1) & ~has_dir
    if missing.any():
        raise ValueError(f"{where}: {int(missing.sum())} DE pairs have no direction label")
    response = np.where(merged["label"] == 0, "unchanged", np.where(merged["label_dir"] == 1, "up", "down"))
    return pd.DataFrame({"pert": merged["pert"], "gene": merged["gene"], "split": merged["split"], "response": response})


def subtask_labels(responses: pd.Series | np.ndarray, subtask: str) -> tuple[np.ndarray, np.ndarray]:
    """Binary labels of a subtask from ternary responses.

    Returns
    -------
    mask, labels
        ``mask``: which pairs belong to the subtask (all for ``de``; the changed ones for
        ``dir``); ``labels``: 1 for DE (``de``) or up (``dir``) over the masked pairs.
    """
    r = np.asarray(responses).astype(str)
    unknown = set(np.unique(r)) - set(RESPONSES)
    if unknown:
        raise ValueError(f"unknown responses {sorted(unknown)}; expected {RESPONSES}")
    if subtask == "de":
        return np.ones(r.size, bool), (r != "unchanged").astype(int)
    if subtask == "dir":
        mask = r != "unchanged"
        return mask, (r[mask] == "up").astype(int)
    raise ValueError(f"subtask {subtask!r} has no binary labels; expected one of {PAIR_SUBTASKS}")


def set_members(sets: pd.DataFrame | None) -> dict[str, list[str]]:
    """``uns['downstream_sets']`` (two columns ``set_name, gene``) as a mapping."""
    if sets is None or len(sets) == 0:
        return {}
    return {str(k): list(map(str, v)) for k, v in sets.groupby("set_name", sort=False)["gene"]}


# --- items ---------------------------------------------------------------------------------------
def pair_items(pairs: pd.DataFrame, subtask: str) -> pd.DataFrame:
    """Test items of a pair subtask: index ``<subtask>:<pert>:<gene>``, columns of the test file."""
    if subtask not in PAIR_SUBTASKS:
        raise ValueError(f"{subtask!r} is not a pair subtask {PAIR_SUBTASKS}")
    index = subtask + ":" + pairs["pert"].astype(str) + ":" + pairs["gene"].astype(str)
    return pd.DataFrame({"subtask": subtask, "pert": pairs["pert"].astype(str).to_numpy(),
                         "gene": pairs["gene"].astype(str).to_numpy(), "members": ""}, index=pd.Index(index, name="item"))


def cluster_items(clusters: pd.DataFrame, subtask: str) -> pd.DataFrame:
    """Test items of a gene-set subtask: index ``<subtask>:<cluster>``, members joined by ``;``."""
    if subtask not in CLUSTER_SUBTASKS:
        raise ValueError(f"{subtask!r} is not a cluster subtask {CLUSTER_SUBTASKS}")
    index = [f"{subtask}:{c}" for c in clusters["cluster"]]
    return pd.DataFrame({"subtask": subtask, "pert": "", "gene": "",
                         "members": [";".join(m) for m in clusters["members"]]}, index=pd.Index(index, name="item"))


def prediction_frame(test_obs: pd.DataFrame, scores: Mapping[str, float] | pd.Series | None = None,
                     texts: Mapping[str, str] | pd.Series | None = None) -> pd.DataFrame:
    """The ``obs`` of a prediction: ``score`` (NaN where not given) and ``text`` (``""``) per item.

    A method that does not address a subtask leaves its items at NaN / ``""``; the metrics then
    report that subtask as not addressed rather than scoring a guess.
    """
    out = pd.DataFrame(index=test_obs.index.copy())
    out["score"] = np.nan if scores is None else pd.Series(scores, dtype=float).reindex(out.index).to_numpy()
    text = pd.Series(texts, dtype=object).reindex(out.index) if texts is not None else pd.Series(index=out.index, dtype=object)
    out["text"] = text.fillna("").astype(str).to_numpy()
    return out


# --- the label pipeline --------------------------------------------------------------------------
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
    result = rank_sum_test(X, perturbations, control, genes=genes)
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


# --- synthetic screens -----------------------------------------------------------------------------
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


# --- datasets of the task ------------------------------------------------------------------------
#: The screens of the published labels: file prefix, cell line, downstream entities, source.
SCREENS = {
    "k562": {"prefix": "k562", "cell_line": "K562", "downstream_type": "gene",
             "name": "K562 genome-wide", "source": "Replogle et al. 2022, K562 genome-wide CRISPRi Perturb-seq"},
    "rpe1": {"prefix": "rpe1", "cell_line": "RPE1", "downstream_type": "gene",
             "name": "RPE1 essential", "source": "Replogle et al. 2022, RPE1 essential-gene CRISPRi Perturb-seq"},
    "k562_set": {"prefix": "k562_set", "cell_line": "K562", "downstream_type": "gene_set",
                 "name": "K562-set", "source": "Replogle et al. 2022, K562 genome-wide; downstream entities are its 20 "
                 "expression programs (mean log(TP10k+1) of their genes)"},
}
_SUBTASK_NAMES = {"de": "differential expression", "dir": "direction of change",
                  "gse_gene": "gene-set enrichment of gene clusters", "gse_pert": "gene-set enrichment of perturbation clusters"}
_GSE_FILES = {"gse_gene": "k562_gene-gse.json", "gse_pert": "k562_pert-gse.json"}


def load_screen(data_dir: str | Path, screen: str) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """Responses of every labelled pair of a published screen, and its downstream sets.

    Returns
    -------
    responses : pandas.DataFrame
        ``pert, gene, split, response`` (see :func:`responses_from_labels`).
    sets : dict
        Downstream gene sets (K562-set) or empty.
    """
    if screen not in SCREENS:
        raise ValueError(f"unknown screen {screen!r}; known: {sorted(SCREENS)}")
    data_dir = Path(data_dir)
    prefix = SCREENS[screen]["prefix"]
    de_path, dir_path = data_dir / f"{prefix}-de.csv", data_dir / f"{prefix}-dir.csv"
    for path in (de_path, dir_path):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: PerturbQA label file not found")
    responses = responses_from_labels(read_label_csv(de_path), read_label_csv(dir_path), where=f"{de_path} + {dir_path.name}")
    sets = read_set_mapping(data_dir / "k562_set-mapping.json") if SCREENS[screen]["downstream_type"] == "gene_set" else {}
    if sets:
        unknown = sorted(set(responses["gene"]) - set(sets))
        if unknown:
            raise ValueError(f"{data_dir}: downstream entities without members in k562_set-mapping.json: {unknown[:3]}")
    return responses, sets


def perturbqa_dataset(data_dir: str | Path, screen: str, subtasks: Sequence[str], dataset_id: str) -> dict:
    """Build a dataset of the task from the published files.

    Parameters
    ----------
    data_dir : path
        Folder of the PerturbQA files (``<shared data>/perturbqa``).
    screen : str
        Key of :data:`SCREENS`; gene-set enrichment subtasks need ``k562``.
    subtasks : sequence of str
        Subtasks whose test items the dataset holds (one for a benchmark dataset; de and dir
        together would reveal the de labels, since dir items are the DE pairs).
    dataset_id : str

    Returns
    -------
    dict
        ``train`` (obs of the training pairs), ``test`` and ``solution`` (obs of the items),
        ``uns`` (dataset metadata) and ``sets`` (downstream sets as a ``set_name, gene`` table).
    """
    subtasks = list(dict.fromkeys(subtasks))
    unknown = [s for s in subtasks if s not in SUBTASKS]
    if unknown or not subtasks:
        raise ValueError(f"subtasks must be among {SUBTASKS}, got {subtasks}")
    if {"de", "dir"} <= set(subtasks):
        raise ValueError("de and dir items cannot share a dataset: the dir items are the DE pairs")
    if any(s in CLUSTER_SUBTASKS for s in subtasks) and screen != "k562":
        raise ValueError(f"gene-set enrichment clusters exist for the k562 screen only, not {screen!r}")
    data_dir = Path(data_dir)
    responses, sets = load_screen(data_dir, screen)
    clusters = {s: read_clusters_json(data_dir / _GSE_FILES[s]) for s in subtasks if s in CLUSTER_SUBTASKS}
    info = SCREENS[screen]
    task_names = " and ".join(_SUBTASK_NAMES[s] for s in subtasks)
    uns = {
        "dataset_id": dataset_id,
        "dataset_name": f"{info['name']}: {task_names}",
        "dataset_summary": f"PerturbQA {task_names} on the {info['name']} CRISPRi screen, unseen perturbations.",
        "dataset_description": f"{info['source']}. Labels published with PerturbQA (Wu et al. 2025).",
        "dataset_reference": "10.48550/arXiv.2502.21290; 10.1016/j.cell.2022.05.013",
        "dataset_url": "https://github.com/genentech/PerturbQA",
        "dataset_organism": "homo_sapiens",
        "dataset_license": LICENSE,
        "cell_line": info["cell_line"],
        "cell_line_description": CELL_LINES[info["cell_line"]],
        "downstream_type": info["downstream_type"],
    }
    return dataset_from_responses(responses, subtasks, uns, sets=sets, clusters=clusters)


def dataset_from_responses(responses: pd.DataFrame, subtasks: Sequence[str], uns: Mapping, *,
                           sets: Mapping[str, Sequence[str]] | None = None,
                           clusters: Mapping[str, pd.DataFrame] | None = None) -> dict:
    """Assemble a dataset from labelled pairs (``pert, gene, split, response``).

    Training pairs are every pair of the training split; test items are the test pairs of each
    pair subtask and the annotated clusters of each cluster subtask (``clusters[subtask]`` from
    :func:`read_clusters_json`). ``uns`` gets ``subtask`` and a count of pairs and items.
    """
    subtasks = list(dict.fromkeys(subtasks))
    if {"de", "dir"} <= set(subtasks):
        raise ValueError("de and dir items cannot share a dataset: the dir items are the DE pairs")
    train = responses[responses["split"] == "train"]
    train_obs = pd.DataFrame({"pert": train["pert"].to_numpy(), "gene": train["gene"].to_numpy(),
                              "response": train["response"].to_numpy()},
                             index=pd.Index(train["pert"] + ":" + train["gene"], name="pair"))
    tests, solutions = [], []
    test_pairs = responses[responses["split"] == "test"]
    for subtask in subtasks:
        if subtask in PAIR_SUBTASKS:
            mask, labels = subtask_labels(test_pairs["response"], subtask)
            items = pair_items(test_pairs[mask], subtask)
            sol = items[["subtask", "pert", "gene"]].copy()
            sol["label"] = labels.astype(float)
            sol["annotation"] = ""
        else:
            if clusters is None or subtask not in clusters:
                raise ValueError(f"subtask {subtask} needs its clusters")
            annotated = clusters[subtask][clusters[subtask]["annotation"] != ""]  # only annotated clusters are evaluated (A.1)
            items = cluster_items(annotated, subtask)
            sol = items[["subtask", "pert", "gene"]].copy()
            sol["label"] = np.nan
            sol["annotation"] = annotated["annotation"].to_numpy()
        tests.append(items)
        solutions.append(sol)
    test_obs = pd.concat(tests)
    uns = dict(uns)
    uns["subtask"] = ",".join(subtasks)
    uns["dataset_description"] = (f"{uns.get('dataset_description', '')} {len(train_obs)} training pairs of "
                                  f"{train_obs['pert'].nunique()} perturbations; {len(test_obs)} test items "
                                  f"({', '.join(subtasks)}).").strip()
    sets_table = pd.DataFrame([(k, g) for k, v in (sets or {}).items() for g in v], columns=["set_name", "gene"])
    return {"train": train_obs, "test": test_obs, "solution": pd.concat(solutions), "uns": uns, "sets": sets_table}


def write_dataset(dataset: Mapping, edges: pd.DataFrame, descriptions: pd.DataFrame, *, train: str | Path,
                  test: str | Path, solution: str | Path, kg_edges: str | Path, gene_descriptions: str | Path) -> None:
    """Write a dataset (from :func:`perturbqa_dataset` or the label pipeline) to the task's files."""
    import anndata as ad

    uns = dict(dataset["uns"])
    train_uns = dict(uns)
    if len(dataset.get("sets", [])):
        train_uns["downstream_sets"] = dataset["sets"].reset_index(drop=True)
    short = {k: uns[k] for k in ("dataset_id", "subtask", "cell_line", "cell_line_description", "downstream_type")}

    def strings(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        for col in frame.columns:
            if frame[col].dtype == object:
                frame[col] = frame[col].astype(str)
        frame.index = frame.index.astype(str)
        return frame

    def write(frame: pd.DataFrame, uns_: dict, path) -> None:
        # gzip pays off for large tables only; on small ones its chunk overhead grows the file.
        ad.AnnData(obs=strings(frame), uns=uns_).write_h5ad(path, compression="gzip" if len(frame) > 5000 else None)

    write(dataset["train"], train_uns, train)
    write(dataset["test"], short, test)
    write(dataset["solution"], short, solution)
    edges.to_parquet(kg_edges, index=False)
    descriptions.to_parquet(gene_descriptions, index=False)


def read_dataset(train: str | Path, test: str | Path) -> tuple:
    """Read a dataset's training pairs and test items (what every method starts from).

    Returns
    -------
    train, test : anndata.AnnData
        As written by :func:`write_dataset`; ``train.uns["downstream_sets"]`` becomes a mapping
        (set name -> members) in ``train.uns["sets"]``.
    """
    import anndata as ad

    tr = ad.read_h5ad(train)
    te = ad.read_h5ad(test)
    # anndata stores repeated strings as categoricals; plain strings keep later edits simple.
    for adata in (tr, te):
        for col in adata.obs.columns:
            if isinstance(adata.obs[col].dtype, pd.CategoricalDtype):
                adata.obs[col] = adata.obs[col].astype(str)
    tr.uns["sets"] = set_members(tr.uns.get("downstream_sets"))
    return tr, te


def subsample_published(data_dir: str | Path, kg_dir: str | Path, out: str | Path, *, n_train_perts: int = 24,
                        n_test_perts: int = 8, n_genes: int = 40, n_clusters: int = 4, max_members: int = 5,
                        seed: int = 0) -> list[str]:
    """Write a small subset of the published PerturbQA files and knowledge graphs, same layout.

    For test resources: the files keep their names and formats under ``out/perturbqa`` and
    ``out/knowledge_graphs`` so that the loaders read them as they read the originals. The K562
    pairs (and the K562-set pairs) of a sample of perturbations are kept for the downstream genes
    with the most positive labels among them; gene-set clusters and downstream sets keep at most
    ``max_members`` members; the knowledge graphs keep the genes involved.

    Returns
    -------
    list of str
        The genes of the subset (perturbations, downstream genes, cluster and set members).
    """
    import gzip

    rng = np.random.default_rng(seed)
    data_dir, kg_dir, out = Path(data_dir), Path(kg_dir), Path(out)
    (out / "perturbqa").mkdir(parents=True, exist_ok=True)
    (out / "knowledge_graphs").mkdir(parents=True, exist_ok=True)
    de = read_label_csv(data_dir / "k562-de.csv")
    direction = read_label_csv(data_dir / "k562-dir.csv")
    split = de.drop_duplicates("pert").set_index("pert")["split"]
    # Perturbations with many DE genes, so that test genes have both classes.
    n_pos = de.groupby("pert")["label"].sum()
    rich = n_pos[n_pos >= 10].index
    train_perts = rng.choice(sorted(set(rich) & set(split[split == "train"].index)), n_train_perts, replace=False)
    test_perts = rng.choice(sorted(set(rich) & set(split[split == "test"].index)), n_test_perts, replace=False)
    perts = set(train_perts) | set(test_perts)
    sub = de[de["pert"].isin(perts)]
    test_sub = sub[sub["pert"].isin(test_perts)]
    both = test_sub.groupby("gene")["label"].agg(["min", "max", "size"])
    both = both[(both["min"] == 0) & (both["max"] == 1)].sort_values("size", ascending=False).index[: n_genes // 2]
    popular = sub.groupby("gene").size().sort_values(ascending=False).index
    genes = list(dict.fromkeys([*both, *popular]))[:n_genes]
    keep_de = de[de["pert"].isin(perts) & de["gene"].isin(genes)]
    keep_dir = direction.merge(keep_de[["pert", "gene"]], on=["pert", "gene"])
    keep_de.to_csv(out / "perturbqa" / "k562-de.csv", index=False)
    keep_dir.to_csv(out / "perturbqa" / "k562-dir.csv", index=False)
    set_de = read_label_csv(data_dir / "k562_set-de.csv")
    set_dir = read_label_csv(data_dir / "k562_set-dir.csv")
    set_de[set_de["pert"].isin(perts)].to_csv(out / "perturbqa" / "k562_set-de.csv", index=False)
    set_dir[set_dir["pert"].isin(perts)].to_csv(out / "perturbqa" / "k562_set-dir.csv", index=False)
    mapping = read_set_mapping(data_dir / "k562_set-mapping.json")
    mapping = {k: v[:max_members] for k, v in mapping.items()}
    (out / "perturbqa" / "k562_set-mapping.json").write_text(json.dumps(mapping))
    universe = set(perts) | set(genes) | {g for v in mapping.values() for g in v}
    for name in ("k562_gene-gse.json", "k562_pert-gse.json"):
        clusters = json.loads((data_dir / name).read_text())
        annotated = [c for c in clusters if c.get("label")]
        picked = [annotated[i] for i in sorted(rng.choice(len(annotated), n_clusters, replace=False))]
        picked.append(next(c for c in clusters if not c.get("label")))  # one unannotated cluster: not a test item
        picked = [{"genes": c["genes"][:max_members], "label": c.get("label")} for c in picked]
        universe |= {g for c in picked for g in c["genes"]}
        (out / "perturbqa" / name).write_text(json.dumps(picked))
    gw = json.loads((data_dir / "k562_gw_mapping_full.json").read_text())
    (out / "perturbqa" / "k562_gw_mapping_full.json").write_text(json.dumps({k: v for k, v in gw.items() if k in universe}))
    ensembl = {v for k, v in gw.items() if k in universe}

    # Knowledge graphs, restricted to the genes of the subset.
    huri = pd.read_csv(kg_dir / "huri_binary_ppi.tsv", sep="\t")
    huri[huri["protein1"].isin(ensembl) & huri["protein2"].isin(ensembl)].to_csv(out / "knowledge_graphs" / "huri_binary_ppi.tsv", sep="\t", index=False)
    omni = pd.read_csv(kg_dir / "omnipath_signed_directed.tsv", sep="\t")
    omni[omni["source"].isin(universe) & omni["target"].isin(universe)].to_csv(out / "knowledge_graphs" / "omnipath_signed_directed.tsv", sep="\t", index=False)
    corum = pd.read_csv(kg_dir / "corum_core_complexes.txt", sep="\t", usecols=["ComplexID", "ComplexName", "Organism", "subunits(Gene name)"])
    corum = corum[corum["Organism"] == "Human"].dropna(subset=["subunits(Gene name)"])
    members = corum["subunits(Gene name)"].str.split(";")
    hit = members.map(lambda m: len(universe & {x.strip() for x in m}) >= 2)
    corum = corum[hit].copy()
    corum["subunits(Gene name)"] = members[hit].map(lambda m: ";".join(x for x in m if x.strip() in universe))
    corum.to_csv(out / "knowledge_graphs" / "corum_core_complexes.txt", sep="\t", index=False)
    for name in ("GO_Biological_Process_2021.gmt", "ReactomePathways.gmt"):
        lines = []
        for line in (kg_dir / name).read_text().splitlines():
            fields = line.split("\t")
            kept = [g for g in fields[2:] if g in universe]
            if len(kept) >= 2:
                lines.append("\t".join(fields[:2] + kept))
        (out / "knowledge_graphs" / name).write_text("\n".join(lines) + "\n")
    with gzip.open(kg_dir / "string_v12_human_protein_info.txt.gz", "rt") as fh:
        info = pd.read_csv(fh, sep="\t")
    info = info[info["preferred_name"].isin(universe)]
    with gzip.open(out / "knowledge_graphs" / "string_v12_human_protein_info.txt.gz", "wt") as fh:
        info.to_csv(fh, sep="\t", index=False)
    return sorted(universe)


def training_pairs(train_obs: pd.DataFrame, subtask: str) -> pd.DataFrame:
    """Training pairs of a pair subtask with their binary ``label`` (``pert, gene, label``)."""
    mask, labels = subtask_labels(train_obs["response"].astype(str), subtask)
    out = train_obs.loc[mask, ["pert", "gene"]].astype(str).reset_index(drop=True)
    out["label"] = labels
    return out


def gene_prevalence(train_obs: pd.DataFrame, subtask: str) -> tuple[pd.Series, float]:
    """Each downstream gene's training prevalence of a subtask's positive label.

    Returns
    -------
    per_gene, overall
        Mean label per gene over its training pairs, and over all training pairs (the value for
        genes never seen in training).
    """
    pairs = training_pairs(train_obs, subtask)
    overall = float(pairs["label"].mean()) if len(pairs) else 0.5
    return pairs.groupby("gene")["label"].mean(), overall


def prevalence_scores(train_obs: pd.DataFrame, test_obs: pd.DataFrame) -> pd.Series:
    """Training prevalence of each pair item's gene for its subtask (NaN for cluster items)."""
    scores = pd.Series(np.nan, index=test_obs.index)
    for subtask in PAIR_SUBTASKS:
        rows = test_obs["subtask"] == subtask
        if rows.any():
            per_gene, overall = gene_prevalence(train_obs, subtask)
            genes = test_obs.loc[rows, "gene"].astype(str)
            scores[rows] = genes.map(per_gene).astype(float).fillna(overall).to_numpy(dtype=float)
    return scores


def write_prediction(path: str | Path, test_obs: pd.DataFrame, dataset_id: str, method_id: str, *,
                     scores: Mapping[str, float] | pd.Series | None = None,
                     texts: Mapping[str, str] | pd.Series | None = None, uns: Mapping | None = None) -> None:
    """Write a prediction file (see :func:`prediction_frame`)."""
    import anndata as ad

    obs = prediction_frame(test_obs, scores, texts)
    pairs = test_obs["subtask"].isin(PAIR_SUBTASKS).to_numpy()
    given = ~np.isnan(obs["score"].to_numpy())
    if given[pairs].any() and not given[pairs].all():
        raise ValueError(f"{path}: scores given for some pair items but not for {int((~given[pairs]).sum())} others")
    if np.isinf(obs["score"].to_numpy()[given]).any():
        raise ValueError(f"{path}: infinite scores")
    ad.AnnData(obs=obs, uns={"dataset_id": dataset_id, "method_id": method_id, **dict(uns or {})}).write_h5ad(path)
