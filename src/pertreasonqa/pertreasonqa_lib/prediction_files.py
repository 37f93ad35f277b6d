"""The task's prediction file: written by methods and controls, read back in the solution's order by metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import anndata as ad
import pandas as pd

from pertreasonqa_lib.answer_parsing import LABELS
from pertreasonqa_lib.path_serialisation import triplets_to_json

#: What a prediction may answer: a label, or ``invalid`` for a response that breaks the format (always wrong).
ANSWERS = (*LABELS, "invalid")


def write_prediction(path: str | Path, test: ad.AnnData, answers: Sequence[str], triplets: Sequence[Sequence[Sequence]],
                     method_id: str, extra: Mapping[str, Sequence[str]] | None = None,
                     uns: Mapping | None = None) -> None:
    """Write a PertReasonQA prediction (``answer``, ``triplets`` JSON per test item) as h5ad.

    Parameters
    ----------
    path
        Output file.
    test
        The test AnnData (its ``obs_names`` and ``uns['dataset_id']`` are used).
    answers
        One of :data:`ANSWERS` per item.
    triplets
        Per item, the mechanism's ``(source, sign, target)`` triplets.
    method_id
        Written to ``uns['method_id']``.
    extra
        Further string columns (``response``, ``parse_error``).
    uns
        Further ``uns`` entries (a language-model method's ``llm_usage``).
    """
    answers = [str(a) for a in answers]
    bad = sorted(set(answers) - set(ANSWERS))
    if bad:
        raise ValueError(f"{path}: answers must be one of {ANSWERS}, got {bad[:3]}")
    if len(answers) != test.n_obs or len(triplets) != test.n_obs:
        raise ValueError(f"{path}: {len(answers)} answers and {len(triplets)} triplet lists for {test.n_obs} test items")
    obs = pd.DataFrame({"answer": answers, "triplets": [triplets_to_json(t) for t in triplets]}, index=test.obs_names.copy())
    for key, values in (extra or {}).items():
        obs[key] = [str(v) for v in values]
    ad.AnnData(obs=obs, uns={"dataset_id": str(test.uns["dataset_id"]), "method_id": method_id, **dict(uns or {})}).write_h5ad(path)


def aligned_prediction(solution_obs: pd.DataFrame, prediction_obs: pd.DataFrame, where: str = "prediction") -> pd.DataFrame:
    """The prediction's rows in the solution's order, answers checked against :data:`ANSWERS`."""
    missing = solution_obs.index.difference(prediction_obs.index)
    if len(missing):
        raise ValueError(f"{where}: no prediction for {len(missing)} items, e.g. {list(missing[:3])}")
    pred = prediction_obs.loc[solution_obs.index].copy()
    pred["answer"] = pred["answer"].astype(str)
    bad = sorted(set(pred["answer"]) - set(ANSWERS))
    if bad:
        raise ValueError(f"{where}: answers must be one of {ANSWERS}, got {bad[:3]}")
    return pred
