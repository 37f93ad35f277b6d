"""Datasets of the task assembled from labelled pairs: training pairs, test items, solution, metadata.

:func:`dataset_from_responses` turns labelled pairs (``pert, gene, split, response``, from the
published files or from the label pipeline) and gene-set clusters into the tables a dataset
writes; :func:`perturbqa_dataset` does so for a screen of the published labels, with its metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from perturbqa_lib.published_labels import SCREENS, load_screen, read_clusters_json
from perturbqa_lib.task_items import (
    CELL_LINES,
    CLUSTER_SUBTASKS,
    PAIR_SUBTASKS,
    SUBTASKS,
    cluster_items,
    pair_items,
    subtask_labels,
)

__all__ = ["LICENSE", "perturbqa_dataset", "screen_metadata", "dataset_from_responses"]

LICENSE = ("Genentech Non-Commercial Software License (PerturbQA labels, Wu et al. 2025); knowledge graphs: "
           "CORUM CC BY-NC 4.0, HuRI, Reactome, GO, OmniPath and STRING under their own terms. For "
           "benchmarking only.")
_SUBTASK_NAMES = {"de": "differential expression", "dir": "direction of change",
                  "gse_gene": "gene-set enrichment of gene clusters", "gse_pert": "gene-set enrichment of perturbation clusters"}
_GSE_FILES = {"gse_gene": "k562_gene-gse.json", "gse_pert": "k562_pert-gse.json"}


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


def screen_metadata(dataset_id: str, screen_file: str | Path, subtasks: Sequence[str], cell_line: str) -> dict:
    """The ``uns`` of a dataset whose labels the pipeline of appendix A.2 made from a screen file.

    Raises
    ------
    ValueError
        For a cell line without a context sentence in :data:`perturbqa_lib.task_items.CELL_LINES`.
    """
    if cell_line not in CELL_LINES:
        raise ValueError(f"unknown cell line {cell_line!r}; known: {sorted(CELL_LINES)}")
    screen_file = Path(screen_file)
    return {"dataset_id": dataset_id, "dataset_name": f"{screen_file.stem}: {', '.join(subtasks)}",
            "dataset_summary": f"PerturbQA labels built from the Perturb-seq screen {screen_file.name}.",
            "dataset_description": "Labels from the PerturbQA pipeline (Wilcoxon rank-sum, Benjamini-Hochberg, appendix A.2).",
            "dataset_reference": "10.48550/arXiv.2502.21290", "dataset_url": "", "dataset_organism": "homo_sapiens",
            "dataset_license": LICENSE, "cell_line": cell_line, "cell_line_description": CELL_LINES[cell_line],
            "downstream_type": "gene"}


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
