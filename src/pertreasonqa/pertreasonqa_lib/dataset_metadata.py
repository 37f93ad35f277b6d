"""The ``uns`` metadata of PertReasonQA's datasets, by modality: what every file of a dataset says of it.

Kept apart from the items' modules (:mod:`pertreasonqa_lib.chemical_items`,
:mod:`pertreasonqa_lib.genetic_items`), which the split of a fold does not need: it names its
dataset from the facts of the build (:func:`pertreasonqa_lib.dataset_builds.fold_uns`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pertreasonqa_lib.functional_splits import fold_label


def genetic_dataset_uns(dataset_id: str, fold: str, test_folds: Sequence[str], basal_stats: Mapping[str, int]) -> dict:
    """The ``uns`` metadata of a genetic dataset (written to every file).

    Parameters
    ----------
    dataset_id, fold
        The dataset's id and its ``--fold`` (one fold or ``all``).
    test_folds
        The folds of its test file.
    basal_stats
        ``n_mapped`` and ``n_hpa_genes`` of the basal expression.
    """
    n_filled = basal_stats.get("n_filled_K562")
    filled = f"; {n_filled} further K562 genes from ENCODE RNA-seq (quantile-mapped to NX)" if n_filled else ""
    return {
        "dataset_id": dataset_id,
        "dataset_name": f"CRISPRi: {fold_label(fold)}",  # a short label (at most 30 characters)
        "dataset_summary": f"PerturbQA CRISPRi outcomes of K562 (ID) and RPE1 (OOD) with cell-conditioned reference paths; test fold(s) {', '.join(test_folds)}.",
        "dataset_description": f"Test fold(s): {', '.join(test_folds)}. Training: K562 items of the train and valid "
                               f"perturbations. HPA v20: {basal_stats['n_mapped']} of {basal_stats['n_hpa_genes']} genes map to a symbol"
                               f"{filled}.",
        "dataset_reference": "10.1016/j.cell.2022.05.013",
        "dataset_url": "https://github.com/genentech/PerturbQA",
        "dataset_organism": "homo_sapiens",
        "dataset_license": "PerturbQA labels: Genentech non-commercial; HPA: CC BY-SA 3.0; benchmarking use only",
        "fold": fold,
    }


def chemical_dataset_uns(dataset_id: str, fold: str, test_folds: Sequence[str], n_compounds: int, seed: int,
                         n_cells: int, basal_stats: Mapping[str, int]) -> dict:
    """The ``uns`` metadata of a chemical dataset (written to every file).

    Parameters
    ----------
    dataset_id, fold
        The dataset's id and its ``--fold`` (one fold or ``all``).
    test_folds
        The folds of its test file.
    n_compounds, seed, n_cells
        Size (0: full size) and seed of the simulation, and the cells it drew.
    basal_stats
        ``n_mapped`` and ``n_hpa_genes`` of the blood basal expression.
    """
    size = "full-size" if n_compounds == 0 else f"{n_compounds} compounds"
    return {
        "dataset_id": dataset_id,
        "dataset_name": f"Compounds: {fold_label(fold)}",  # a short label (at most 30 characters)
        "dataset_summary": f"Compound outcomes of the synthetic OP3 experiment with drug-target-anchored, cell-conditioned reference paths; test fold(s) {', '.join(test_folds)}.",
        "dataset_description": f"Test fold(s): {', '.join(test_folds)}. Simulation ({size}, seed {seed}): "
                               f"{n_cells} cells. Training: B, myeloid and NK cell items of the train and valid "
                               f"compounds. HPA v20 blood: {basal_stats['n_mapped']} of {basal_stats['n_hpa_genes']} genes map to a symbol.",
        "dataset_reference": "szalata2024benchmark",
        "dataset_url": "https://github.com/openproblems-bio/task_perturbation_prediction",
        "dataset_organism": "homo_sapiens",
        "dataset_license": "CC BY 4.0 (OP3 metadata); HPA: CC BY-SA 3.0",
        "fold": fold,
    }


#: Each modality's metadata function (its arguments after ``dataset_id, fold, test_folds`` are the
#: facts a build records).
DATASET_UNS: dict[str, Callable[..., dict]] = {"chemical": chemical_dataset_uns, "genetic": genetic_dataset_uns}
