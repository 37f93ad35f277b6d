"""Similarity, neighbours and hardness (perturbation_effect_lib.hardness)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from perturbation_effect_lib import hardness


def test_hardness_is_mean_cosine_similarity_of_the_top_k():
    B_train = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.0]])
    B_test = np.array([[2.0, 0.0], [0.0, 0.0]])
    hard = hardness.hardness(B_test, B_train, fractions=(0.25, 0.5, 1.0))
    # similarities of [2, 0]: 1, 0, 1/sqrt(2), -1 -> top 1: 1; top 2: (1 + .7071) / 2; all: mean
    np.testing.assert_allclose(hard[0], [1.0, (1 + 1 / math.sqrt(2)) / 2, (1 + 0 + 1 / math.sqrt(2) - 1) / 4])
    assert np.isnan(hard[1]).all()  # no embedding, no hardness


def test_hardness_table_names_the_shares():
    B_train = np.eye(3)
    table = hardness.hardness_table(np.array([[1.0, 0.0, 0.0]]), B_train, ["T"])
    assert list(table.columns) == ["hardness_top1pct", "hardness_top5pct", "hardness_top10pct"]
    assert list(table.index) == ["T"]
    np.testing.assert_array_equal(table.to_numpy(), [[1.0, 1.0, 1.0]])  # one neighbour of three at every share


def test_cosine_similarity_and_neighbours():
    sim = hardness.cosine_similarity(np.array([[3.0, 0.0], [0.0, 0.0]]), np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 0.0]]))
    np.testing.assert_allclose(sim, [[1.0, 1 / math.sqrt(2), 1.0], [0.0, 0.0, 0.0]])
    assert hardness.top_neighbours(sim)[0].tolist() == [0, 2, 1]  # ties: the lower index first
    assert hardness.n_neighbours(250, 0.01) == 3 and hardness.n_neighbours(10, 0.01) == 1
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        hardness.n_neighbours(10, 0.0)
