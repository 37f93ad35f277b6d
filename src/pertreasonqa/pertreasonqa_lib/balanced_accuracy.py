"""Balanced accuracy of the up/down/unchanged answers, as per-item values (PertReasonQA, Kim et al. 2026, section 2.4)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def balanced_accuracy_items(truth: Sequence[str], predicted: Sequence[str]) -> np.ndarray:
    """Per-item influence values whose mean is the balanced accuracy over the classes in ``truth``.

    Item ``i`` of class ``k`` gets ``BA + N / (K n_k) * (1[correct_i] - recall_k)``: the delta-method
    linearisation of ``BA = (1/K) sum_k recall_k``. Their mean is exactly the balanced accuracy, and a
    bootstrap of their mean has the first-order variance of the balanced accuracy itself (a perfect
    prediction gives every item 1, so its interval is [1, 1]). Single values may leave [0, 1].
    """
    truth = np.asarray(truth, dtype=object)
    correct = (truth == np.asarray(predicted, dtype=object)).astype(float)
    classes, inverse, counts = np.unique(truth, return_inverse=True, return_counts=True)
    recall = np.bincount(inverse, weights=correct, minlength=len(classes)) / counts
    ba = recall.mean()
    return ba + len(truth) / (len(classes) * counts[inverse]) * (correct - recall[inverse])
