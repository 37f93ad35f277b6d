"""Perturbation ids and their target genes (perturbation_effect_lib.perturbation_targets)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from perturbation_effect_lib import perturbation_targets as pt


def test_targets_of_a_perturbation_id():
    assert pt.perturbation_targets("CBL+CNN1") == ["CBL", "CNN1"]
    assert pt.perturbation_targets("KLF1") == ["KLF1"]
    assert pt.perturbation_targets("A+") == ["A"]


def test_target_matrix_ignores_targets_outside_the_genes():
    m = pt.target_matrix(["A", "A+C", "Z", "B+Z"], ["A", "B", "C"]).toarray()
    np.testing.assert_array_equal(m, [[1, 0, 0], [1, 0, 1], [0, 0, 0], [0, 1, 0]])


def test_a_combination_is_embedded_by_the_sum_of_its_targets():
    table = np.array([[1.0, 0.0], [0.0, 2.0]])
    emb = pt.embed_perturbations(["A+B", "B", "Z"], pd.Index(["A", "B"]), table)
    np.testing.assert_array_equal(emb, [[1.0, 2.0], [0.0, 2.0], [0.0, 0.0]])
