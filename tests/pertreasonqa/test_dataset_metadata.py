"""Tests of pertreasonqa_lib.dataset_metadata: each modality's dataset uns names its folds and its sources."""

from __future__ import annotations

import subprocess
import sys

from pertreasonqa_lib.dataset_metadata import DATASET_UNS, chemical_dataset_uns, genetic_dataset_uns


def test_genetic_uns_names_the_folds_and_the_mapping():
    uns = genetic_dataset_uns("g", "all", ["id_cell_id_pert", "ood_cell_id_pert"], {"n_mapped": 8163, "n_hpa_genes": 19670})
    assert uns["dataset_id"] == "g" and uns["fold"] == "all"
    assert uns["dataset_description"].startswith("Test fold(s): id_cell_id_pert, ood_cell_id_pert.")
    assert "8163 of 19670 genes map to a symbol" in uns["dataset_description"]


def test_chemical_uns_names_the_simulation():
    uns = chemical_dataset_uns("c", "id_cell_id_pert", ["id_cell_id_pert"], 16, 0, 1234, {"n_mapped": 9, "n_hpa_genes": 10})
    assert uns["dataset_id"] == "c" and uns["fold"] == "id_cell_id_pert"
    assert "Simulation (16 compounds, seed 0): 1234 cells." in uns["dataset_description"]
    assert "full-size" in chemical_dataset_uns("c", "all", [], 0, 0, 1, {"n_mapped": 9, "n_hpa_genes": 10})["dataset_description"]


def test_every_modality_has_its_function_and_the_split_does_not_import_the_items():
    """A fold's split names its dataset without importing the OP3 simulation (scipy.stats and all)."""
    assert DATASET_UNS == {"chemical": chemical_dataset_uns, "genetic": genetic_dataset_uns}
    code = ("import sys; import pertreasonqa_lib.dataset_builds; "
            "print(sorted(m for m in ('pertreasonqa_lib.chemical_items', 'pertreasonqa_lib.genetic_items', "
            "'pertsci.op3_simulation', 'scipy.stats') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": ":".join(sys.path)})
    assert done.stdout.strip() == "[]"
