"""perturbqa_lib.task_items: binary labels of a subtask, pair and cluster items, training pairs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from perturbqa_lib.task_items import (
    cluster_items,
    cluster_members,
    pair_items,
    subtask_labels,
    training_pairs,
)


def test_subtask_labels():
    responses = pd.Series(["up", "unchanged", "down"])
    mask, y = subtask_labels(responses, "dir")
    assert list(mask) == [True, False, True] and list(y) == [1, 0]
    mask, y = subtask_labels(responses, "de")
    assert mask.all() and list(y) == [1, 0, 1]
    with pytest.raises(ValueError, match="unknown responses"):
        subtask_labels(np.array(["up", "sideways"]), "de")
    with pytest.raises(ValueError, match="no binary labels"):
        subtask_labels(responses, "gse_gene")


def test_training_pairs_keep_the_subtask_pairs():
    train = pd.DataFrame({"pert": ["A", "A", "B"], "gene": ["x", "y", "x"], "response": ["up", "unchanged", "down"]},
                         index=["A:x", "A:y", "B:x"])
    de = training_pairs(train, "de")
    assert de.to_dict("list") == {"pert": ["A", "A", "B"], "gene": ["x", "y", "x"], "label": [1, 0, 1]}
    direction = training_pairs(train, "dir")
    assert direction.to_dict("list") == {"pert": ["A", "B"], "gene": ["x", "x"], "label": [1, 0]}


def test_pair_and_cluster_items():
    items = pair_items(pd.DataFrame({"pert": ["A", "B"], "gene": ["x", "y"]}), "de")
    assert list(items.index) == ["de:A:x", "de:B:y"] and items.index.name == "item"
    assert (items["subtask"] == "de").all() and (items["members"] == "").all()
    with pytest.raises(ValueError, match="not a pair subtask"):
        pair_items(pd.DataFrame({"pert": ["A"], "gene": ["x"]}), "gse_gene")
    clusters = pd.DataFrame({"cluster": [1, 3], "members": [["G1", "G2"], ["G3"]], "annotation": ["a", "b"]})
    items = cluster_items(clusters, "gse_pert")
    assert list(items.index) == ["gse_pert:1", "gse_pert:3"] and list(items["members"]) == ["G1;G2", "G3"]
    assert (items["pert"] == "").all() and (items["gene"] == "").all()
    assert cluster_members(items["members"]) == [["G1", "G2"], ["G3"]]
    with pytest.raises(ValueError, match="not a cluster subtask"):
        cluster_items(clusters, "de")
