"""Balanced accuracy as per-item influence values (section 2.4).
"""

from __future__ import annotations

import numpy as np
import pytest
from pertreasonqa_lib.balanced_accuracy import balanced_accuracy_items


def test_balanced_accuracy_items_mean():
    truth = ["up", "up", "up", "down", "unchanged", "unchanged"]
    pred = ["up", "down", "up", "down", "up", "unchanged"]
    per_item = balanced_accuracy_items(truth, pred)
    # recalls: up 2/3, down 1, unchanged 1/2 -> (2/3 + 1 + 1/2) / 3
    assert per_item.mean() == pytest.approx((2 / 3 + 1 + 0.5) / 3)
    from sklearn.metrics import balanced_accuracy_score
    assert per_item.mean() == pytest.approx(balanced_accuracy_score(truth, pred))
    assert np.allclose(balanced_accuracy_items(truth, truth), 1.0)  # perfect: no spread, CI [1, 1]
    # influence values BA + N / (K n_k) (correct - recall_k): up n=3 recall 2/3, down n=1 recall 1,
    # unchanged n=2 recall 1/2
    ba = (2 / 3 + 1 + 0.5) / 3
    expected = [ba + 2 / 9, ba - 4 / 9, ba + 2 / 9, ba, ba - 0.5, ba + 0.5]
    assert np.allclose(per_item, expected)
