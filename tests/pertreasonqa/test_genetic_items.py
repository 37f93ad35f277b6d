"""PerturbQA's CRISPRi outcome items (section 2.2) and their functional split (appendix B.1)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pertreasonqa_lib.genetic_items import CELLS, load_perturbqa_items
from project_paths import SHARED_DATA

needs_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data not found at {SHARED_DATA}")


def write_labels(folder, de_rows, dir_rows):
    (folder / "perturbqa").mkdir(parents=True)
    columns = ["pert", "gene", "label", "split"]
    pd.DataFrame(de_rows, columns=columns).to_csv(folder / "perturbqa" / "k562-de.csv", index=False)
    pd.DataFrame(dir_rows, columns=columns).to_csv(folder / "perturbqa" / "k562-dir.csv", index=False)


def test_labels_from_de_and_direction(tmp_path):
    write_labels(tmp_path, [("A", "G1", 0, "train"), ("A", "G2", 1, "train"), ("B", "G1", 1, "test")],
                 [("A", "G2", 1, "train"), ("B", "G1", 0, "test")])
    items = load_perturbqa_items("K562", tmp_path)
    # de 0 -> unchanged; de 1 with dir 1 -> up, dir 0 -> down
    assert items["label"].tolist() == ["unchanged", "up", "down"]
    assert items[["cell", "perturbation", "perturbation_type", "gene"]].values.tolist() == [
        ["K562", "A", "CRISPRi", "G1"], ["K562", "A", "CRISPRi", "G2"], ["K562", "B", "CRISPRi", "G1"]]
    assert CELLS["K562"]["distribution"] == "ID" and CELLS["RPE1"]["distribution"] == "OOD"


def test_labels_need_a_direction_for_every_de_pair(tmp_path):
    write_labels(tmp_path, [("A", "G2", 1, "train")], [("A", "G9", 1, "train")])
    with pytest.raises(ValueError, match="k562-dir.csv: 1 DE pairs of k562-de.csv have no direction"):
        load_perturbqa_items("K562", tmp_path)
    with pytest.raises(KeyError, match="unknown cell 'HeLa'"):
        load_perturbqa_items("HeLa", tmp_path)




@needs_data
def test_load_perturbqa_items_labels():
    items = load_perturbqa_items("K562", SHARED_DATA)
    # k562-de.csv: 137,699 label-0 rows; k562-dir.csv: 13,571 up and 6,409 down
    assert items["label"].value_counts().to_dict() == {"unchanged": 137699, "up": 13571, "down": 6409}
    assert set(items["perturbation_type"]) == {"CRISPRi"} and set(items["cell"]) == {"K562"}
    assert np.isin(items["label"], ["up", "down", "unchanged"]).all()
