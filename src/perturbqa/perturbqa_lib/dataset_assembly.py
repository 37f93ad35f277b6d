"""Datasets of the task assembled from labelled pairs: training pairs, test items, solution, metadata.

:func:`dataset_from_responses` turns labelled pairs (``pert, gene, split, response``, from the
published files or from the label pipeline) and gene-set clusters into the tables a dataset
writes; :func:`perturbqa_dataset` does so for a screen declared by its manifest
(:mod:`perturbqa_lib.screen_manifest`), with its metadata; :func:`dataset_label` makes the short
label (at most 30 characters) that heads a dataset's column on the website.

**Decoy items.** The published label files sample, for each perturbation, its DE genes and a set
of unchanged ones, so a perturbation's number of labelled test pairs follows how many genes it
changes (for dir, its pairs *are* its DE genes). Every method sees the test file, so that count
alone would reveal each unseen perturbation's strength, and macro AUROC (per downstream gene,
across perturbations) rewards it: scoring a pair by its perturbation's item count reaches 0.58 to
0.62 on the published K562 and RPE1 splits. :func:`pad_with_decoys` therefore gives every test
perturbation of a pair subtask the same number of items, adding unlabelled *decoy* pairs whose
genes are drawn (seeded) from the genes of the other perturbations' labelled items, in proportion
to how often each occurs there, so neither a decoy's gene nor its perturbation's count tells it
apart. Decoys are in the test file only; the solution keeps the labelled items, and the metrics
score those alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from perturbqa_lib.published_labels import load_screen, read_clusters_json
from perturbqa_lib.screen_manifest import ScreenManifest
from perturbqa_lib.task_items import (
    CLUSTER_SUBTASKS,
    PAIR_SUBTASKS,
    SUBTASKS,
    cluster_items,
    pair_items,
    subtask_labels,
)

__all__ = ["KNOWLEDGE_LICENSE", "MAX_DATASET_LABEL", "perturbqa_dataset", "screen_metadata", "dataset_label",
           "dataset_from_responses", "pad_with_decoys"]

#: Licences of the knowledge graphs every dataset ships (the labels' licence is the screen's own).
KNOWLEDGE_LICENSE = ("Knowledge graphs: CORUM CC BY-NC 4.0, HuRI, Reactome, GO, OmniPath and STRING under their own "
                     "terms; gene symbols from HGNC (CC0). For benchmarking only.")
#: Longest dataset label (``uns["dataset_name"]``), the width of a column header on the website.
MAX_DATASET_LABEL = 30
_SUBTASK_NAMES = {"de": "differential expression", "dir": "direction of change",
                  "gse_gene": "gene-set enrichment of gene clusters", "gse_pert": "gene-set enrichment of perturbation clusters"}
_SUBTASK_LABELS = {"de": "DE", "dir": "direction", "gse_gene": "gene clusters", "gse_pert": "pert clusters"}


def dataset_label(screen_label: str, subtasks: Sequence[str]) -> str:
    """A dataset's short label: ``"<screen label> <subtask>"``, at most :data:`MAX_DATASET_LABEL` characters.

    Several subtasks (test resources) are named by their ids; the long text stays in the
    dataset's summary and description.

    Raises
    ------
    ValueError
        When even the shortest form is longer than :data:`MAX_DATASET_LABEL`.
    """
    subtasks = list(subtasks)
    candidates = [f"{screen_label} {_SUBTASK_LABELS.get(subtasks[0], subtasks[0])}"] if len(subtasks) == 1 else []
    candidates += [f"{screen_label}: {'+'.join(subtasks)}", f"{screen_label}: {len(subtasks)} subtasks"]
    for label in candidates:
        if len(label) <= MAX_DATASET_LABEL:
            return label
    raise ValueError(f"screen label {screen_label!r} is too long for a {MAX_DATASET_LABEL}-character dataset label")


def perturbqa_dataset(data_dir: str | Path, manifest: ScreenManifest, subtasks: Sequence[str], dataset_id: str, *,
                      seed: int = 0) -> dict:
    """Build a dataset of the task from a screen's files in the published layout.

    Parameters
    ----------
    data_dir : path
        Folder of the files the manifest names (``<shared data>/perturbqa`` for the published screens).
    manifest : ScreenManifest
        The screen's declaration: label files, gene-set clusters, cell line, source.
    subtasks : sequence of str
        Subtasks whose test items the dataset holds (one for a benchmark dataset; de and dir
        together would reveal the de labels, since dir items are the DE pairs). Gene-set
        enrichment subtasks need their cluster file in the manifest.
    dataset_id : str
    seed : int
        Seed of the decoy pairs (:func:`pad_with_decoys`).

    Returns
    -------
    dict
        ``train`` (obs of the training pairs), ``test`` and ``solution`` (obs of the items),
        ``uns`` (dataset metadata) and ``sets`` (downstream sets as a ``set_name, gene`` table).

    Raises
    ------
    ValueError
        For unknown subtasks, de with dir, a cluster subtask the screen does not declare, or a
        subtask without test items (naming the file).
    """
    subtasks = list(dict.fromkeys(subtasks))
    unknown = [s for s in subtasks if s not in SUBTASKS]
    if unknown or not subtasks:
        raise ValueError(f"subtasks must be among {SUBTASKS}, got {subtasks}")
    if {"de", "dir"} <= set(subtasks):
        raise ValueError("de and dir items cannot share a dataset: the dir items are the DE pairs")
    for s in subtasks:
        if s in CLUSTER_SUBTASKS and not manifest.has(s):
            raise ValueError(f"{manifest.path}: the screen declares no files.{s} (gene-set enrichment clusters)")
    data_dir = Path(data_dir)
    responses, sets = load_screen(data_dir, manifest)
    clusters = {s: read_clusters_json(manifest.file(s, data_dir)) for s in subtasks if s in CLUSTER_SUBTASKS}
    sources = {s: str(manifest.file(s, data_dir)) for s in subtasks}  # the manifest's file keys are the subtasks
    task_names = " and ".join(_SUBTASK_NAMES[s] for s in subtasks)
    uns = {
        "dataset_id": dataset_id,
        "dataset_name": dataset_label(manifest.label, subtasks),
        "dataset_summary": f"PerturbQA {task_names} on the {manifest.name} CRISPRi screen, unseen perturbations.",
        "dataset_description": f"{manifest.name}: {task_names}. {manifest.source}.",
        "dataset_reference": "; ".join(manifest.reference),
        "dataset_url": manifest.url,
        "dataset_organism": manifest.organism,
        "dataset_license": f"{manifest.license} {KNOWLEDGE_LICENSE}",
        "cell_line": manifest.cell_line,
        "cell_line_description": manifest.cell_line_description,
        "downstream_type": manifest.downstream_type,
    }
    return dataset_from_responses(responses, subtasks, uns, sets=sets, clusters=clusters, sources=sources, seed=seed)


def screen_metadata(dataset_id: str, screen_file: str | Path, subtasks: Sequence[str], cell_line: str,
                    cell_line_description: str, *, organism: str = "homo_sapiens") -> dict:
    """The ``uns`` of a dataset whose labels the pipeline of appendix A.2 made from a screen file.

    Raises
    ------
    ValueError
        For an empty cell line or cell-line sentence (the prompts need both).
    """
    if not cell_line.strip() or not cell_line_description.strip():
        raise ValueError(f"{screen_file}: a screen needs its cell line and the sentence describing it for the prompts")
    screen_file = Path(screen_file)
    return {"dataset_id": dataset_id, "dataset_name": dataset_label(cell_line[:12], subtasks),
            "dataset_summary": f"PerturbQA labels built from the Perturb-seq screen {screen_file.name}.",
            "dataset_description": f"{screen_file.name}: labels from the PerturbQA pipeline (Wilcoxon rank-sum, "
                                   "Benjamini-Hochberg, appendix A.2).",
            "dataset_reference": "10.48550/arXiv.2502.21290", "dataset_url": "", "dataset_organism": organism,
            "dataset_license": f"Licence of {screen_file.name}. {KNOWLEDGE_LICENSE}", "cell_line": cell_line,
            "cell_line_description": cell_line_description.strip(), "downstream_type": "gene"}


def dataset_from_responses(responses: pd.DataFrame, subtasks: Sequence[str], uns: Mapping, *,
                           sets: Mapping[str, Sequence[str]] | None = None,
                           clusters: Mapping[str, pd.DataFrame] | None = None,
                           sources: Mapping[str, str] | None = None, seed: int = 0) -> dict:
    """Assemble a dataset from labelled pairs (``pert, gene, split, response``).

    Training pairs are every pair of the training split; test items are the test pairs of each
    pair subtask, padded with decoy pairs so that every test perturbation has as many items
    (:func:`pad_with_decoys`, seeded by ``seed``), and the annotated clusters of each cluster
    subtask (``clusters[subtask]`` from :func:`read_clusters_json`). The solution holds the
    labelled items only. ``uns`` gets ``subtask``, ``n_decoy_items`` and a count of pairs and
    items. ``sources`` names the file each subtask's items come from, for the error messages.

    Raises
    ------
    ValueError
        When there are no training pairs, or a requested subtask has no test item (naming its
        file): an empty dataset never passes silently.
    """
    sources = dict(sources or {})
    subtasks = list(dict.fromkeys(subtasks))
    if {"de", "dir"} <= set(subtasks):
        raise ValueError("de and dir items cannot share a dataset: the dir items are the DE pairs")
    train = responses[responses["split"] == "train"]
    if train.empty:
        raise ValueError(f"{sources.get('de', 'the labelled pairs')}: no training pairs")
    train_obs = pd.DataFrame({"pert": train["pert"].to_numpy(), "gene": train["gene"].to_numpy(),
                              "response": train["response"].to_numpy()},
                             index=pd.Index(train["pert"] + ":" + train["gene"], name="pair"))
    tests, solutions = [], []
    n_decoys = 0
    test_pairs = responses[responses["split"] == "test"]
    for subtask in subtasks:
        if subtask in PAIR_SUBTASKS:
            mask, labels = subtask_labels(test_pairs["response"], subtask)
            labelled = pair_items(test_pairs[mask], subtask)
            sol = labelled[["subtask", "pert", "gene"]].copy()
            sol["label"] = labels.astype(float)
            sol["annotation"] = ""
            # Sorted by pair, so the file's order says nothing of labels or of which items are decoys.
            items = pad_with_decoys(labelled, seed=seed).sort_values(["pert", "gene"], kind="stable")
            sol = sol.loc[items.index[items.index.isin(sol.index)]]
            n_decoys += len(items) - len(labelled)
        else:
            if clusters is None or subtask not in clusters:
                raise ValueError(f"subtask {subtask} needs its clusters")
            annotated = clusters[subtask][clusters[subtask]["annotation"] != ""]  # only annotated clusters are evaluated (A.1)
            items = cluster_items(annotated, subtask)
            sol = items[["subtask", "pert", "gene"]].copy()
            sol["label"] = np.nan
            sol["annotation"] = annotated["annotation"].to_numpy()
        if items.empty:
            where = sources.get(subtask, "the labelled pairs")
            raise ValueError(f"{where}: no test items for subtask {subtask}"
                             + (" (no annotated cluster)" if subtask in CLUSTER_SUBTASKS else " (no test pair of it)"))
        tests.append(items)
        solutions.append(sol)
    test_obs = pd.concat(tests)
    uns = dict(uns)
    uns["subtask"] = ",".join(subtasks)
    uns["n_decoy_items"] = int(n_decoys)
    decoy_text = (f", of which {n_decoys} unlabelled decoy pairs that give every test perturbation as many items "
                  "(the solution and the metrics hold the labelled ones only)" if n_decoys else "")
    uns["dataset_description"] = (f"{uns.get('dataset_description', '')} {len(train_obs)} training pairs of "
                                  f"{train_obs['pert'].nunique()} perturbations; {len(test_obs)} test items "
                                  f"({', '.join(subtasks)}){decoy_text}.").strip()
    sets_table = pd.DataFrame([(k, g) for k, v in (sets or {}).items() for g in v], columns=["set_name", "gene"])
    return {"train": train_obs, "test": test_obs, "solution": pd.concat(solutions), "uns": uns, "sets": sets_table}


def pad_with_decoys(items: pd.DataFrame, *, seed: int = 0, items_per_perturbation: int | None = None) -> pd.DataFrame:
    """Pad a pair subtask's test items with decoy pairs so every perturbation has as many items.

    Each perturbation with fewer items than the largest count gets that many more pairs
    ``(pert, g)``, ``g`` drawn without replacement among the subtask's labelled genes that are not
    already items of the perturbation, each with probability proportional to its number of
    labelled items (all of them of other perturbations, since the perturbation's own genes are
    excluded). Decoys thus follow the genes' distribution over labelled items: neither their gene
    nor their perturbation's item count distinguishes them, and the count no longer measures how
    many genes a knockdown changes. For ``dir`` the excluded genes are the perturbation's DE
    genes (its items), so a decoy may be a gene the ``de`` file labels unchanged.

    Parameters
    ----------
    items : pandas.DataFrame
        Test items of one pair subtask (:func:`~perturbqa_lib.task_items.pair_items`).
    seed : int
        Seed of the draw.
    items_per_perturbation : int, optional
        Items every perturbation ends with; the largest labelled count when not given (the
        datasets' choice: padding beyond it dilutes which genes a perturbation's items name only
        slowly, see the task description, at 2x to 6x the items).

    Returns
    -------
    pandas.DataFrame
        The items followed by the decoys, in the same columns and index form
        (``<subtask>:<pert>:<gene>``); decoys carry no mark.

    Raises
    ------
    ValueError
        For items of several subtasks, a pair listed twice, or ``items_per_perturbation`` below
        a perturbation's labelled count or above the number of genes to draw from.
    """
    if items.empty:
        return items
    subtasks = items["subtask"].unique()
    if len(subtasks) != 1 or subtasks[0] not in PAIR_SUBTASKS:
        raise ValueError(f"decoys pad the items of one pair subtask {PAIR_SUBTASKS}, got {list(subtasks)}")
    if items.index.duplicated().any():
        raise ValueError(f"{int(items.index.duplicated().sum())} test pairs listed twice, e.g. "
                         f"{items.index[items.index.duplicated()][0]}")
    pert = items["pert"].astype(str)
    gene = items["gene"].astype(str)
    gene_counts = gene.value_counts()
    genes = gene_counts.index.to_numpy()
    weights = gene_counts.to_numpy(dtype=float)
    per_pert = pert.value_counts()
    target = int(per_pert.max()) if items_per_perturbation is None else int(items_per_perturbation)
    if target < int(per_pert.max()):
        raise ValueError(f"{target} items per perturbation is fewer than the {int(per_pert.max())} labelled pairs "
                         "of one of them; labelled items are never dropped")
    if target > len(genes):
        raise ValueError(f"{target} items per perturbation, but the subtask's labelled pairs name only {len(genes)} genes")
    rng = np.random.default_rng(seed)
    position = pd.Series(np.arange(len(genes)), index=genes)
    decoy_perts, decoy_genes = [], []
    for p in sorted(per_pert.index[per_pert < target]):  # sorted: the draw does not depend on file order
        available = np.ones(len(genes), bool)
        available[position[gene[pert == p]].to_numpy()] = False
        chosen = rng.choice(genes[available], size=target - int(per_pert[p]), replace=False,
                            p=weights[available] / weights[available].sum())
        decoy_perts.append(np.full(len(chosen), p))
        decoy_genes.append(chosen)
    if not decoy_perts:
        return items
    decoys = pd.DataFrame({"pert": np.concatenate(decoy_perts), "gene": np.concatenate(decoy_genes)})
    return pd.concat([items, pair_items(decoys, str(subtasks[0]))])
