"""The results model: ranks, tiers, per-metric means and the lead of a task's run, and the schema of ``results.json``.

Every rank, tier, mean and lead that the website, the CSV downloads, ``openpert compare`` and the
pull-request summary show is computed here, once, by :func:`complete`, and stored in
``results.json``; the readers look them up. The rank rule is stated once, in :data:`RANK_RULE`.
``results.json`` is the serialisation of :class:`Results`; :func:`json_schema` derives its JSON
Schema from these dataclasses (published as ``docs/results_schema.json``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Union

from openpert.config.viash import UNRANKED_ROLES
from openpert.results.scoring import NOT_APPLICABLE

#: The version of ``results.json`` this model writes: 2 adds ``standings`` and ``lead`` and the one rank rule.
SCHEMA_VERSION = 2

#: The rank rule of every leaderboard, stated once.
RANK_RULE = (
    "Methods and baselines are ranked by score, higher first, with competition ranks: tied scores share "
    "a rank and the next rank skips (1, 1, 3). A method without a score (it does not address the "
    "dataset's subtask, or no metric of the dataset could be scaled) is unranked (null), never ranked "
    "last. A method whose job failed on a dataset scores 0 there and is ranked with that score. "
    "Positive, negative, ceiling and adversarial controls set or probe the scale and are never ranked."
)

#: Outcomes of one method on one tested (dataset, metric), from ``comparisons``.
BEST, TIED, WORSE, MISSING, UNTESTED = "best", "tied", "worse", "missing", "untested"

#: Tiers of the overview, in display order: key, heading, what puts a method there.
TIERS: tuple[tuple[str, str, str], ...] = (
    ("top", "Indistinguishable from the best",
     "on every tested dataset and metric, the best method or not significantly different from it"),
    ("some", "Behind the best on some tests",
     "significantly worse than the best (p < 0.05), or without a value, on some tested datasets and metrics"),
    ("all", "Behind the best on every test",
     "significantly worse than the best (p < 0.05), or without a value, on every tested dataset and metric"),
    ("untested", "Not tested",
     "no paired test against the best was possible"),
)


# -- the rows of results.json -------------------------------------------------------------------


@dataclasses.dataclass
class ScoreRow:
    """One (dataset, method, metric): the raw value, its scaled score and its bootstrap interval."""

    dataset_id: str
    method_id: str
    metric_id: str
    raw: float | None
    scaled: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n_items: int | None = None
    n_seeds: int | None = None
    headline: bool | None = None


@dataclasses.dataclass
class DatasetScore:
    """One method's score on one dataset (mean over headline metrics) and its rank there (:data:`RANK_RULE`)."""

    dataset_id: str
    method_id: str
    score: float | None
    status: str
    rank: int | None = None


@dataclasses.dataclass
class OverallScore:
    """One method's overall score (mean over datasets) and its rank in the task (:data:`RANK_RULE`)."""

    method_id: str
    score: float | None
    status: str
    rank: int | None = None


@dataclasses.dataclass
class Comparison:
    """The paired permutation test of one method against the best on one (dataset, metric)."""

    dataset_id: str
    metric_id: str
    method_id: str
    best_method_id: str | None
    mean_difference: float | None
    p_value: float | None
    significant: bool | None


@dataclasses.dataclass
class TestOutcome:
    """How one method fared in the permutation test against the best on one (dataset, metric)."""

    dataset_id: str
    metric_id: str
    #: :data:`BEST`, :data:`TIED`, :data:`WORSE`, :data:`MISSING` (no value) or :data:`UNTESTED`.
    outcome: str
    best_method_id: str | None = None
    p_value: float | None = None
    mean_difference: float | None = None

    @property
    def in_top_group(self) -> bool:
        """True when the method is the best or not significantly different from it."""
        return self.outcome in (BEST, TIED)


@dataclasses.dataclass
class Standing:
    """One method's place in the task: per-metric means, its headline tests, their count and its tier."""

    method_id: str
    #: metric_id -> mean over datasets of the clipped scaled score (None when never scored).
    metric_scores: dict[str, float | None]
    #: metric_id -> datasets on which the method's value of the metric is missing by a failure.
    metric_failed: dict[str, list[str]]
    #: The headline tests (empty for controls and for a task without tests).
    tests: list[TestOutcome]
    #: A key of :data:`TIERS`; None for unranked controls and for a task without tests.
    tier: str | None
    #: Tests in which the method is the best or not significantly different from it.
    top_group: int
    #: Tests that count for the method (untested ones left out).
    n_tests: int


@dataclasses.dataclass
class Lead:
    """The top method of a task against the runner-up, for the front page."""

    top_method_id: str
    top_score: float
    runner_up_method_id: str | None
    #: Overall score of the top method minus the runner-up's (None without a scored runner-up).
    margin: float | None
    #: Headline tests in which the runner-up is significantly worse than the top method.
    significant: int
    #: Headline tests comparing the two (the top method was the best and the runner-up had a test).
    compared: int


Block = dict[str, Any]


@dataclasses.dataclass
class Results:
    """A task's ``results.json``; the blocks described in ``docs/results_json.md`` are kept as they are written."""

    schema_version: int
    openpert_version: str
    created: str
    engine: str
    provenance: Block
    task: Block
    datasets: list[Block]
    methods: list[Block]
    metrics: list[Block]
    headline_metrics: list[str]
    diagnostic_metrics: list[str]
    scale: Block
    scores: list[ScoreRow]
    gameability: list[Block]
    dynamic_range: list[Block]
    dataset_scores: list[DatasetScore]
    overall: list[OverallScore]
    comparisons: list[Comparison]
    failures: list[Block]
    qc: list[Block]
    llm_usage: list[Block]
    llm_abstention_threshold: float
    skipped: list[Block]
    config_errors: list[Block]
    resources: list[Block]
    statistics: Block
    standings: list[Standing]
    lead: Lead | None
    rank_rule: str


# -- the one rank rule --------------------------------------------------------------------------


def is_ranked(method: Mapping[str, Any]) -> bool:
    """Tell whether a ``methods`` entry competes in the rankings: a method, or a baseline control."""
    return method.get("control") not in UNRANKED_ROLES


def competition_ranks(scores: Sequence[float | None]) -> list[int | None]:
    """Rank scores, higher first, ties sharing a rank ("1, 1, 3"); a missing score stays unranked.

    Parameters
    ----------
    scores
        One score per method; None (or NaN) for a method without a score.

    Returns
    -------
    list of int or None
        The rank of each score, in input order (:data:`RANK_RULE`).
    """
    known = [s if _finite(s) else None for s in scores]
    present = sorted((s for s in known if s is not None), reverse=True)
    first: dict[float, int] = {}
    for i, s in enumerate(present):
        first.setdefault(s, i + 1)
    return [None if s is None else first[s] for s in known]


def _rank_rows(rows: list[dict[str, Any]], ranked: set[str]) -> None:
    """Set ``rank`` of each row in place: competition ranks among ranked methods with a score."""
    competing = [r for r in rows if r.get("method_id") in ranked and r.get("status") != NOT_APPLICABLE]
    for r in rows:
        r["rank"] = None
    for r, rank in zip(competing, competition_ranks([r.get("score") for r in competing])):
        r["rank"] = rank


# -- tests, tiers, means and the lead ----------------------------------------------------------


class ResultsIndex:
    """Lookups over a completed results dict's rows by dataset, method and metric (for the model and the report)."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.datasets = [str(d.get("dataset_id")) for d in data["datasets"]]
        self.metrics = data["metrics"]
        self.headline = {str(m) for m in data["headline_metrics"]}
        self.scores = {(s.get("dataset_id"), s.get("method_id"), s.get("metric_id")): s for s in data["scores"]}
        self.dataset_scores = {(s.get("dataset_id"), s.get("method_id")): s for s in data["dataset_scores"]}
        self.scalable = {(s.get("dataset_id"), s.get("metric_id")) for s in data["scores"] if _finite(s.get("scaled"))}
        self.comparisons = {(c.get("dataset_id"), c.get("metric_id"), c.get("method_id")): c
                            for c in data["comparisons"]}
        self.best: dict[tuple[str, str], str] = {}
        for c in data["comparisons"]:
            if c.get("best_method_id"):
                self.best.setdefault((c.get("dataset_id"), c.get("metric_id")), c["best_method_id"])
        names = {str(m.get("id")): {str(v) for v in (m.get("component"), m.get("id")) if v} for m in self.metrics}
        self.metric_failed = {(f.get("dataset_id"), f.get("method_id"), metric_id)
                              for f in data["failures"] if f.get("stage") == "metric"
                              for metric_id, components in names.items() if f.get("component") in components}
        # The tested (dataset, metric) pairs that place a method in a tier: headline metrics, in page order.
        self.tested = [(d, str(m.get("id"))) for d in self.datasets for m in self.metrics
                       if (d, m.get("id")) in self.best and str(m.get("id")) in self.headline]

    def status(self, dataset_id: Any, method_id: Any) -> str | None:
        """``dataset_scores.status`` of a method on a dataset (None without a row)."""
        return (self.dataset_scores.get((dataset_id, method_id)) or {}).get("status")


def method_tests(index: ResultsIndex, method_id: str) -> list[TestOutcome]:
    """A method's outcome in every headline permutation test against the best, in page order.

    A method without a value where others were tested is :data:`MISSING` (it failed, or does not
    address that metric); one with a value but no comparison (a control) is :data:`UNTESTED`, as is
    one on a dataset whose subtask it does not address.
    """
    out = []
    for dataset_id, metric_id in index.tested:
        best = index.best.get((dataset_id, metric_id))
        score = index.scores.get((dataset_id, method_id, metric_id))
        comparison = index.comparisons.get((dataset_id, metric_id, method_id)) or {}
        if index.status(dataset_id, method_id) == NOT_APPLICABLE:
            outcome = UNTESTED
        elif not score or score.get("raw") is None:
            outcome = MISSING
        elif best == method_id:
            outcome = BEST
        elif comparison:
            significant = comparison.get("significant")
            if not isinstance(significant, bool):
                p = comparison.get("p_value")
                significant = isinstance(p, (int, float)) and p < 0.05
            outcome = WORSE if significant else TIED
        else:
            outcome = UNTESTED
        out.append(TestOutcome(dataset_id, metric_id, outcome, best, comparison.get("p_value"),
                               comparison.get("mean_difference")))
    return out


def tier_of(tests: Sequence[TestOutcome]) -> str:
    """The tier of a method from its test outcomes (a key of :data:`TIERS`).

    ``"top"`` when it is in the top group (best or p >= 0.05) of every tested pair, ``"all"`` when
    of none, ``"some"`` in between, ``"untested"`` without any test.
    """
    counted = [t for t in tests if t.outcome != UNTESTED]
    if not counted:
        return "untested"
    top = sum(t.in_top_group for t in counted)
    if top == len(counted):
        return "top"
    return "all" if top == 0 else "some"


def _standing(index: ResultsIndex, method: Mapping[str, Any]) -> Standing:
    """A method's per-metric means, tests and tier.

    A metric's score is the mean over datasets of its scaled value clipped to [0, 1], over the
    datasets where the metric has scaled values at all, a failed job counting 0; a dataset where the
    method has neither a value nor a failure (it does not address the metric) is left out, and a
    metric the method never addresses has no score (None), not 0.
    """
    mid = str(method.get("id"))
    means: dict[str, float | None] = {}
    failed: dict[str, list[str]] = {}
    for metric in index.metrics:
        metric_id = str(metric.get("id"))
        values: list[float] = []
        failed[metric_id] = []
        for did in index.datasets:
            if (did, metric_id) not in index.scalable:
                continue
            scaled = (index.scores.get((did, mid, metric_id)) or {}).get("scaled")
            failed_here = index.status(did, mid) == "failed" or (did, mid, metric_id) in index.metric_failed
            if failed_here:
                failed[metric_id].append(did)
            if _finite(scaled):
                values.append(min(1.0, max(0.0, float(scaled))))
            elif failed_here:
                values.append(0.0)
        means[metric_id] = sum(values) / len(values) if values else None
    ranked = is_ranked(method)
    tests = method_tests(index, mid) if ranked and index.tested else []
    counted = [t for t in tests if t.outcome != UNTESTED]
    return Standing(mid, means, failed, tests, tier_of(tests) if ranked and index.tested else None,
                    sum(t.in_top_group for t in counted), len(counted))


def _lead(index: ResultsIndex, data: Mapping[str, Any], standings: Mapping[str, Standing]) -> Lead | None:
    """The top method, its margin over the next and how many headline tests separate them.

    On each (dataset, metric) where the top method is the best, the runner-up's test against it
    counts; significant at p < 0.05, unadjusted.
    """
    labels = {str(m.get("id")): str(m.get("label") or m.get("id")) for m in data["methods"]}
    ranked = sorted((o for o in data["overall"] if o.get("rank") is not None and _finite(o.get("score"))),
                    key=lambda o: (o["rank"], labels.get(str(o.get("method_id")), "")))
    if not ranked:
        return None
    top = ranked[0]
    if len(ranked) == 1:
        return Lead(str(top["method_id"]), float(top["score"]), None, None, 0, 0)
    runner = ranked[1]
    tests = [t for t in standings[str(runner["method_id"])].tests
             if t.best_method_id == top["method_id"] and t.outcome in (TIED, WORSE)]
    return Lead(str(top["method_id"]), float(top["score"]), str(runner["method_id"]),
                float(top["score"]) - float(runner["score"]), sum(t.outcome == WORSE for t in tests), len(tests))


def complete(data: Mapping[str, Any]) -> dict[str, Any]:
    """Ranks, standings and the lead of a results dict, under :data:`RANK_RULE`.

    The run's results are completed here when written; a file of an older schema (whose ranks
    followed another rule, and which has no standings) is completed the same way when read, so
    every reader sees the same numbers.

    Parameters
    ----------
    data
        A results dict with ``methods``, ``metrics``, ``datasets``, ``scores``, ``dataset_scores``,
        ``overall``, ``comparisons`` and ``failures`` (missing lists count as empty).

    Returns
    -------
    dict
        A copy with ``rank`` set in ``dataset_scores`` and ``overall``, and ``standings``, ``lead``,
        ``rank_rule`` and ``schema_version`` set. Each list or block of :class:`Results` that an older
        or partial file leaves out is there, empty; ``headline_metrics`` of a file that predates it
        lists every metric not marked ``headline: false``.
    """
    out = dict(data)
    out.setdefault("headline_metrics", [str(m.get("id")) for m in out.setdefault("metrics", []) if m.get("headline", True) is not False])
    for name, hint in typing.get_type_hints(Results).items():
        if typing.get_origin(hint) in (list, dict):
            out.setdefault(name, typing.get_origin(hint)())
    methods = out["methods"]
    ranked = {str(m.get("id")) for m in methods if is_ranked(m)}
    overall = [dict(o) for o in out["overall"]]
    _rank_rows(overall, ranked)
    dataset_scores = [dict(s) for s in out["dataset_scores"]]
    by_dataset: dict[Any, list[dict[str, Any]]] = {}
    for s in dataset_scores:
        by_dataset.setdefault(s.get("dataset_id"), []).append(s)
    for rows in by_dataset.values():
        _rank_rows(rows, ranked)
    out.update(overall=overall, dataset_scores=dataset_scores)
    index = ResultsIndex(out)
    standings = {str(m.get("id")): _standing(index, m) for m in methods}
    lead = _lead(index, out, standings)
    out.update(standings=[dataclasses.asdict(s) for s in standings.values()],
               lead=None if lead is None else dataclasses.asdict(lead), rank_rule=RANK_RULE,
               schema_version=max(SCHEMA_VERSION, int(data.get("schema_version") or 0)))
    return out


def is_complete(data: Mapping[str, Any]) -> bool:
    """Tell whether a results dict already holds this model's ranks, standings and lead, and every list and block."""
    version = data.get("schema_version")
    return (isinstance(version, int) and version >= SCHEMA_VERSION and isinstance(data.get("standings"), list)
            and all(name in data for name, hint in typing.get_type_hints(Results).items()
                    if typing.get_origin(hint) in (list, dict)))


# -- the JSON Schema ------------------------------------------------------------------------------


def json_schema() -> dict[str, Any]:
    """The JSON Schema of ``results.json``, derived from :class:`Results` and its row types.

    Row objects admit fields beyond those the model names (a run records provenance and seeds per
    row); the fields named are required with their types.
    """
    definitions: dict[str, Any] = {}
    _schema_of(Results, definitions)
    body = definitions.pop(Results.__name__)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "openpert results.json",
            **body, "description": RANK_RULE, "$defs": definitions}


def write_json_schema(path: Path) -> Path:
    """Write :func:`json_schema` to ``path`` (``docs/results_schema.json``) and return the path."""
    path = Path(path)
    path.write_text(json.dumps(json_schema(), indent=2) + "\n", encoding="utf-8")
    return path


def _schema_of(tp: Any, definitions: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a type hint; dataclasses go to ``definitions`` and are referenced."""
    if dataclasses.is_dataclass(tp):
        name = tp.__name__
        if name not in definitions:
            definitions[name] = {}  # a placeholder against recursion
            hints = typing.get_type_hints(tp)
            fields = dataclasses.fields(tp)
            definitions[name] = {
                "type": "object", "description": (tp.__doc__ or "").strip().splitlines()[0],
                "properties": {f.name: _schema_of(hints[f.name], definitions) for f in fields},
                "required": [f.name for f in fields], "additionalProperties": True,
            }
        return {"$ref": f"#/$defs/{name}"}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        options = [_schema_of(a, definitions) for a in args]
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin is list:
        return {"type": "array", "items": _schema_of(args[0], definitions)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema_of(args[1], definitions)}
    simple = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    if tp in simple:
        return {"type": simple[tp]}
    if tp is Any:
        return {}
    raise TypeError(f"no JSON Schema for the type {tp!r}")


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
