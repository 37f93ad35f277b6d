"""Task A scores: accuracy and macro-F1 of extracted relations, and percentile bootstrap intervals of the macro-F1s.

Both are computed from confusion counts over the 18 relations plus one column for unparseable
answers, so that an answer naming no label is a false negative of its gold class and a false
positive of none (paper section 3.4.1). The bootstrap resamples items and recomputes the counts of
every replicate at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from biome_bench_lib.vocabulary import RELATION_INDEX, RELATIONS

__all__ = ["relation_scores", "macro_f1_bootstrap_ci"]


def _label_codes(labels: Sequence[str | None]) -> np.ndarray:
    """Label -> index in :data:`RELATIONS`; ``None`` or an unknown label -> ``len(RELATIONS)``."""
    return np.fromiter((RELATION_INDEX.get(x, len(RELATIONS)) if isinstance(x, str) else len(RELATIONS) for x in labels),
                       dtype=np.int64, count=len(labels))


def _f1_from_confusion(conf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-class F1 and gold support from confusion counts ``(..., K, K + 1)`` (last column: unparseable)."""
    k = conf.shape[-2]
    tp = np.diagonal(conf[..., :k], axis1=-2, axis2=-1)
    support = conf.sum(axis=-1)                      # gold count per class
    predicted = conf[..., :k].sum(axis=-2)           # valid predictions per class
    fp, fn = predicted - tp, support - tp
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), 0.0)
    return f1, support


def relation_scores(gold: Sequence[str], predicted: Sequence[str | None]) -> dict[str, Any]:
    """Accuracy and macro-F1 of relation predictions (section 3.4.1).

    An unparseable prediction (``None``) is wrong: a false negative of its gold class and a false
    positive of no class.

    Parameters
    ----------
    gold
        Gold labels (each in :data:`RELATIONS`).
    predicted
        Extracted labels (:func:`extract_relation`), ``None`` when unparseable.

    Returns
    -------
    dict
        ``accuracy``; ``macro_f1`` (mean F1 over the classes with gold support); ``macro_f1_all``
        (mean over all 18 classes, a class without support and without predictions scoring 0);
        ``correct`` (per-item 0/1 array); ``per_class_f1`` and ``support`` (dicts); ``n_items``,
        ``n_unparseable``.
    """
    g, p = _label_codes(gold), _label_codes(predicted)
    if len(g) != len(p):
        raise ValueError(f"{len(g)} gold labels but {len(p)} predictions")
    if (g == len(RELATIONS)).any():
        bad = [x for x in gold if x not in RELATION_INDEX][:3]
        raise ValueError(f"gold labels outside the vocabulary: {bad}")
    k = len(RELATIONS)
    conf = np.bincount(g * (k + 1) + p, minlength=k * (k + 1)).reshape(k, k + 1)
    f1, support = _f1_from_confusion(conf)
    correct = (g == p).astype(float)
    present = support > 0
    return {
        "accuracy": float(correct.mean()) if len(g) else float("nan"),
        "macro_f1": float(f1[present].mean()) if present.any() else float("nan"),
        "macro_f1_all": float(f1.mean()) if len(g) else float("nan"),
        "correct": correct,
        "per_class_f1": dict(zip(RELATIONS, f1.tolist())),
        "support": dict(zip(RELATIONS, support.tolist())),
        "n_items": int(len(g)),
        "n_unparseable": int((p == k).sum()),
    }


def macro_f1_bootstrap_ci(gold: Sequence[str], predicted: Sequence[str | None], *, n_boot: int = 1000, alpha: float = 0.05,
                          seed: int = 0) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap intervals of both macro-F1s, resampling items.

    The draws are those of the harness's per-item bootstrap (``rng.integers(0, n, size=(n_boot,
    n))`` from ``default_rng(seed)``), so an interval here matches one the harness would compute
    from the same seed; in each replicate the classes "with gold support" are those present in the
    resample.

    Parameters
    ----------
    gold
        Gold labels (each in :data:`~biome_bench_lib.vocabulary.RELATIONS`).
    predicted
        Extracted labels, ``None`` when unparseable.
    n_boot
        Bootstrap resamples.
    alpha
        The intervals cover ``1 - alpha``.
    seed
        Seed of the resampling.

    Returns
    -------
    dict
        ``{"macro_f1": (low, high), "macro_f1_all": (low, high)}``; NaN without items.
    """
    g, p = _label_codes(gold), _label_codes(predicted)
    n, k = len(g), len(RELATIONS)
    if n == 0:
        return {"macro_f1": (float("nan"),) * 2, "macro_f1_all": (float("nan"),) * 2}
    rng = np.random.default_rng(seed)
    pair = g * (k + 1) + p
    stats_present, stats_all = [], []
    block = max(1, (1 << 22) // n)
    for start in range(0, n_boot, block):
        rows = min(block, n_boot - start)
        idx = rng.integers(0, n, size=(rows, n))
        offsets = (np.arange(rows) * k * (k + 1))[:, None]
        conf = np.bincount((pair[idx] + offsets).ravel(), minlength=rows * k * (k + 1)).reshape(rows, k, k + 1)
        f1, support = _f1_from_confusion(conf)
        present = support > 0
        stats_present.append((f1 * present).sum(axis=1) / present.sum(axis=1))
        stats_all.append(f1.mean(axis=1))
    out = {}
    for name, values in (("macro_f1", np.concatenate(stats_present)), ("macro_f1_all", np.concatenate(stats_all))):
        low, high = np.percentile(values, [100 * alpha / 2, 100 * (1 - alpha / 2)])
        out[name] = (float(low), float(high))
    return out
