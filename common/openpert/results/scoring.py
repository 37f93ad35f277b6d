"""Scale raw metric values between controls, aggregate them, and flag what looks wrong.

The scale is strict. For each dataset and metric, 1 is the mean raw value of the positive controls
and 0 the raw value of the *strongest* negative control: the best one in the metric's direction,
after each seeded control has been averaged over its seeds. A metric may declare its *chance*
level, the exact expected value of an answer that carries no information (0.5 for an AUROC); a
seeded negative control then stands at that value, not at the mean of its few draws, so the scale
does not rest on how lucky the draws were. ``scaled = (raw - lo) / (hi - lo)``, so a method scores
above 0 only if it beats every trivial answer. Baselines, adversarial controls and
ceilings are scored on that scale but never set it. Scaled values are kept unclipped; only the
aggregate clips them to [0, 1] before averaging, so that one metric cannot dominate and the raw
picture stays visible. Only headline metrics enter the aggregate; diagnostic metrics are scaled and
shown.

Each row also gets ``scaled_openproblems``, the score under Open Problems' convention (see
:func:`openproblems_scaled`), so that figures can be compared with its published leaderboards.

Two per-metric figures say how much a score can be trusted:

- **gameability** (:func:`gameability_table`): the best scaled score of an adversarial control, an
  answer built to game the metric without modelling the biology. A metric is ``gameable`` on a
  dataset when that exceeds the median scaled score of the real methods and 0 (the strongest
  trivial answer).
- **dynamic range** (:func:`dynamic_range_table`): the distance from the strongest negative control
  to a ceiling control (the best any method can do under the data's own noise), in standard errors
  of the metric.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

#: Share of real methods' scaled values outside [0, 1] above which a metric is flagged.
OUT_OF_RANGE_SHARE = 0.10
#: Dynamic ranges below this many standard errors are flagged as too small to tell methods apart.
SMALL_RANGE_SE = 2.0
#: Roles whose raw values enter Open Problems' min-max scale (its control methods).
OPENPROBLEMS_SCALE_ROLES = ("positive", "negative", "baseline")
#: The scale in one sentence, as results.json and the website state it.
SCALE_SENTENCE = (
    "On each dataset and metric, 1 is the positive control's score (their mean if several) and 0 the score "
    "of the strongest negative control (the best trivial answer; a random control at its exact expectation "
    "where the metric has one, else averaged over its seeds), so a method scores above 0 only if it beats "
    "every trivial answer; baselines, adversarial and ceiling controls are placed on this scale but never set it."
)


@dataclasses.dataclass
class QCFlag:
    """A quality-control finding about the scores of a task."""

    flag: str
    message: str
    dataset_id: str | None = None
    metric_id: str | None = None
    method_id: str | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


#: Status of a method on a dataset whose subtask it does not address (no value on any headline metric).
NOT_APPLICABLE = "not_applicable"


def average_seeds(raw: pd.DataFrame) -> pd.DataFrame:
    """Average raw metric values over the seed replicates of each (dataset, method, metric).

    Parameters
    ----------
    raw
        Long table with columns ``dataset_id, method_id, metric_id, raw`` and optionally ``seed``
        (``None``/NaN for a method run once).

    Returns
    -------
    pandas.DataFrame
        One row per (dataset, method, metric): ``raw`` the mean over seeds (NaN seeds ignored; NaN
        when every seed is NaN), ``n_seeds`` the number of replicates with a value (1 for a method
        run once), ``raw_sd`` their standard deviation (``ddof=1``; NaN with fewer than two) and
        ``raw_seeds`` the per-seed values in seed order (an empty list for an unseeded method).
    """
    keys = ["dataset_id", "method_id", "metric_id"]
    if raw.empty:
        return pd.DataFrame(columns=[*keys, "raw", "n_seeds", "raw_sd", "raw_seeds"])
    frame = raw.copy()
    if "seed" not in frame:
        frame["seed"] = np.nan
    frame["seed"] = pd.to_numeric(frame["seed"], errors="coerce")
    frame = frame.sort_values([*keys, "seed"], kind="stable")
    rows = []
    for key, group in frame.groupby(keys, sort=False):
        values = group["raw"].astype(float)
        seeded = group["seed"].notna().any()
        finite = values.dropna()
        # Several rows without seeds (an engine that did not record them) are replicates all the same.
        replicated = seeded or len(group) > 1
        rows.append((*key, float(finite.mean()) if len(finite) else np.nan, int(len(finite)) if replicated else 1,
                     float(finite.std(ddof=1)) if len(finite) > 1 else np.nan,
                     [float(v) for v in values] if seeded else []))
    return pd.DataFrame(rows, columns=[*keys, "raw", "n_seeds", "raw_sd", "raw_seeds"])


def openproblems_scaled(values: pd.Series, roles: pd.Series, maximize: bool) -> pd.Series:
    """Scaled scores under Open Problems' convention, for one dataset and metric.

    Open Problems (``openproblems-v2``, ``src/common/process_task_results/get_results/script.R``,
    ``scale_scores``) takes the raw values of *all* control methods, ``lo = min`` and ``hi = max``
    of them, and scales ``s = (raw - lo) / (hi - lo)``, flipped to ``1 - s`` for a metric to
    minimise; with fewer than two control values or ``lo == hi`` the score is missing (which its
    aggregate then counts as 0). Its control methods are our positive, negative and baseline
    controls; adversarial and ceiling controls, which it does not have, are left out.

    Parameters
    ----------
    values
        Raw values (seed-averaged) of every method on the dataset and metric.
    roles
        The control role of each row (same index), ``None`` for a method.
    maximize
        Whether higher is better.

    Returns
    -------
    pandas.Series
        Unclipped scaled values (NaN where the convention gives none).
    """
    control = values[roles.isin(OPENPROBLEMS_SCALE_ROLES)].dropna()
    if len(control) < 2:
        return pd.Series(np.nan, index=values.index)
    lo, hi = float(control.min()), float(control.max())
    if lo == hi:
        return pd.Series(np.nan, index=values.index)
    scaled = (values - lo) / (hi - lo)
    return scaled if maximize else 1.0 - scaled


def scale_scores(raw: pd.DataFrame, controls: Mapping[str, str | None], maximize: Mapping[str, bool],
                 chance: Mapping[str, float] | None = None) -> tuple[pd.DataFrame, list[QCFlag]]:
    """Scale raw scores between the positive controls and the strongest negative control.

    Parameters
    ----------
    raw
        Long table with columns ``dataset_id, method_id, metric_id, raw`` (seeded controls already
        averaged over their seeds, see :func:`average_seeds`).
    controls
        Method id -> ``"positive"``, ``"negative"``, ``"baseline"``, ``"adversarial"``,
        ``"ceiling"`` or ``None`` (a method).
    maximize
        Metric id -> whether higher is better: it decides which negative control is the strongest.
    chance
        Metric id -> its exact expected value for an uninformative answer. On these metrics a
        seeded negative control (one with ``raw_seeds``: a random answer) counts at that value
        when the strongest negative control is chosen; its own mean stays in ``raw``.

    Returns
    -------
    scaled
        ``raw`` with the columns ``scaled`` (NaN where scaling is impossible),
        ``scaled_openproblems`` (:func:`openproblems_scaled`), ``scale_hi``, ``scale_lo`` and
        ``scale_lo_method`` (the strongest negative control).
    flags
        QC flags: missing or degenerate controls, a positive control that does not beat the
        strongest negative one, metrics with more than 10% of the real methods' scaled values
        outside [0, 1].
    """
    out = raw.copy()
    for column in ("scaled", "scaled_openproblems", "scale_hi", "scale_lo"):
        out[column] = np.nan
    out["scale_lo_method"] = None
    flags: list[QCFlag] = []
    role = out["method_id"].map(lambda m: controls.get(m))
    for (dataset_id, metric_id), group in out.groupby(["dataset_id", "metric_id"], sort=True):
        roles = role.loc[group.index]
        if group["raw"].isna().all():
            # Every method scored NaN: the metric does not apply to this dataset (e.g. it has no items
            # of the kind the metric scores). Nothing to scale, and nothing is wrong with the controls.
            flags.append(QCFlag("not_applicable", f"{metric_id} has no value on {dataset_id} for any method",
                                dataset_id=dataset_id, metric_id=metric_id))
            continue
        up = bool(maximize.get(metric_id, True))
        out.loc[group.index, "scaled_openproblems"] = openproblems_scaled(group["raw"], roles, up)
        pos = group.loc[roles == "positive", "raw"].dropna()
        neg = group.loc[roles == "negative", "raw"].dropna()
        if pos.empty or neg.empty:
            missing = "positive" if pos.empty else "negative"
            flags.append(QCFlag("missing_control", f"no {missing} control scored on {dataset_id}/{metric_id}: scaled scores are missing",
                                dataset_id=dataset_id, metric_id=metric_id))
            continue
        if chance and metric_id in chance and "raw_seeds" in group:
            # A random control's expectation is known exactly: its mean over a few seeds only estimates it.
            seeded = group.loc[neg.index, "raw_seeds"].map(len) > 0
            neg = neg.where(~seeded, float(chance[metric_id]))
        strongest = neg.idxmax() if up else neg.idxmin()
        hi, lo = float(pos.mean()), float(neg.loc[strongest])
        lo_method = str(out.at[strongest, "method_id"])
        out.loc[group.index, "scale_hi"] = hi
        out.loc[group.index, "scale_lo"] = lo
        out.loc[group.index, "scale_lo_method"] = lo_method
        if np.isclose(hi, lo, rtol=0, atol=1e-12):
            flags.append(QCFlag("degenerate_controls", f"the positive control and the strongest negative control "
                                f"({lo_method}) score the same ({hi:g}) on {dataset_id}/{metric_id}: scaled scores are missing",
                                dataset_id=dataset_id, metric_id=metric_id))
            continue
        out.loc[group.index, "scaled"] = (group["raw"] - lo) / (hi - lo)
        sign = 1.0 if up else -1.0
        worst_pos = pos.idxmin() if up else pos.idxmax()
        if sign * (out.at[worst_pos, "raw"] - lo) < 0:
            flags.append(QCFlag(
                "control_misplaced",
                f"positive control {out.at[worst_pos, 'method_id']} ({out.at[worst_pos, 'raw']:g}) scores worse than "
                f"the strongest negative control {lo_method} ({lo:g}) on {dataset_id}/{metric_id}",
                dataset_id=dataset_id, metric_id=metric_id, method_id=str(out.at[worst_pos, "method_id"]),
            ))
    # Under the strict scale every negative control but the strongest sits below 0 by design, and
    # adversarial controls and ceilings may well leave [0, 1]: only the real methods say whether a
    # metric's controls bracket what methods achieve.
    methods_only = out[role.isna()]
    for metric_id, group in methods_only.groupby("metric_id", sort=True):
        values = group["scaled"].dropna()
        if values.empty:
            continue
        share = float(((values < 0) | (values > 1)).mean())
        if share > OUT_OF_RANGE_SHARE:
            below = float((values < 0).mean())
            flags.append(QCFlag("scaled_out_of_range",
                                f"{share:.0%} of the methods' scaled values of {metric_id} fall outside [0, 1] "
                                f"({below:.0%} below 0: worse than the strongest trivial answer)",
                                metric_id=metric_id))
    return out, flags


def aggregate_scores(scaled: pd.DataFrame, methods: Iterable[str], datasets: Iterable[str],
                     failed: Iterable[tuple[str, str]] = (), headline: Iterable[str] | None = None,
                     not_run: Iterable[tuple[str, str]] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mean scaled score of the headline metrics per method and dataset, and overall.

    Parameters
    ----------
    scaled
        Output of :func:`scale_scores`.
    methods, datasets
        Every method and dataset of the run (a method with no score row on a dataset scores 0).
    failed
        ``(dataset_id, method_id)`` pairs whose method job failed: they score 0 and are marked failed.
    headline
        Metric ids that enter the aggregate; ``None``: every metric. Diagnostic metrics are scaled
        and shown but never averaged in. A method with score rows on a dataset but no raw value on
        any of its scalable headline metrics does not address that dataset: its score there is NaN
        with status :data:`NOT_APPLICABLE`, and its overall score averages the datasets it addresses.
    not_run
        ``(dataset_id, method_id)`` pairs the plan did not cross (a language-model method outside
        ``--llm-datasets``): :data:`NOT_APPLICABLE` as well, never a 0.

    Returns
    -------
    dataset_scores
        Columns ``dataset_id, method_id, score, status``: the mean over headline metrics of the
        scaled values clipped to [0, 1]. Metrics whose scaled value is missing for every method of
        the dataset (no controls) are left out; a metric a method lacks while others have it counts 0.
    overall
        Columns ``method_id, score, status``: the mean over datasets, best first.
    """
    methods, datasets = list(methods), list(datasets)
    failed, not_run = set(failed), set(not_run)
    if headline is not None:
        scaled = scaled[scaled["metric_id"].isin(set(headline))]
    rows = []
    for dataset_id in datasets:
        on_dataset = scaled[scaled["dataset_id"] == dataset_id]
        scalable = sorted(on_dataset.loc[on_dataset["scaled"].notna(), "metric_id"].unique())
        # One pass over the dataset's rows, not one per method: a filter per method made this
        # quadratic in the number of methods.
        by_method = dict(iter(on_dataset.groupby("method_id", sort=False)))
        none = on_dataset.iloc[:0]
        for method_id in methods:
            if (dataset_id, method_id) in failed:
                rows.append((dataset_id, method_id, 0.0, "failed"))
                continue
            if (dataset_id, method_id) in not_run:
                rows.append((dataset_id, method_id, np.nan, NOT_APPLICABLE))
                continue
            if not scalable:
                rows.append((dataset_id, method_id, np.nan, "succeeded"))
                continue
            own_rows = by_method.get(method_id, none)
            mine = own_rows.set_index("metric_id")["scaled"]
            if len(own_rows) and own_rows.loc[own_rows["metric_id"].isin(scalable), "raw"].isna().all():
                # Scored, yet no value on any headline metric: the method does not address this
                # dataset's subtask (gene-set enrichment alone on a direction dataset). It is left
                # out of the dataset's ranking and of its mean, not ranked last with 0.
                rows.append((dataset_id, method_id, np.nan, NOT_APPLICABLE))
                continue
            values = mine.reindex(scalable).fillna(0.0).clip(0.0, 1.0)
            rows.append((dataset_id, method_id, float(values.mean()), "succeeded"))
    dataset_scores = pd.DataFrame(rows, columns=["dataset_id", "method_id", "score", "status"])
    overall = (
        dataset_scores.groupby("method_id", sort=False)
        .agg(score=("score", lambda s: float(s.mean()) if s.notna().any() else np.nan),
             status=("status", lambda s: "failed" if (s == "failed").any() else "succeeded"))
        .reset_index()
    )
    overall = overall.sort_values(["score", "method_id"], ascending=[False, True], na_position="last").reset_index(drop=True)
    return dataset_scores, overall[["method_id", "score", "status"]]


def gameability_table(scaled: pd.DataFrame, controls: Mapping[str, str | None], method_types: Mapping[str, str],
                      headline: Iterable[str] | None = None,
                      targets: Mapping[str, Iterable[str] | None] | None = None) -> list[dict]:
    """How far an answer that games each metric gets, against the real methods.

    For every (dataset, metric) with an adversarial control scored on the strict scale, the
    gameability is the best adversarial scaled score; the metric is ``gameable`` there when it
    exceeds both the median scaled score of the real methods (``type: method``) and 0. An
    adversarial answer at or below 0 does no better than the strongest negative control: the metric
    gives it no credit beyond a trivial answer, so it games nothing, even where the methods score
    below 0 too (that is a weak field, which the out-of-range flag reports). With no real method
    scored, ``gameable`` is ``None`` (nothing to compare with).

    Parameters
    ----------
    scaled
        Output of :func:`scale_scores`.
    controls
        Method id -> control role (``None`` for a method).
    method_types
        Method id -> ``type`` (``method`` or ``control_method``).
    headline
        Headline metric ids (``None``: every metric is headline).
    targets
        Adversarial control id -> the metric ids it is built to game (its ``info.games``; ``None``
        or absent: every metric). A control counts only on its targets: one built to game path
        metrics by copying a training item answers as a label prior does, which games no outcome
        metric.

    Returns
    -------
    list of dict
        One row per (dataset, metric): ``dataset_id, metric_id, headline, adversarial_method_id,
        gameability, method_median, n_methods, gameable``.
    """
    headline_set = None if headline is None else set(headline)
    role = scaled["method_id"].map(lambda m: controls.get(m))
    real = scaled["method_id"].map(lambda m: method_types.get(m) == "method") & role.isna()
    aims = {m: set(games) if games is not None else None for m, games in (targets or {}).items()}
    rows = []
    for (dataset_id, metric_id), group in scaled.groupby(["dataset_id", "metric_id"], sort=True):
        elsewhere = [m for m, games in aims.items() if games is not None and metric_id not in games]
        aimed = ~group["method_id"].isin(elsewhere)
        adversarial = group[(role.loc[group.index] == "adversarial") & group["scaled"].notna() & aimed]
        if adversarial.empty:
            continue
        best = adversarial.loc[adversarial["scaled"].idxmax()]
        methods = group.loc[real.loc[group.index], "scaled"].dropna()
        median = float(methods.median()) if len(methods) else None
        rows.append({
            "dataset_id": dataset_id, "metric_id": metric_id,
            "headline": headline_set is None or metric_id in headline_set,
            "adversarial_method_id": str(best["method_id"]), "gameability": float(best["scaled"]),
            "method_median": median, "n_methods": int(len(methods)),
            "gameable": None if median is None else bool(float(best["scaled"]) > max(median, 0.0)),
        })
    return rows


def gameability_flags(table: Iterable[dict]) -> list[QCFlag]:
    """A ``gameable`` QC flag per (dataset, metric) row of :func:`gameability_table` that is gameable."""
    flags = []
    for row in table:
        if row.get("gameable"):
            kind = "headline" if row.get("headline") else "diagnostic"
            flags.append(QCFlag(
                "gameable",
                f"{row['adversarial_method_id']} (adversarial) scales to {row['gameability']:.3g} on "
                f"{row['dataset_id']}/{row['metric_id']}, above the median method ({row['method_median']:.3g}): "
                f"this {kind} metric rewards an answer that does not model the biology",
                dataset_id=row["dataset_id"], metric_id=row["metric_id"], method_id=row["adversarial_method_id"],
            ))
    return flags


def dynamic_range_table(averaged: pd.DataFrame, scaled: pd.DataFrame, controls: Mapping[str, str | None],
                        maximize: Mapping[str, bool],
                        item_se: Mapping[tuple[str, str], tuple[float, str]]) -> list[dict]:
    """Distance from the strongest negative control to the ceiling, in standard errors of the metric.

    For every (dataset, metric) with a ceiling control, ``range = sign * (ceiling - negative)`` in
    raw units (``sign`` makes it positive when the ceiling is better; the mean of several ceilings),
    and ``range_se = range / se``.

    Parameters
    ----------
    averaged
        Seed-averaged raw values (:func:`average_seeds`): ``raw_sd`` and ``n_seeds`` are the fallback
        for a metric without per-item values.
    scaled
        Output of :func:`scale_scores` (for the strongest negative control and its raw value).
    controls
        Method id -> control role.
    maximize
        Metric id -> whether higher is better.
    item_se
        ``(dataset, metric)`` -> ``(se, source)``: the bootstrap standard error of the metric's
        ceiling-minus-negative difference, computed by the caller from per-item values where they
        exist (:func:`openpert.results.collect.range_standard_errors`).

    Returns
    -------
    list of dict
        ``dataset_id, metric_id, ceiling_method_id, ceiling_raw, negative_method_id, negative_raw,
        range, se, se_source, range_se, small, reason``. ``se`` comes from per-item values
        (``se_source`` ``bootstrap``), else from the seed standard deviation of the strongest
        negative control (``seed_sd``); when neither exists ``range_se`` is ``None`` and ``reason``
        says why. ``small`` is true when ``range_se < 2``.
    """
    role = scaled["method_id"].map(lambda m: controls.get(m))
    sd = averaged.set_index(["dataset_id", "method_id", "metric_id"])["raw_sd"] if len(averaged) else pd.Series(dtype=float)
    rows = []
    for (dataset_id, metric_id), group in scaled.groupby(["dataset_id", "metric_id"], sort=True):
        ceiling = group[(role.loc[group.index] == "ceiling") & group["raw"].notna()]
        if ceiling.empty:
            continue
        negative = group["scale_lo_method"].dropna()
        row = {"dataset_id": dataset_id, "metric_id": metric_id,
               "ceiling_method_id": ",".join(sorted(ceiling["method_id"].astype(str))),
               "ceiling_raw": float(ceiling["raw"].mean()), "negative_method_id": None, "negative_raw": None,
               "range": None, "se": None, "se_source": None, "range_se": None, "small": None, "reason": ""}
        if negative.empty:
            row["reason"] = "no negative control scored"
            rows.append(row)
            continue
        neg_id = str(negative.iloc[0])
        neg_raw = float(group["scale_lo"].dropna().iloc[0])
        sign = 1.0 if maximize.get(metric_id, True) else -1.0
        span = sign * (row["ceiling_raw"] - neg_raw)
        row.update(negative_method_id=neg_id, negative_raw=neg_raw, range=span)
        se, source = item_se.get((dataset_id, metric_id), (math.nan, ""))
        if not (isinstance(se, float) and math.isfinite(se) and se > 0):
            seed_sd = sd.get((dataset_id, neg_id, metric_id), math.nan)
            if isinstance(seed_sd, float) and math.isfinite(seed_sd) and seed_sd > 0:
                se, source = float(seed_sd), "seed_sd"
            else:
                row["reason"] = ("no per-item values of this metric and no seed replicates of "
                                 f"{neg_id}: its standard error is unknown")
                rows.append(row)
                continue
        row.update(se=float(se), se_source=source, range_se=span / float(se), small=bool(span / float(se) < SMALL_RANGE_SE))
        rows.append(row)
    return rows


def dynamic_range_flags(table: Iterable[dict]) -> list[QCFlag]:
    """A ``small_dynamic_range`` QC flag per row of :func:`dynamic_range_table` below two standard errors."""
    flags = []
    for row in table:
        if row.get("small"):
            flags.append(QCFlag(
                "small_dynamic_range",
                f"the ceiling ({row['ceiling_method_id']}) is only {row['range_se']:.2g} standard errors "
                f"({row['se_source']}) above the strongest negative control ({row['negative_method_id']}) on "
                f"{row['dataset_id']}/{row['metric_id']}: the metric can barely tell methods apart",
                dataset_id=row["dataset_id"], metric_id=row["metric_id"]))
    return flags
