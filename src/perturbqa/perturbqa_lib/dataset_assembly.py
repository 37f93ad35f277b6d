"""Datasets of the task assembled from labelled pairs: training pairs, test items, solution, metadata.

:func:`dataset_from_responses` turns labelled pairs (``pert, gene, split, response``, from the
published files or from the label pipeline) and gene-set clusters into the tables a dataset
writes; :func:`perturbqa_dataset` does so for a screen declared by its manifest
(:mod:`perturbqa_lib.screen_manifest`), with its metadata; :func:`dataset_label` makes the short
label (at most 30 characters) that heads a dataset's column on the website.

**Test items.** The published label files sample, for each perturbation, its top DE genes and a
set of unchanged ones, so which genes a perturbation's test pairs name, and how many, follow how
strongly it acts (for dir, its pairs *are* its DE genes). Every method sees the test file, so a
file of the labelled pairs alone would reveal each unseen perturbation's strength, and macro AUROC
(per downstream gene, across perturbations) rewards that: scoring a pair by its perturbation's
item count reached 0.59 to 0.62 on the published K562 and RPE1 splits, by the training prevalence
of the genes its items name up to 0.75 (K562 dir). :func:`scored_cross` therefore makes the test
items of a pair subtask the full cross of its test perturbations with the genes macro AUROC
scores (both classes among their labelled test pairs): every perturbation names the same genes.
Pairs of the cross without a label (*decoys*) are in the test file only; the solution keeps the
labelled pairs, and the metrics score those alone.
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
           "dataset_from_responses", "training_obs", "scored_cross"]

#: Licences of the knowledge graphs every dataset ships (the labels' licence is the screen's own).
KNOWLEDGE_LICENSE = ("Knowledge graphs: CORUM CC BY-NC 4.0, HuRI, Reactome, GO, OmniPath and STRING under their own "
                     "terms; gene symbols from HGNC (CC0). For benchmarking only.")
#: Longest dataset label (``uns["dataset_name"]``), the width of a column header on the website.
MAX_DATASET_LABEL = 30
_SUBTASK_NAMES = {"de": "differential expression", "dir": "direction of change",
                  "gse_gene": "gene-set enrichment of gene clusters", "gse_pert": "gene-set enrichment of perturbation clusters"}
_SUBTASK_LABELS = {"de": "DE", "dir": "direction", "gse_gene": "gene clusters", "gse_pert": "pert clusters"}
#: The same, shorter, for a label that lists several subtasks.
_SUBTASK_WORDS = {"de": "DE", "dir": "direction", "gse_gene": "gene sets", "gse_pert": "pert sets"}


def dataset_label(screen_label: str, subtasks: Sequence[str]) -> str:
    """A dataset's short label: ``"<screen label> <subtask>"``, at most :data:`MAX_DATASET_LABEL` characters.

    Several subtasks (test resources) are listed by their short words ("K562 DE, gene sets,
    pert sets"), or counted when those do not fit; never by their ids. The long text stays in the
    dataset's summary and description.

    Raises
    ------
    ValueError
        When even the shortest form is longer than :data:`MAX_DATASET_LABEL`.
    """
    subtasks = list(subtasks)
    if len(subtasks) == 1:
        candidates = [f"{screen_label} {_SUBTASK_LABELS.get(subtasks[0], subtasks[0])}"]
    else:
        candidates = [f"{screen_label} {', '.join(_SUBTASK_WORDS.get(s, s) for s in subtasks)}"]
    candidates.append(f"{screen_label}, {len(subtasks)} subtasks")
    for label in candidates:
        if len(label) <= MAX_DATASET_LABEL:
            return label
    raise ValueError(f"screen label {screen_label!r} is too long for a {MAX_DATASET_LABEL}-character dataset label")


def perturbqa_dataset(data_dir: str | Path, manifest: ScreenManifest, subtasks: Sequence[str], dataset_id: str) -> dict:
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
    return dataset_from_responses(responses, subtasks, uns, sets=sets, clusters=clusters, sources=sources)


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
                           sources: Mapping[str, str] | None = None) -> dict:
    """Assemble a dataset from labelled pairs (``pert, gene, split, response``).

    Training pairs are every pair of the training split; test items are, for each pair subtask,
    the cross of its test perturbations with the genes macro AUROC scores (:func:`scored_cross`),
    and the annotated clusters of each cluster subtask (``clusters[subtask]`` from
    :func:`read_clusters_json`). The solution holds the labelled items of the test file.
    ``uns`` gets ``subtask``, ``n_decoy_items`` (unlabelled pairs of the cross),
    ``n_unscored_pairs`` (labelled test pairs of genes with one class, left out) and a count of
    pairs and items. ``sources`` names the file each subtask's items come from, for the error
    messages.

    Raises
    ------
    ValueError
        When there are no training pairs, or a requested subtask has no test item, or no gene
        with both classes (naming its file): an empty dataset never passes silently.
    """
    sources = dict(sources or {})
    subtasks = list(dict.fromkeys(subtasks))
    if {"de", "dir"} <= set(subtasks):
        raise ValueError("de and dir items cannot share a dataset: the dir items are the DE pairs")
    train = responses[responses["split"] == "train"]
    if train.empty:
        raise ValueError(f"{sources.get('de', 'the labelled pairs')}: no training pairs")
    train_obs = training_obs(train)
    tests, solutions = [], []
    n_decoys = n_unscored = 0
    test_pairs = responses[responses["split"] == "test"]
    for subtask in subtasks:
        if subtask in PAIR_SUBTASKS:
            mask, labels = subtask_labels(test_pairs["response"], subtask)
            labelled, labels = pair_items(test_pairs[mask], subtask), np.asarray(labels, dtype=float)
            if labelled.empty:
                raise ValueError(f"{sources.get(subtask, 'the labelled pairs')}: no test items for subtask {subtask} "
                                 "(no test pair of it)")
            try:
                items, kept = scored_cross(labelled, labels)
            except ValueError as err:
                raise ValueError(f"{sources.get(subtask, 'the labelled pairs')}: {err}") from None
            sol = labelled.loc[kept, ["subtask", "pert", "gene"]].assign(label=labels[kept], annotation="")
            sol = sol.loc[items.index[items.index.isin(sol.index)]]  # in the test file's order
            n_decoys += len(items) - len(sol)
            n_unscored += int((~kept).sum())
        else:
            if clusters is None or subtask not in clusters:
                raise ValueError(f"subtask {subtask} needs its clusters")
            annotated = clusters[subtask][clusters[subtask]["annotation"] != ""]  # only annotated clusters are evaluated (A.1)
            items = cluster_items(annotated, subtask)
            sol = items[["subtask", "pert", "gene"]].copy()
            sol["label"] = np.nan
            sol["annotation"] = annotated["annotation"].to_numpy()
            if items.empty:
                raise ValueError(f"{sources.get(subtask, 'the labelled pairs')}: no test items for subtask {subtask} "
                                 "(no annotated cluster)")
        tests.append(items)
        solutions.append(sol)
    test_obs = pd.concat(tests)
    uns = dict(uns)
    uns["subtask"] = ",".join(subtasks)
    uns["n_decoy_items"] = int(n_decoys)
    uns["n_unscored_pairs"] = int(n_unscored)
    decoy_text = (f", every test perturbation with every gene macro AUROC scores, {n_decoys} of them unlabelled "
                  "(the solution and the metrics hold the labelled ones only)" if n_decoys else "")
    if n_unscored:
        decoy_text += (f"; {n_unscored} labelled test pairs of genes with one class only, which macro AUROC "
                       "cannot score, are left out")
    uns["dataset_description"] = (f"{uns.get('dataset_description', '')} {len(train_obs)} training pairs of "
                                  f"{train_obs['pert'].nunique()} perturbations; {len(test_obs)} test items "
                                  f"({', '.join(subtasks)}){decoy_text}.").strip()
    sets_table = pd.DataFrame([(k, g) for k, v in (sets or {}).items() for g in v], columns=["set_name", "gene"])
    return {"train": train_obs, "test": test_obs, "solution": pd.concat(solutions), "uns": uns, "sets": sets_table}


def training_obs(pairs: pd.DataFrame) -> pd.DataFrame:
    """The training file's table of labelled pairs: ``pert, gene, response``, indexed ``<pert>:<gene>``."""
    return pd.DataFrame({"pert": pairs["pert"].to_numpy(), "gene": pairs["gene"].to_numpy(),
                         "response": pairs["response"].to_numpy()},
                        index=pd.Index(pairs["pert"] + ":" + pairs["gene"], name="pair"))


def scored_cross(items: pd.DataFrame, labels: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """The test items of a pair subtask: every test perturbation with every gene macro AUROC scores.

    Macro AUROC (section 5.2) scores a downstream gene across the test perturbations when its
    labelled test pairs hold both classes. The items are the full cross of the subtask's test
    perturbations with those genes, so every perturbation names the same genes, as many of them:
    neither the number nor the choice of a perturbation's items depends on its labels. The cross
    holds every labelled pair of a scored gene; its other pairs are unlabelled (the *decoys*).
    Labelled pairs of genes with one class only cannot enter macro AUROC and are left out.

    Parameters
    ----------
    items : pandas.DataFrame
        Labelled test items of one pair subtask (:func:`~perturbqa_lib.task_items.pair_items`).
    labels : numpy.ndarray
        Their labels (0 or 1), in the same order.

    Returns
    -------
    cross : pandas.DataFrame
        The items, sorted by perturbation and gene (the order marks nothing), in the columns and
        index form of :func:`~perturbqa_lib.task_items.pair_items`.
    kept : numpy.ndarray of bool
        Which of ``items`` are in ``cross`` (those of a scored gene).

    Raises
    ------
    ValueError
        For items of several subtasks or a non-pair subtask, a pair listed twice, labels of
        another length, or no gene with both classes (nothing macro AUROC could score).
    """
    subtasks = items["subtask"].unique()
    if len(subtasks) != 1 or subtasks[0] not in PAIR_SUBTASKS:
        raise ValueError(f"a cross is built from the items of one pair subtask {PAIR_SUBTASKS}, got {list(subtasks)}")
    if items.index.duplicated().any():
        raise ValueError(f"{int(items.index.duplicated().sum())} test pairs listed twice, e.g. "
                         f"{items.index[items.index.duplicated()][0]}")
    labels = np.asarray(labels, dtype=float)
    if len(labels) != len(items):
        raise ValueError(f"{len(labels)} labels for {len(items)} items")
    gene = items["gene"].astype(str).to_numpy()
    classes = pd.Series(labels).groupby(gene).agg(["min", "max"])
    scored = np.sort(classes.index[(classes["min"] == 0) & (classes["max"] == 1)].to_numpy(dtype=str))
    if not len(scored):
        raise ValueError(f"no downstream gene of subtask {subtasks[0]} has both labels among the test pairs: "
                         "macro AUROC has nothing to score")
    perts = np.sort(items["pert"].astype(str).unique())
    cross = pd.DataFrame({"pert": np.repeat(perts, len(scored)), "gene": np.tile(scored, len(perts))})
    return pair_items(cross, str(subtasks[0])), np.isin(gene, scored)
