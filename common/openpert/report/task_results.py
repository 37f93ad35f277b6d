"""Reading one task's ``results.json`` and answering the questions the pages ask of it.

The schema is documented in ``docs/results_json.md``. Any list or field may be absent in a file
written by an older or partial run; every accessor here falls back to an empty value instead of
failing, so a page can always be rendered. Ranks, tiers, per-metric means and the lead are read
from the file; a file of an older schema is completed by :func:`openpert.results.model.complete`
first, so that it is ranked by the same rule.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from openpert.results.model import (
    SCHEMA_VERSION,
    Lead,
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
        self._overall = {s.get("method_id"): s for s in self._list("overall")}
        # Indexes for the lookups every page makes per method, dataset and metric: scanning the
        # lists instead made rendering grow with the square (and cube) of the number of methods.
        self._methods_by_id = _first_by(self._list("methods"), "id")
        self._metrics_by_id = _first_by(self._list("metrics"), "id")
        self._datasets_by_id = _first_by(self._list("datasets"), "dataset_id")
        self._failures_by_dataset: dict[Any, list[dict[str, Any]]] = {}
        self._metric_failures: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
        self._own_failures: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
        self._metric_failures_by_method: dict[Any, list[dict[str, Any]]] = {}
        for position, f in enumerate(self._list("failures")):
            if _hashable(f.get("dataset_id")):
                self._failures_by_dataset.setdefault(f.get("dataset_id"), []).append(f)
            if f.get("stage") == "metric":
                if _hashable(f.get("method_id")):
                    self._metric_failures_by_method.setdefault(f.get("method_id"), []).append(f)
                if _hashable(f.get("dataset_id")) and _hashable(f.get("method_id")):
                    self._metric_failures.setdefault((f.get("dataset_id"), f.get("method_id")), []).append(f)
                continue
            for key in {v for v in (f.get("method_id"), f.get("component")) if _hashable(v)}:
                self._own_failures.setdefault(key, []).append((position, f))
        self._standings = {s.get("method_id"): _standing(s) for s in self._list("standings") if _hashable(s.get("method_id"))}
        self._method_resources: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
        for position, r in enumerate(self._list("resources")):
            if r.get("stage") != "method":
                continue
            key = r.get("method_id") if r.get("method_id") is not None else ("component", r.get("component"))
            if _hashable(key):
                self._method_resources.setdefault(key, []).append((position, r))

    # -- plain fields ---------------------------------------------------------------------------

    def _list(self, key: str) -> list[dict[str, Any]]:
        value = self.data.get(key)
        return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []

    @property
    def task(self) -> dict[str, Any]:
        """The ``task`` block (empty dict when missing)."""
        task = self.data.get("task")
        return task if isinstance(task, dict) else {}

    @property
    def name(self) -> str:
        """The task's name, falling back to the results folder's name."""
        return str(self.task.get("name") or self.source.name or "task")

    @property
    def label(self) -> str:
        """The task's human-readable label."""
        return str(self.task.get("label") or self.name)

    @property
    def datasets(self) -> list[dict[str, Any]]:
        """Datasets in the order of ``results.json``."""
        return self._list("datasets")

    @property
    def metrics(self) -> list[dict[str, Any]]:
        """Metrics in the order of ``results.json``."""
        return self._list("metrics")

    @property
    def all_methods(self) -> list[dict[str, Any]]:
        """Methods and control methods in the order of ``results.json``."""
        return self._list("methods")

    @property
    def failures(self) -> list[dict[str, Any]]:
        """Every failed job."""
        return self._list("failures")

    @property
    def qc(self) -> list[dict[str, Any]]:
        """Quality-control flags."""
        return self._list("qc")

    @property
    def llm_usage(self) -> list[dict[str, Any]]:
        """What each language-model component asked and got back, per dataset and method."""
        return self._list("llm_usage")

    def abstention_flag(self, dataset_id: str | None, method_id: str | None,
                        flag: str = "llm_abstentions") -> dict[str, Any] | None:
        """The QC flag of a method's answers on a dataset (``llm_judge_abstentions``: a judge's gradings of them)."""
        return next((q for q in self.qc if q.get("flag") == flag and q.get("dataset_id") == dataset_id
                     and q.get("method_id") == method_id), None)

    @property
    def skipped(self) -> list[dict[str, Any]]:
        """Components left out of the run, with the reason."""
        return self._list("skipped")

    @property
    def config_errors(self) -> list[dict[str, Any]]:
        """Components left out because their config could not be used, with the reason."""
        return self._list("config_errors")

    @property
    def resources(self) -> list[dict[str, Any]]:
        """Resource use of every job."""
        return self._list("resources")

    @property
    def provenance(self) -> dict[str, Any]:
        """The optional ``provenance`` block (commit, digests); an empty dict when absent."""
        value = self.data.get("provenance")
        return value if isinstance(value, dict) else {}

    @property
    def gameability(self) -> list[dict[str, Any]]:
        """Rows of the ``gameability`` table (best adversarial scaled score per dataset and metric)."""
        return self._list("gameability")

    @property
    def dynamic_range(self) -> list[dict[str, Any]]:
        """Rows of the ``dynamic_range`` table (ceiling to strongest negative, in standard errors)."""
        return self._list("dynamic_range")

    @property
    def reproduction(self) -> dict[str, Any]:
        """The ``reproduction`` block (published results beside the run's); an empty dict when absent."""
        value = self.data.get("reproduction")
        return value if isinstance(value, dict) else {}

    @property
    def scale(self) -> dict[str, Any]:
        """The ``scale`` block: ``description`` (one sentence) and per-(dataset, metric) ``bounds``."""
        value = self.data.get("scale")
        return value if isinstance(value, dict) else {}

    @property
    def scale_sentence(self) -> str:
        """The scale explained in one sentence."""
        return str(self.scale.get("description") or DEFAULT_SCALE_SENTENCE)

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
        headline = self.data.get("headline_metrics")
        ids = [str(m) for m in headline] if isinstance(headline, list) else [
            str(m.get("id")) for m in self.metrics if self.is_headline(m.get("id"))]
        datasets = [str(d.get("dataset_id")) for d in self.datasets]
        averaged = [m for m in ids if any(self.scalable(d, m) for d in datasets)]
        return averaged, [m for m in ids if m not in averaged]

    def gameable(self, dataset_id: str, metric_id: str) -> dict[str, Any] | None:
        """The gameability row of a dataset and metric when the metric is flagged gameable there."""
        for row in self.gameability:
            if row.get("dataset_id") == dataset_id and row.get("metric_id") == metric_id and row.get("gameable"):
                return row
        return None

    @property
    def statistics(self) -> list[tuple[str, dict[str, Any]]]:
        """Task-specific analyses as ``(key, entry)`` pairs, in file order."""
        stats = self.data.get("statistics")
        if not isinstance(stats, dict):
            return []
        return [(str(k), v) for k, v in stats.items() if isinstance(v, dict)]

    # -- ordering ------------------------------------------------------------------------------

    @property
    def methods(self) -> list[dict[str, Any]]:
        """Methods that rank (methods and baselines), best overall score first (unscored last), then by label."""
        ranked = [m for m in self.all_methods if is_ranked(m)]

        def key(m: dict[str, Any]) -> tuple[int, float, str]:
            score = self.overall(m.get("id")).get("score")
            if isinstance(score, (int, float)):
                return (0, -float(score), _label(m))
            return (1, 0.0, _label(m))

        return sorted(ranked, key=key)

    @property
    def controls(self) -> list[dict[str, Any]]:
        """Controls that do not rank: positive, negative, ceiling, then adversarial controls, each by label."""
        controls = [m for m in self.all_methods if not is_ranked(m)]
        return sorted(controls, key=lambda m: (_CONTROL_ORDER.get(m.get("control"), 3), _label(m)))

    # -- lookups -------------------------------------------------------------------------------

    def standing(self, method_id: str | None) -> Standing | None:
        """A method's per-metric means, headline tests and tier (``standings``), or None."""
        return self._standings.get(method_id) if _hashable(method_id) else None

    @property
    def lead(self) -> Lead | None:
        """The top method against the runner-up (``lead``), or None when no method has an overall score."""
        value = self.data.get("lead")
        return Lead(**value) if isinstance(value, dict) else None

    def headline_tested_pairs(self) -> list[tuple[str, str]]:
        """The (dataset, headline metric) pairs with a test against the best, in page order.

        Every ranked method's standing lists each of them; diagnostic metrics are shown but never
        ranked, so their tests place no method in a tier.
        """
        tests = next((s.tests for s in self._standings.values() if s.tests), [])
        return [(t.dataset_id, t.metric_id) for t in tests]

    def method(self, method_id: str | None) -> dict[str, Any] | None:
        """The method entry with this id, or None."""
        if _hashable(method_id):
            return self._methods_by_id.get(method_id)
        for m in self.all_methods:
            if m.get("id") == method_id:
                return m
        return None

    def method_label(self, method_id: str | None) -> str:
        """The label of a method, its id when it has none."""
        m = self.method(method_id)
        return _label(m) if m else str(method_id)

    def metric(self, metric_id: str | None) -> dict[str, Any] | None:
        """The metric entry with this id, or None."""
        if _hashable(metric_id):
            return self._metrics_by_id.get(metric_id)
        for m in self.metrics:
            if m.get("id") == metric_id:
                return m
        return None

    def dataset_label(self, dataset_id: str | None) -> str:
        """The name of a dataset, its id when it has none."""
        d = self.dataset(dataset_id)
        return str(d.get("dataset_name") or dataset_id) if d else str(dataset_id)

    def dataset(self, dataset_id: str | None) -> dict[str, Any]:
        """The ``datasets`` entry with this id, or an empty dict."""
        if _hashable(dataset_id):
            return self._datasets_by_id.get(dataset_id, {})
        for d in self.datasets:
            if d.get("dataset_id") == dataset_id:
                return d
        return {}

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
        out = []
        for f in self._failures_by_dataset.get(dataset_id, []) if _hashable(dataset_id) else []:
            stage = f.get("stage")
            if stage == "dataset" or (stage != "metric" and f.get("method_id") == method_id):
                out.append(f)
        return out

    def metric_failure(
        self, dataset_id: str, method_id: str, metric_id: str
    ) -> dict[str, Any] | None:
        """The failed metric job that left one (dataset, method, metric) without a score."""
        names = self.metric_components(metric_id)
        key = (dataset_id, method_id)
        for f in self._metric_failures.get(key, []) if _hashable(key) else []:
            if f.get("component") in names:
                return f
        return None

    def scoring_failures(self, method_id: str | None) -> list[dict[str, Any]]:
        """Failed metric jobs that scored a method's predictions, in file order."""
        return list(self._metric_failures_by_method.get(method_id, [])) if _hashable(method_id) else []

    def component_failures(self, component_id: str, *, metric: bool = False) -> list[dict[str, Any]]:
        """Failures of one component's jobs (a method's own jobs, or a metric's jobs)."""
        if metric:
            names = self.metric_components(component_id)
            return [f for f in self.failures if f.get("stage") == "metric" and f.get("component") in names]
        if not _hashable(component_id):
            return []
        return [f for _, f in self._own_failures.get(component_id, [])]

    def method_resources(self, method_id: str) -> list[dict[str, Any]]:
        """Resource rows of a method's own jobs (not the metric jobs scoring it)."""
        if not _hashable(method_id):
            return []
        # A row names the method by method_id, or (a job without one) by its component; in file order.
        rows = self._method_resources.get(method_id, []) + self._method_resources.get(("component", method_id), [])
        return [r for _, r in sorted(rows, key=lambda pair: pair[0])]

    def metric_resources(self, metric_id: str) -> list[dict[str, Any]]:
        """Resource rows of the jobs that computed a metric."""
        names = self.metric_components(metric_id)
        return [
            r
            for r in self.resources
            if r.get("stage") == "metric"
            and (r.get("metric_component") in names or r.get("component") in names)
        ]


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
        When the file is not a JSON object.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
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
    tests = [TestOutcome(**t) for t in entry.get("tests") or [] if isinstance(t, dict)]
    return Standing(**{**entry, "tests": tests})


def _hashable(value: Any) -> bool:
    """Whether a value read from the file can key an index (a hostile file may hold lists as ids)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _first_by(rows: list[dict[str, Any]], field: str) -> dict[Any, dict[str, Any]]:
    """Each value of ``field`` -> the first row holding it (as a scan from the top finds it)."""
    out: dict[Any, dict[str, Any]] = {}
    for row in rows:
        if _hashable(row.get(field)):
            out.setdefault(row.get(field), row)
    return out


def _label(entry: dict[str, Any] | None) -> str:
    if not entry:
        return ""
    return str(entry.get("label") or entry.get("id") or "")
