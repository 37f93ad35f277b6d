"""Datasets of the task assembled from labelled pairs: training pairs, test items, solution, metadata.

:func:`dataset_from_responses` turns labelled pairs (``pert, gene, split, response``, from the
published files or from the label pipeline) and gene-set clusters into the tables a dataset
writes; :func:`perturbqa_dataset` does so for a screen declared by its manifest
(:mod:`perturbqa_lib.screen_manifest`), with its metadata; :func:`dataset_label` makes the short
label (at most 30 characters) that heads a dataset's column on the website.
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
           "dataset_from_responses"]

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

    Training pairs are every pair of the training split; test items are the test pairs of each
    pair subtask and the annotated clusters of each cluster subtask (``clusters[subtask]`` from
    :func:`read_clusters_json`). ``uns`` gets ``subtask`` and a count of pairs and items.
    ``sources`` names the file each subtask's items come from, for the error messages.

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
        if items.empty:
            where = sources.get(subtask, "the labelled pairs")
            raise ValueError(f"{where}: no test items for subtask {subtask}"
                             + (" (no annotated cluster)" if subtask in CLUSTER_SUBTASKS else " (no test pair of it)"))
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
