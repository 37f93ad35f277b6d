"""Reading one task's ``results.json`` and answering the questions the pages ask of it.

The schema is documented in ``docs/results_json.md`` and is :class:`openpert.results.model.Results`.
Ranks, tiers, per-metric means and the lead are read from the file; a file of an older schema, or of
a partial run, is completed by :func:`openpert.results.model.complete` first, so that it is ranked by
the same rule and holds every list and block (empty where the run had none). :func:`load_results`
refuses a file whose lists and blocks are not lists of objects and objects.
"""

from __future__ import annotations

import json
import typing
import warnings
from pathlib import Path
from typing import Any

from openpert.results.model import (
    SCHEMA_VERSION,
    Lead,
    Results,
    ResultsIndex,
    Standing,
    TestOutcome,
    complete,
    is_complete,
    is_ranked,
)

__all__ = ["TaskResults", "control_kind", "find_results_files", "is_control", "is_ranked", "load_results"]

#: The newest ``schema_version`` this renderer knows.
SUPPORTED_SCHEMA_VERSION = SCHEMA_VERSION

#: Order of control kinds in the controls band: the references of the scale first, then the probes.
_CONTROL_ORDER = {"positive": 0, "negative": 1, "ceiling": 2, "adversarial": 3, "baseline": 4}
#: The scale in one sentence, for results files that do not state it.
DEFAULT_SCALE_SENTENCE = (
    "On each dataset and metric, 1 is the positive control's score and 0 the strongest negative control's, "
    "so a method scores above 0 only if it beats every trivial answer."
)


def find_results_files(results_dir: Path) -> list[Path]:
    """Locate the ``results.json`` files a results folder stands for.

    Parameters
    ----------
    results_dir
        A task's results folder, or a folder holding several of them (``results/``).

    Returns
    -------
    list of Path
        ``results_dir/results.json`` when it exists, else the ``results.json`` of every direct
        subfolder, sorted by folder name.

    Raises
    ------
    FileNotFoundError
        When neither exists.
    """
    results_dir = Path(results_dir)
    direct = results_dir / "results.json"
    if direct.is_file():
        return [direct]
    nested = sorted(results_dir.glob("*/results.json"))
    if nested:
        return nested
    raise FileNotFoundError(f"no results.json in {results_dir} or its subfolders")


def is_control(method: dict[str, Any]) -> bool:
    """Tell whether a method entry is a control method (positive, negative or baseline).

    Parameters
    ----------
    method
        An entry of ``methods``.

    Returns
    -------
    bool
        True for control methods.
    """
    return method.get("type") == "control_method" or bool(method.get("control"))


def control_kind(method: dict[str, Any]) -> str | None:
    """Name the kind of control a method is, for badges: ``"positive control"``, ``"baseline"``.

    Parameters
    ----------
    method
        An entry of ``methods``.

    Returns
    -------
    str or None
        None for a method that is not a control.
    """
    if not is_control(method):
        return None
    kind = method.get("control")
    if kind in ("positive", "negative", "adversarial", "ceiling"):
        return f"{kind} control"
    if kind:
        return str(kind)
    return "control"


def _entry(key: str, doc: str) -> Any:
    """A read-only property of one top-level entry of ``results.json`` (``complete`` made sure it is there)."""
    return property(lambda self: self.data[key], doc=doc)


class TaskResults:
    """One task's results with lookups by dataset, method and metric.

    Parameters
    ----------
    data
        The parsed ``results.json``.
    source
        The folder ``results.json`` was read from; paths in the file are relative to it.
    """

    def __init__(self, data: dict[str, Any], source: Path) -> None:
        self.data = data if is_complete(data) else complete(data)
        data = self.data
        self.source = Path(source)
        # The model's lookups (scores, comparisons, the best of each test, the scalable pairs, the headline).
        self._index = ResultsIndex(data)
        self._overall = {s["method_id"]: s for s in data["overall"]}
        # Indexes for the lookups every page makes per method, dataset and metric: scanning the
        # lists instead made rendering grow with the square (and cube) of the number of methods.
        # The first entry of an id wins, as a scan from the top finds it.
        self._methods_by_id = {m.get("id"): m for m in reversed(data["methods"])}
        self._metrics_by_id = {m.get("id"): m for m in reversed(data["metrics"])}
        self._datasets_by_id = {d.get("dataset_id"): d for d in reversed(data["datasets"])}
        self._failures_by_dataset: dict[Any, list[dict[str, Any]]] = {}
        self._metric_failures: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
        self._own_failures: dict[Any, list[dict[str, Any]]] = {}
        self._metric_failures_by_method: dict[Any, list[dict[str, Any]]] = {}
        for f in data["failures"]:
            self._failures_by_dataset.setdefault(f.get("dataset_id"), []).append(f)
            if f.get("stage") == "metric":
                self._metric_failures_by_method.setdefault(f.get("method_id"), []).append(f)
                self._metric_failures.setdefault((f.get("dataset_id"), f.get("method_id")), []).append(f)
                continue
            for key in {f.get("method_id"), f.get("component")} - {None}:
                self._own_failures.setdefault(key, []).append(f)
        self._standings = {s["method_id"]: _standing(s) for s in data["standings"]}
        self._method_resources: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
        for position, r in enumerate(data["resources"]):
            if r.get("stage") == "method":
                key = r.get("method_id") if r.get("method_id") is not None else ("component", r.get("component"))
                self._method_resources.setdefault(key, []).append((position, r))

    # -- plain fields ---------------------------------------------------------------------------

    task = _entry("task", "The ``task`` block.")
    datasets = _entry("datasets", "Datasets in the order of ``results.json``.")
    metrics = _entry("metrics", "Metrics in the order of ``results.json``.")
    all_methods = _entry("methods", "Methods and control methods in the order of ``results.json``.")
    failures = _entry("failures", "Every failed job.")
    qc = _entry("qc", "Quality-control flags.")
    llm_usage = _entry("llm_usage", "What each language-model component asked and got back, per dataset and method.")
    skipped = _entry("skipped", "Components left out of the run, with the reason.")
    config_errors = _entry("config_errors", "Components left out because their config could not be used, with the reason.")
    resources = _entry("resources", "Resource use of every job.")
    provenance = _entry("provenance", "The ``provenance`` block (commit, digests).")
    gameability = _entry("gameability", "Rows of the ``gameability`` table (best adversarial scaled score per dataset and metric).")
    dynamic_range = _entry("dynamic_range",
                           "Rows of the ``dynamic_range`` table (ceiling to strongest negative, in standard errors).")
    scale = _entry("scale", "The ``scale`` block: ``description`` (one sentence) and per-(dataset, metric) ``bounds``.")

    @property
    def name(self) -> str:
        """The task's name, falling back to the results folder's name."""
        return str(self.task.get("name") or self.source.name or "task")

    @property
    def label(self) -> str:
        """The task's human-readable label."""
        return str(self.task.get("label") or self.name)

    @property
    def reproduction(self) -> dict[str, Any]:
        """The ``reproduction`` block (published results beside the run's); an empty dict when absent."""
        return self.data.get("reproduction") or {}

    @property
    def scale_sentence(self) -> str:
        """The scale explained in one sentence."""
        return str(self.scale.get("description") or DEFAULT_SCALE_SENTENCE)

    def abstention_flag(self, dataset_id: str | None, method_id: str | None,
                        flag: str = "llm_abstentions") -> dict[str, Any] | None:
        """The QC flag of a method's answers on a dataset (``llm_judge_abstentions``: a judge's gradings of them)."""
        return next((q for q in self.qc if q.get("flag") == flag and q.get("dataset_id") == dataset_id
                     and q.get("method_id") == method_id), None)

    def is_headline(self, metric_id: str | None) -> bool:
        """Tell whether a metric enters the aggregate scores (every metric does in older files)."""
        return metric_id in self._index.headline

    def headline_coverage(self) -> tuple[list[str], list[str]]:
        """The headline metrics the scores average, and those they cannot (no value on any dataset).

        Returns
        -------
        tuple of list of str
            ``(averaged, missing)`` metric ids: a headline metric is averaged when some method has
            a scaled value of it on some dataset; one that was skipped (a judge metric without a
            language model) or never applies has none and is missing from every score.
        """
        ids = [str(m) for m in self.data["headline_metrics"]]
        datasets = [str(d.get("dataset_id")) for d in self.datasets]
        averaged = [m for m in ids if any(self.scalable(d, m) for d in datasets)]
        return averaged, [m for m in ids if m not in averaged]

    def gameable(self, dataset_id: str, metric_id: str) -> dict[str, Any] | None:
        """The gameability row of a dataset and metric when the metric is flagged gameable there."""
        return next((row for row in self.gameability
                     if row.get("dataset_id") == dataset_id and row.get("metric_id") == metric_id and row.get("gameable")), None)

    @property
    def statistics(self) -> list[tuple[str, dict[str, Any]]]:
        """Task-specific analyses as ``(key, entry)`` pairs, in file order."""
        return [(str(k), v) for k, v in self.data["statistics"].items()]

    # -- ordering ------------------------------------------------------------------------------

    @property
    def methods(self) -> list[dict[str, Any]]:
        """Methods that rank (methods and baselines), best overall score first (unscored last), then by label."""
        ranked = [m for m in self.all_methods if is_ranked(m)]

        def key(m: dict[str, Any]) -> tuple[int, float, str]:
            score = self.overall(m.get("id")).get("score")
            scored = isinstance(score, (int, float))
            return (not scored, -float(score) if scored else 0.0, _label(m))

        return sorted(ranked, key=key)

    @property
    def controls(self) -> list[dict[str, Any]]:
        """Controls that do not rank: positive, negative, ceiling, then adversarial controls, each by label."""
        controls = [m for m in self.all_methods if not is_ranked(m)]
        return sorted(controls, key=lambda m: (_CONTROL_ORDER.get(m.get("control"), 3), _label(m)))

    @property
    def sizes(self) -> list[tuple[str, int]]:
        """How many datasets, methods, controls and metrics the task has, each after its noun."""
        return [("dataset", len(self.datasets)), ("method", len(self.methods)), ("control", len(self.controls)),
                ("metric", len(self.metrics))]

    # -- lookups -------------------------------------------------------------------------------

    def standing(self, method_id: str | None) -> Standing | None:
        """A method's per-metric means, headline tests and tier (``standings``), or None."""
        return self._standings.get(method_id)

    @property
    def lead(self) -> Lead | None:
        """The top method against the runner-up (``lead``), or None when no method has an overall score."""
        return None if self.data["lead"] is None else Lead(**self.data["lead"])

    def headline_tested_pairs(self) -> list[tuple[str, str]]:
        """The (dataset, headline metric) pairs with a test against the best, in page order.

        Every ranked method's standing lists each of them; diagnostic metrics are shown but never
        ranked, so their tests place no method in a tier.
        """
        tests = next((s.tests for s in self._standings.values() if s.tests), [])
        return [(t.dataset_id, t.metric_id) for t in tests]

    def method(self, method_id: str | None) -> dict[str, Any] | None:
        """The method entry with this id, or None."""
        return self._methods_by_id.get(method_id)

    def method_label(self, method_id: str | None) -> str:
        """The label of a method, its id when it has none."""
        m = self.method(method_id)
        return _label(m) if m else str(method_id)

    def metric(self, metric_id: str | None) -> dict[str, Any] | None:
        """The metric entry with this id, or None."""
        return self._metrics_by_id.get(metric_id)

    def dataset_label(self, dataset_id: str | None) -> str:
        """The name of a dataset, its id when it has none."""
        d = self.dataset(dataset_id)
        return str(d.get("dataset_name") or dataset_id) if d else str(dataset_id)

    def dataset(self, dataset_id: str | None) -> dict[str, Any]:
        """The ``datasets`` entry with this id, or an empty dict."""
        return self._datasets_by_id.get(dataset_id, {})

    def metric_label(self, metric_id: str | None) -> str:
        """The label of a metric, its id when it has none."""
        metric = self.metric(metric_id)
        return _label(metric) if metric else str(metric_id)

    def scalable(self, dataset_id: str, metric_id: str) -> bool:
        """Tell whether some method has a scaled value of a metric on a dataset."""
        return (dataset_id, metric_id) in self._index.scalable

    def score(self, dataset_id: str, method_id: str, metric_id: str) -> dict[str, Any] | None:
        """The ``scores`` row of one (dataset, method, metric), or None."""
        return self._index.scores.get((dataset_id, method_id, metric_id))

    def dataset_score(self, dataset_id: str, method_id: str) -> dict[str, Any]:
        """The ``dataset_scores`` row of one (dataset, method), or an empty dict."""
        return self._index.dataset_scores.get((dataset_id, method_id), {})

    def overall(self, method_id: str | None) -> dict[str, Any]:
        """The ``overall`` row of a method, or an empty dict."""
        return self._overall.get(method_id, {})

    def comparison(self, dataset_id: str, metric_id: str, method_id: str) -> dict[str, Any] | None:
        """The permutation test of a method against the best on one (dataset, metric)."""
        return self._index.comparisons.get((dataset_id, metric_id, method_id))

    def best_method_id(self, dataset_id: str, metric_id: str) -> str | None:
        """The best method on one (dataset, metric) according to ``comparisons``."""
        return self._index.best.get((dataset_id, metric_id))

    def metric_components(self, metric_id: str) -> set[str]:
        """Names a metric's jobs may carry in ``failures``/``resources``: component and id."""
        metric = self.metric(metric_id) or {}
        return {str(v) for v in (metric.get("component"), metric_id) if v}

    def method_failures(self, dataset_id: str, method_id: str) -> list[dict[str, Any]]:
        """Failures that kept a method from being scored on a dataset.

        A failed method job, or a failed dataset job (which no method on that dataset survives).
        """
        return [f for f in self._failures_by_dataset.get(dataset_id, [])
                if f.get("stage") == "dataset" or (f.get("stage") != "metric" and f.get("method_id") == method_id)]

    def metric_failure(self, dataset_id: str, method_id: str, metric_id: str) -> dict[str, Any] | None:
        """The failed metric job that left one (dataset, method, metric) without a score."""
        names = self.metric_components(metric_id)
        return next((f for f in self._metric_failures.get((dataset_id, method_id), []) if f.get("component") in names), None)

    def scoring_failures(self, method_id: str | None) -> list[dict[str, Any]]:
        """Failed metric jobs that scored a method's predictions, in file order."""
        return list(self._metric_failures_by_method.get(method_id, []))

    def component_failures(self, component_id: str, *, metric: bool = False) -> list[dict[str, Any]]:
        """Failures of one component's jobs (a method's own jobs, or a metric's jobs)."""
        if metric:
            names = self.metric_components(component_id)
            return [f for f in self.failures if f.get("stage") == "metric" and f.get("component") in names]
        return list(self._own_failures.get(component_id, []))

    def method_resources(self, method_id: str) -> list[dict[str, Any]]:
        """Resource rows of a method's own jobs (not the metric jobs scoring it)."""
        # A row names the method by method_id, or (a job without one) by its component; in file order.
        rows = self._method_resources.get(method_id, []) + self._method_resources.get(("component", method_id), [])
        return [r for _, r in sorted(rows, key=lambda pair: pair[0])]

    def metric_resources(self, metric_id: str) -> list[dict[str, Any]]:
        """Resource rows of the jobs that computed a metric."""
        names = self.metric_components(metric_id)
        return [r for r in self.resources
                if r.get("stage") == "metric" and (r.get("metric_component") in names or r.get("component") in names)]


def load_results(path: Path) -> TaskResults:
    """Read a ``results.json``.

    Parameters
    ----------
    path
        The file, or the folder holding it.

    Returns
    -------
    TaskResults
        The parsed results.

    Raises
    ------
    ValueError
        When the file is not a JSON object, or one of its lists or blocks is not a JSON array of
        objects or an object.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    for name, hint in typing.get_type_hints(Results).items():
        kind, rows = typing.get_origin(hint), (typing.get_args(hint) or [None])[0]
        if name in data and kind in (list, dict) and not (
                isinstance(data[name], kind) and (kind is dict or rows is str or all(isinstance(v, dict) for v in data[name]))):
            raise ValueError(f"{path}: {name} is not a JSON {'array of objects' if kind is list else 'object'}")
    version = data.get("schema_version")
    if isinstance(version, int) and version > SUPPORTED_SCHEMA_VERSION:
        # Newer files are usually a superset; render what is known rather than refuse.
        warnings.warn(
            f"{path}: schema_version {version} is newer than {SUPPORTED_SCHEMA_VERSION}; "
            "fields this renderer does not know are left out",
            stacklevel=2,
        )
    return TaskResults(data, path.parent)


def _standing(entry: dict[str, Any]) -> Standing:
    """A ``standings`` entry as the model's dataclass."""
    return Standing(**{**entry, "tests": [TestOutcome(**t) for t in entry["tests"]]})


def _label(entry: dict[str, Any] | None) -> str:
    if not entry:
        return ""
    return str(entry.get("label") or entry.get("id") or "")
