"""Tests of biome_bench_lib.similar_items: the texts methods embed and cosine nearest neighbours."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from biome_bench_lib.similar_items import item_texts, nearest_neighbours


def test_nearest_neighbours():
    keys = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    idx, sim = nearest_neighbours(np.array([[0.9, 0.1], [0.0, 2.0]]), keys, k=2)
    assert idx.tolist() == [[0, 2], [1, 2]]
    assert sim[1, 0] == pytest.approx(1.0)


def test_ties_go_to_the_lower_index_and_no_keys_is_an_error():
    idx, _ = nearest_neighbours(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0], [2.0, 0.0], [1.0, 0.0]]), k=5)
    assert idx.tolist() == [[1, 2, 0]]  # k capped at the number of keys
    with pytest.raises(ValueError, match="no keys to search"):
        nearest_neighbours(np.ones((1, 2)), np.empty((0, 2)))


def test_item_texts_leave_out_the_prompt_boilerplate():
    items = pd.DataFrame({
        "task": ["relation", "mechanism"], "source": ["A", ""], "source_state": ["high", ""], "target": ["B", ""],
        "target_state": ["low", ""], "condition": ["in liver", ""], "pathway_name": ["P - Mus musculus", "Q - Mus musculus"],
        "observed_entities": ["", "X (up), Y"],
    })
    assert item_texts(items) == ["A (high) -> B (low); condition: in liver", "Q - Mus musculus. Observed: X (up), Y"]
