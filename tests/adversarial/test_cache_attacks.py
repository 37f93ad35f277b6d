"""Tamper with the cache and the published outputs between two runs (attack class 7).

After a clean run, an attacker with write access to the results folder (or a job that escaped)
edits a cached prediction in place (the negative control's, replaced by the positive control's
perfect one), truncates a cached score (group_mean's), and edits a published prediction in
``outputs/`` (train_mean's). ``--resume`` must notice the first two (their SHA-256 no longer
matches the record), run those jobs again, republish every output from the cache, and give scores
equal to the clean run's. None of this depends on the sandbox.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
from adversarial.hostile import assert_honest_unchanged, prediction_layer, raw_scores


def _cached(out, component, method=None):
    """The cached output file of a job (by component, and method for a metric job)."""
    for record in (out / "work").glob("*/*/record.json"):
        data = json.loads(record.read_text())
        if data["component"] == component and (method is None or data.get("method_id") == method):
            return next(iter(data["outputs"].values()))
    raise AssertionError(f"no cache entry of {component} {method or ''}")


def test_tampered_cache_is_not_trusted(resumable_run, clean):
    out = resumable_run.out  # the clean run's results folder (a resume puts it back after the test)
    truth_pred = _cached(out, "truth")
    zeros_pred = _cached(out, "zeros")
    shutil.copyfile(truth_pred, zeros_pred)  # edit a cached prediction in place
    score = _cached(out, "errors", "group_mean")
    with open(score, "r+b") as fh:  # truncate a cached score
        fh.truncate(100)
    published = out / "outputs" / "syn" / "train_mean" / "prediction.h5ad"
    shutil.copyfile(truth_pred, published)  # edit outputs/

    second = resumable_run.resume(progress=False, jobs=2)
    assert_honest_unchanged(second, clean)
    assert raw_scores(second, ("zeros",)) != raw_scores(second, ("truth",))
    assert np.all(prediction_layer(out / "outputs" / "syn" / "zeros" / "prediction.h5ad") == 0)
    assert not np.allclose(prediction_layer(published), prediction_layer(out / "outputs" / "syn" / "truth" / "prediction.h5ad"))
    assert second["failures"] == []
