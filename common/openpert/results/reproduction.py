"""The papers' published numbers beside the benchmark's own: the Reproduction section of ``results.json``.

A task declares the published results it can be compared with in ``api/published_results.yaml``
(the format: ``docs/reproduction.md``): for each *source* (a paper's table or figure, or a
published file read by a reader of the task's library), how its datasets, methods and metrics map
to the benchmark's ids, and the published values with their spread. :func:`reproduction_section`
turns a run's ``results.json`` and those declarations into one row per published value:

* ``reproduced``: the measured value lies within the published value's tolerance (its spread,
  plus half a unit of the last printed digit, plus the source's declared ``tolerance``), and,
  when the source gives per-item values and the run's score files are at hand, so does every
  item, on the same items;
* ``differs``: beyond it; the row carries the declared causes (``note``: the value's and the
  dataset's; ``method_differences``: how the benchmark's method differs from the published one),
  or counts among ``unexplained_differences``;
* ``not_run``: the benchmark has no counterpart, or this run did not include the dataset or the
  method (the reason: declared, or the run's skip, failure or config error);
* ``reported``: a value shown as the paper reports it and never compared (a language-model
  method whose model this run cannot have used), with the reason.

The section depends only on ``results.json``, the declarations, the published files and, for
per-item comparisons, the run folder's score files (``docs/plan_json.md``: ``outputs/<dataset>/
<method>[@seed<k>]/<metric component>/``), so an old run's section can be computed again
(:func:`amend_results`, which ``openpert report`` uses).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from openpert.config.viash import ConfigError, load_yaml
from openpert.files import hash_file
from openpert.results.item_scores import item_mean
from openpert.results.scoring import QCFlag
from openpert.run.task_code import call_task_function

#: The declarations' file name, in a task's ``api/`` folder.
DECLARATIONS_NAME = "published_results.yaml"
#: Row statuses, in the order the website counts them.
STATUSES = ("reproduced", "differs", "not_run", "reported")
#: Items listed by name when a run's and a source's item sets differ (the rest are counted).
MAX_LISTED_ITEMS = 10
#: Slack on top of a tolerance for floating-point representation (0.55 - 0.53 > 0.02 in binary).
_FLOAT_SLACK = 1e-9
_PLUS_MINUS = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+))\s*(?:±|\+/-|\+-)\s*(\d+\.?\d*|\.\d+)\s*$")
_FUNCTION = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_SOURCE_KEYS = {"id", "label", "citation", "doi", "where", "spread", "decimals", "tolerance", "file", "reader", "args",
                "metric", "datasets", "methods", "metrics", "values", "unmapped_method"}
_METHOD_KEYS = {"method_id", "reported", "not_run", "differences"}
_DATASET_KEYS = {"dataset_id", "not_run", "note"}
_VALUE_KEYS = {"value", "spread", "note"}
_FILE_KEYS = {"path", "source", "sha256"}

DESCRIPTION = (
    "Published results beside the benchmark's own on the same data. A measured value reproduces the "
    "published one when it lies within its tolerance: the published spread (where the source gives one), "
    "half a unit of the last printed digit, and any tolerance the source declares; per-item values, "
    "where published, must agree item by item on the same items."
)


@dataclass(frozen=True)
class DatasetMap:
    """A published dataset and the benchmark dataset it is (``None``: none).

    ``not_run`` says why a run may not have it; ``note`` is a cause shared by the differences of
    every value on it (e.g. a metric averaging few entities there).
    """

    published: str
    dataset_id: str | None
    not_run: str = ""
    note: str = ""


@dataclass(frozen=True)
class MethodMap:
    """A published method and its benchmark counterpart.

    ``reported`` (a reason) shows the published value without comparing it; ``not_run`` (a reason)
    says why the benchmark has no counterpart; ``differences`` says how the counterpart differs
    from the published method, the cause shown where their values differ.
    """

    published: str
    method_id: str | None
    reported: str = ""
    not_run: str = ""
    differences: str = ""


@dataclass(frozen=True)
class PublishedFile:
    """A published file a reader reads: its path in the data folder, origin and checksum."""

    path: str
    source: str = ""
    sha256: str | None = None


@dataclass(frozen=True)
class PublishedValue:
    """One published number: of a method on a dataset and metric (published names), with its spread.

    ``items`` holds per-item values (item id in the benchmark's naming -> value) when the source
    publishes them; ``value`` is then their mean.
    """

    dataset: str
    method: str
    metric: str
    value: float | None
    spread: float | None = None
    note: str = ""
    items: Mapping[str, float] | None = None
    n: int | None = None


@dataclass(frozen=True)
class Source:
    """A paper's table or figure, or a published file, and how it maps onto the benchmark."""

    id: str
    label: str
    citation: str = ""
    doi: str = ""
    where: str = ""
    spread: str = ""
    decimals: int | None = None
    tolerance: float = 0.0
    file: PublishedFile | None = None
    reader: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    datasets: dict[str, DatasetMap] = field(default_factory=dict)
    methods: dict[str, MethodMap] = field(default_factory=dict)
    metrics: dict[str, str] = field(default_factory=dict)
    values: tuple[PublishedValue, ...] = ()
    unmapped_method: str = ""

    def tolerance_of(self, spread: float | None) -> float:
        """The largest difference that still reproduces a value of this source with ``spread``."""
        rounding = 0.5 * 10.0 ** -self.decimals if self.decimals is not None else 0.0
        return (spread or 0.0) + rounding + self.tolerance


def parse_value(value: Any, where: str) -> tuple[float | None, float | None, str]:
    """A declared value: a number, ``"0.55 ± .02"``, or ``{value, spread, note}``.

    Returns
    -------
    value, spread, note
        ``spread`` is ``None`` when none is given; ``value`` ``None`` for an explicit ``null``.

    Raises
    ------
    ConfigError
        Naming ``where``, when the value is none of these.
    """
    note = ""
    spread = None
    if isinstance(value, dict):
        unknown = set(value) - _VALUE_KEYS
        if unknown or "value" not in value:
            raise ConfigError(f"{where}: a value mapping has keys value, spread and note, got {sorted(value)}")
        note = str(value.get("note") or "")
        spread = value.get("spread")
        value = value["value"]
        if spread is not None and (not _is_number(spread) or float(spread) < 0):
            raise ConfigError(f"{where}: spread must be a non-negative number, got {spread!r}")
        spread = None if spread is None else float(spread)
    if isinstance(value, str):
        match = _PLUS_MINUS.match(value)
        if not match or spread is not None:
            raise ConfigError(f"{where}: expected a number or 'value ± spread', got {value!r}")
        return float(match.group(1)), float(match.group(2)), note
    if value is None:
        return None, spread, note
    if not _is_number(value):
        raise ConfigError(f"{where}: expected a number or 'value ± spread', got {value!r}")
    return float(value), spread, note


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))


def _text(entry: dict, key: str, where: str) -> str:
    value = entry.get(key)
    if value is None:
        return ""
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ConfigError(f"{where}: {key} must be text, got {value!r}")
    return str(value).strip()


def _dataset_map(published: str, spec: Any, where: str) -> DatasetMap:
    if spec is None or isinstance(spec, str):
        return DatasetMap(published, spec)
    if not isinstance(spec, dict) or set(spec) - _DATASET_KEYS or "dataset_id" not in spec:
        raise ConfigError(f"{where}: datasets.{published}: a benchmark dataset id, or a mapping of dataset_id, "
                          f"not_run and note, got {spec!r}")
    dataset_id = spec.get("dataset_id")
    if dataset_id is not None and not isinstance(dataset_id, str):
        raise ConfigError(f"{where}: datasets.{published}: dataset_id must be text or null")
    return DatasetMap(published, dataset_id, _text(spec, "not_run", where), _text(spec, "note", where))


def _method_map(published: str, spec: Any, where: str) -> MethodMap:
    if spec is None or isinstance(spec, str):
        if spec is None:
            raise ConfigError(f"{where}: methods.{published}: a method without counterpart needs not_run: <reason>")
        return MethodMap(published, spec)
    if not isinstance(spec, dict) or set(spec) - _METHOD_KEYS:
        raise ConfigError(f"{where}: methods.{published}: keys are {sorted(_METHOD_KEYS)}, got {spec!r}")
    method_id = spec.get("method_id")
    if method_id is not None and not isinstance(method_id, str):
        raise ConfigError(f"{where}: methods.{published}: method_id must be text or null")
    out = MethodMap(published, method_id, _text(spec, "reported", where), _text(spec, "not_run", where),
                    _text(spec, "differences", where))
    if out.method_id is None and not (out.not_run or out.reported):
        raise ConfigError(f"{where}: methods.{published}: no method_id, so not_run (or reported) must say why")
    if out.method_id is not None and out.not_run:
        raise ConfigError(f"{where}: methods.{published}: not_run is for a method without counterpart (method_id null)")
    return out


def _source(entry: Any, where: str) -> Source:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: each source is a mapping, got {entry!r}")
    unknown = set(entry) - _SOURCE_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(_SOURCE_KEYS)})")
    sid = entry.get("id")
    if not isinstance(sid, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", sid):
        raise ConfigError(f"{where}: id must be a word of letters, digits, '_', '.', '-', got {sid!r}")
    where = f"{where} {sid}"
    label = _text(entry, "label", where)
    if not label:
        raise ConfigError(f"{where}: label is required (e.g. 'PerturbQA, Table 1')")
    decimals = entry.get("decimals")
    if decimals is not None and (not isinstance(decimals, int) or isinstance(decimals, bool) or decimals < 0):
        raise ConfigError(f"{where}: decimals must be a non-negative integer, got {decimals!r}")
    tolerance = entry.get("tolerance", 0.0)
    if not _is_number(tolerance) or float(tolerance) < 0:
        raise ConfigError(f"{where}: tolerance must be a non-negative number, got {tolerance!r}")
    datasets = entry.get("datasets") or {}
    methods = entry.get("methods") or {}
    metrics = entry.get("metrics") or {}
    for key, value in (("datasets", datasets), ("methods", methods), ("metrics", metrics)):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: {key} must map published names to benchmark ids")
    if any(not isinstance(v, str) for v in metrics.values()):
        raise ConfigError(f"{where}: metrics must map each published metric to a benchmark metric id")
    file_spec, reader = entry.get("file"), entry.get("reader")
    published_file = None
    if file_spec is not None:
        if not isinstance(file_spec, dict) or set(file_spec) - _FILE_KEYS or not isinstance(file_spec.get("path"), str):
            raise ConfigError(f"{where}: file is a mapping of path (in the data folder), source and sha256")
        path = file_spec["path"]
        if path.startswith("/") or ".." in Path(path).parts:
            raise ConfigError(f"{where}: file.path must be relative to the data folder, without '..', got {path!r}")
        sha256 = file_spec.get("sha256")
        if sha256 is not None and (not isinstance(sha256, str) or not re.fullmatch(r"[0-9a-f]{64}", sha256)):
            raise ConfigError(f"{where}: file.sha256 must be 64 lower-case hex digits (quoted), got {sha256!r}")
        published_file = PublishedFile(path, _text(file_spec, "source", where), sha256)
    if (reader is None) != (published_file is None):
        raise ConfigError(f"{where}: a reader and a file go together (a reader reads the file)")
    if reader is not None and (not isinstance(reader, str) or not _FUNCTION.fullmatch(reader)):
        raise ConfigError(f"{where}: reader must be 'module:function' of the task's library, got {reader!r}")
    args = entry.get("args") or {}
    if not isinstance(args, dict):
        raise ConfigError(f"{where}: args must be a mapping of the reader's keyword arguments")
    values = _inline_values(entry, where)
    if reader is not None and values:
        raise ConfigError(f"{where}: values are either declared or read from the file, not both")
    if reader is None and not values:
        raise ConfigError(f"{where}: no values: declare them, or a file and its reader")
    return Source(
        id=sid, label=label, citation=_text(entry, "citation", where), doi=_text(entry, "doi", where),
        where=_text(entry, "where", where), spread=_text(entry, "spread", where), decimals=decimals,
        tolerance=float(tolerance), file=published_file, reader=reader, args=dict(args),
        datasets={str(k): _dataset_map(str(k), v, where) for k, v in datasets.items()},
        methods={str(k): _method_map(str(k), v, where) for k, v in methods.items()},
        metrics={str(k): v for k, v in metrics.items()}, values=tuple(values),
        unmapped_method=_text(entry, "unmapped_method", where),
    )


def _inline_values(entry: dict, where: str) -> list[PublishedValue]:
    """``values: {method: {dataset: value}}`` of one metric (``metric:``), or ``{metric: {method: {...}}}``."""
    spec = entry.get("values")
    if spec is None:
        return []
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: values must map methods to {{dataset: value}}")
    metric = entry.get("metric")
    by_metric = {str(metric): spec} if metric is not None else spec
    out = []
    for metric_name, by_method in by_metric.items():
        if not isinstance(by_method, dict):
            raise ConfigError(f"{where}: values of {metric_name}: expected {{method: {{dataset: value}}}}")
        for method, by_dataset in by_method.items():
            if not isinstance(by_dataset, dict):
                raise ConfigError(f"{where}: values.{method}: expected {{dataset: value}}, got {by_dataset!r}")
            for dataset, raw in by_dataset.items():
                value, spread, note = parse_value(raw, f"{where}: values.{method}.{dataset}")
                out.append(PublishedValue(str(dataset), str(method), str(metric_name), value, spread, note))
    return out


def load_declarations(task_dir: str | Path) -> list[Source]:
    """The sources a task declares in ``api/published_results.yaml`` (none without the file).

    Raises
    ------
    ConfigError
        Naming the file and the entry, when a declaration is malformed.
    """
    path = Path(task_dir) / "api" / DECLARATIONS_NAME
    if not path.is_file():
        return []
    data = load_yaml(path) or {}
    if not isinstance(data, dict) or set(data) - {"sources"} or not isinstance(data.get("sources"), list):
        raise ConfigError(f"{path}: expected a mapping with a list 'sources'")
    sources = [_source(entry, f"{path}: sources[{i}]") for i, entry in enumerate(data["sources"])]
    ids = [s.id for s in sources]
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    if duplicated:
        raise ConfigError(f"{path}: source ids used twice: {', '.join(duplicated)}")
    return sources


def declaration_problems(task_dir: str | Path, *, method_ids: set[str], metric_ids: set[str],
                         dataset_ids: set[str]) -> list[str]:
    """What a task's declarations name that the task does not have.

    A mapped method must be a component of the task and a mapped metric one of its metrics; a
    mapped dataset is one of its ``info.datasets`` ids, or says (``not_run``) why a run may not
    have it (a dataset made by hand, e.g. from files a user downloads).
    """
    path = Path(task_dir) / "api" / DECLARATIONS_NAME
    try:
        sources = load_declarations(task_dir)
    except ConfigError as err:
        return [str(err)]
    problems = []
    for s in sources:
        for m in s.methods.values():
            if m.method_id is not None and m.method_id not in method_ids:
                problems.append(f"{path}: {s.id}: method {m.published!r} maps to {m.method_id!r}, no component of the task")
        for published, metric_id in s.metrics.items():
            if metric_id not in metric_ids:
                problems.append(f"{path}: {s.id}: metric {published!r} maps to {metric_id!r}, no metric of the task")
        for d in s.datasets.values():
            if d.dataset_id is not None and d.dataset_id not in dataset_ids and not d.not_run:
                problems.append(f"{path}: {s.id}: dataset {d.published!r} maps to {d.dataset_id!r}, no info.datasets id "
                                "of the task; say with not_run how a run gets it")
        for v in s.values:
            if v.dataset not in s.datasets:
                problems.append(f"{path}: {s.id}: values name the dataset {v.dataset!r}, which datasets does not map")
            if v.method not in s.methods:
                problems.append(f"{path}: {s.id}: values name the method {v.method!r}, which methods does not map")
            if v.metric not in s.metrics:
                problems.append(f"{path}: {s.id}: values name the metric {v.metric!r}, which metrics does not map")
    return list(dict.fromkeys(problems))


def published_values(source: Source, task_dir: str | Path, data_dir: str | Path | None) -> tuple[list[PublishedValue], str]:
    """The values of a source: declared, or read from its file by its reader.

    Parameters
    ----------
    source
        A declared source.
    task_dir
        The task's folder: its library is imported from there, by a child process.
    data_dir
        The folder holding published files at their paths (the shared data folder or the data store).

    Returns
    -------
    values, problem
        ``problem`` is empty, or says why no value could be read (the file is missing, its checksum
        differs, the reader failed); the values are then empty.
    """
    if source.reader is None:
        return list(source.values), ""
    assert source.file is not None
    if data_dir is None:
        return [], f"{source.file.path}: no data folder (the shared data folder or `openpert data fetch`'s store)"
    path = Path(data_dir) / source.file.path
    if not path.is_file():
        return [], f"{source.file.path}: not found in {data_dir}"
    if source.file.sha256 and hash_file(path) != source.file.sha256:
        return [], f"{path}: sha256 differs from the declared {source.file.sha256}: not the published file"
    try:
        # The task's reader runs in a child process (openpert.run.task_code): its failure (its import
        # included) or timeout is a RuntimeError with its last error line.
        records = call_task_function(Path(task_dir).resolve(), *source.reader.split(":"), [path], source.args)
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise RuntimeError("it returned something other than records (mappings)")
        values = [_record(r, source.reader) for r in records]
    except (RuntimeError, ValueError, TypeError) as err:  # a task's reader: its failure costs this source only, and says why
        return [], f"{source.reader} could not read {path}: {err}"
    return values, ""


def _record(record: Mapping[str, Any], reader: str) -> PublishedValue:
    missing = {"dataset", "method", "metric", "value"} - set(record)
    if missing:
        raise ValueError(f"{reader} returned a record without {sorted(missing)}: {dict(record)!r}")
    value = record["value"]
    items = record.get("items")
    return PublishedValue(
        dataset=str(record["dataset"]), method=str(record["method"]), metric=str(record["metric"]),
        value=None if value is None or not math.isfinite(float(value)) else float(value),
        spread=None if record.get("spread") is None else float(record["spread"]), note=str(record.get("note") or ""),
        items=None if items is None else {str(k): float(v) for k, v in dict(items).items()},
        n=None if record.get("n") is None else int(record["n"]),
    )


class RunItems:
    """Per-item metric values of a run folder's score files (``docs/plan_json.md``'s layout).

    A seeded method's values are averaged over its seeds item by item, as ``results.json``'s are.
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        plan_path = self.run_dir / "plan.json"
        self.plan = json.loads(plan_path.read_text()) if plan_path.is_file() else None

    def values(self, dataset_id: str, method_id: str, metric_id: str) -> pd.Series | None:
        """The per-item values of a metric, indexed by item id; ``None`` when no score file has them."""
        if self.plan is None:
            return None
        # Score files are components' outputs: read as the results read them, within their limits.
        from openpert.results.collect import read_score

        method = next((m for m in self.plan.get("methods", []) if m.get("id") == method_id), None)
        if method is None:
            return None
        from openpert.engines.plan import replicate_name

        runs = [replicate_name(method_id, seed) for seed in method.get("seeds") or [None]]
        series = []
        for run in runs:
            for metric in self.plan.get("metrics", []):
                names = list((metric.get("output_names") or {}).values())
                if not names:
                    continue
                path = self.run_dir / "outputs" / dataset_id / run / metric["id"] / names[0]
                if not path.is_file():
                    continue
                _, obs, _ = read_score(path)
                if obs is not None and metric_id in obs.columns:
                    values = obs[metric_id].astype(float)
                    values.index = values.index.astype(str)
                    series.append(values)
                    break
        if not series:
            return None
        return item_mean(series)


def compare_items(published: Mapping[str, float], measured: pd.Series, tolerance: float) -> dict[str, Any]:
    """Item-by-item agreement of published and measured values, on the source's items.

    The source's items are its test set: each must be among the run's (``missing`` lists those
    that are not) and agree within ``tolerance``; an item undefined on both sides (NaN, e.g. a
    correlation of a constant change) agrees, undefined on one side only it disagrees. Items the
    run scores beyond the source's (``extra``: e.g. perturbations a paper left out of its figures)
    are counted, and leave the agreement alone. ``measured_mean`` is the run's mean over the
    source's items (undefined values left out), the number to set beside the published mean.
    """
    ours = {str(k): float(v) for k, v in measured.items()}
    missing = sorted(set(published) - set(ours))
    extra = sorted(set(ours) - set(published))
    matched = sorted(set(published) & set(ours))
    a = np.array([published[k] for k in matched], dtype=float)
    b = np.array([ours[k] for k in matched], dtype=float)
    both_undefined = np.isnan(a) & np.isnan(b)
    defined = ~np.isnan(a) & ~np.isnan(b)
    diff = np.abs(a - b)
    within = both_undefined | (defined & (diff <= tolerance + _FLOAT_SLACK))
    worst = float(diff[defined].max()) if defined.any() else None
    ours_defined = b[~np.isnan(b)]
    return {
        "n_published": len(published), "n_measured": len(ours), "n_matched": len(matched),
        "n_within": int(within.sum()), "n_undefined_one_side": int((np.isnan(a) ^ np.isnan(b)).sum()),
        "max_abs_difference": worst,
        "measured_mean": float(ours_defined.mean()) if ours_defined.size else None,
        "missing": missing[:MAX_LISTED_ITEMS], "n_missing": len(missing),
        "extra": extra[:MAX_LISTED_ITEMS], "n_extra": len(extra),
        "agree": not missing and bool(within.all()),
    }


def _made_here(dataset: dict) -> bool:
    return bool(dataset.get("made_by") or dataset.get("source_files"))


def _run_context(results: dict) -> dict[str, Any]:
    scores = {(s.get("dataset_id"), s.get("method_id"), s.get("metric_id")): s for s in results.get("scores") or []}
    return {
        # A published number is compared only on a dataset this run's loader made from the public
        # data (``made_by``; runs written before it list their ``source_files``), never on a
        # ready-made one such as the bundled test resources.
        "datasets": {d.get("dataset_id") for d in results.get("datasets") or [] if _made_here(d)},
        "ready_made": {d.get("dataset_id") for d in results.get("datasets") or [] if not _made_here(d)},
        "methods": {m.get("id") for m in results.get("methods") or []},
        "metrics": {m.get("id") for m in results.get("metrics") or []},
        "scores": scores,
        "skipped": {s.get("id"): s.get("reason") for s in results.get("skipped") or []},
        "config_errors": {e.get("component"): e.get("reason") for e in results.get("config_errors") or []},
        "failures": results.get("failures") or [],
        # The model this run's language-model components asked (None: no model was configured).
        "llm": (results.get("provenance") or {}).get("llm"),
    }


def _other_model_values(ctx: dict, method_id: str, metric_id: str | None) -> dict[str, Any] | None:
    """What this run measured for a method whose published value is another model's, if it ran.

    A reported value is a language model the benchmark cannot be; when the run asked a model of its
    own (a small one that checks the path, say), its values of the same metric are shown beside the
    paper's, named as another model's and never compared.
    """
    if not ctx["llm"] or metric_id is None:
        return None
    values = [{"dataset_id": d, "measured": float(s["raw"])} for (d, m, k), s in sorted(ctx["scores"].items(), key=str)
              if m == method_id and k == metric_id and s.get("raw") is not None]
    if not values:
        return None
    return {"model": ctx["llm"].get("model"), "max_tokens": ctx["llm"].get("max_tokens"), "values": values}


def _absence(ctx: dict, dataset_id: str, method_id: str, metric_id: str) -> str:
    """Why a run has no value of a metric for a method on a dataset."""
    if method_id in ctx["skipped"]:
        return f"{method_id} was skipped by this run: {ctx['skipped'][method_id]}"
    if method_id in ctx["config_errors"]:
        return f"{method_id} was left out for a config error: {ctx['config_errors'][method_id]}"
    if method_id not in ctx["methods"]:
        return f"{method_id} is not in this run"
    for f in ctx["failures"]:
        if f.get("dataset_id") == dataset_id and f.get("method_id") == method_id:
            return f"{method_id} failed on {dataset_id}: {f.get('reason') or 'exit ' + str(f.get('exit_code'))}"
    if metric_id not in ctx["metrics"]:
        return f"the metric {metric_id} is not in this run"
    return f"{method_id} has no value of {metric_id} on {dataset_id}"


def compare_value(source: Source, value: PublishedValue, ctx: dict,
                  items: Callable[[str, str, str], pd.Series | None] | None = None) -> dict[str, Any]:
    """One row of the section: a published value beside the run's measurement of it."""
    dmap = source.datasets.get(value.dataset)
    mmap = source.methods.get(value.method)
    metric_id = source.metrics.get(value.metric)
    row: dict[str, Any] = {
        "source_id": source.id, "published_dataset": value.dataset, "published_method": value.method,
        "published_metric": value.metric, "dataset_id": dmap.dataset_id if dmap else None,
        "method_id": mmap.method_id if mmap else None, "metric_id": metric_id,
        "published": value.value, "spread": value.spread, "tolerance": None, "n_published": value.n,
        "measured": None, "ci_low": None, "ci_high": None, "n_seeds": None, "raw_sd": None,
        "difference": None, "within_spread": None, "within_ci": None, "status": "not_run", "reason": "",
        "note": " ".join(t for t in (value.note, dmap.note if dmap else "") if t),
        "method_differences": mmap.differences if mmap else "", "items": None, "other_model": None,
    }

    def not_run(reason: str) -> dict[str, Any]:
        row["reason"] = reason
        return row

    if mmap is None:
        return not_run(source.unmapped_method or "no counterpart of this method in the benchmark")
    if mmap.reported:
        row["status"], row["reason"] = "reported", mmap.reported
        if mmap.method_id is not None:
            row["other_model"] = _other_model_values(ctx, mmap.method_id, metric_id)
        return row
    if mmap.method_id is None:
        return not_run(mmap.not_run)
    if dmap is None or dmap.dataset_id is None:
        return not_run((dmap.not_run if dmap else "") or "no counterpart of this dataset in the benchmark")
    if metric_id is None:
        return not_run(f"no counterpart of the metric {value.metric!r} in the benchmark")
    if value.value is None:
        return not_run("the source gives no value")
    if dmap.dataset_id in ctx["ready_made"]:
        return not_run(f"this run's {dmap.dataset_id} is a ready-made dataset (--input, e.g. the bundled test "
                       "resources), not the one the task's loader makes from the public data")
    if dmap.dataset_id not in ctx["datasets"]:
        return not_run(dmap.not_run or f"the dataset {dmap.dataset_id} is not in this run")
    score = ctx["scores"].get((dmap.dataset_id, mmap.method_id, metric_id))
    if score is None or score.get("raw") is None:
        return not_run(_absence(ctx, dmap.dataset_id, mmap.method_id, metric_id))
    tolerance = source.tolerance_of(value.spread)
    measured = float(score["raw"])
    difference = measured - value.value
    ok = abs(difference) <= tolerance + _FLOAT_SLACK
    row.update(measured=measured, ci_low=score.get("ci_low"), ci_high=score.get("ci_high"), n_seeds=score.get("n_seeds"),
               raw_sd=score.get("raw_sd"), difference=difference, tolerance=tolerance,
               within_spread=ok if value.spread is not None else None)
    if score.get("ci_low") is not None and score.get("ci_high") is not None:
        # The run's own uncertainty over its items (e.g. downstream genes), which a paper's spread over runs leaves out.
        row["within_ci"] = bool(score["ci_low"] - _FLOAT_SLACK <= value.value <= score["ci_high"] + _FLOAT_SLACK)
    if value.items is not None:
        per_item = items(dmap.dataset_id, mmap.method_id, metric_id) if items is not None else None
        if per_item is None:
            row["items"] = {"available": False, "n_published": len(value.items),
                            "reason": "the run's per-item values are not at hand (its score files are not beside "
                                      "results.json): compared on the means, over the run's items and the source's"}
        else:
            # On the source's own items: the run's mean over them is the measurement to compare.
            row["items"] = {"available": True, **compare_items(value.items, per_item, tolerance)}
            row["measured_run"] = measured
            row["ci_low"] = row["ci_high"] = row["within_ci"] = None  # the run's interval is of its own items
            mean = row["items"]["measured_mean"]
            row["measured"] = mean
            row["difference"] = None if mean is None else mean - value.value
            ok = mean is not None and abs(row["difference"]) <= tolerance + _FLOAT_SLACK and row["items"]["agree"]
            row["within_spread"] = ok if value.spread is not None else None
    row["status"] = "reproduced" if ok else "differs"
    return row


def reproduction_section(results: dict, task_dir: str | Path, *, run_dir: str | Path | None = None,
                         data_dir: str | Path | None = None) -> dict[str, Any] | None:
    """The ``reproduction`` entry of a run's ``results.json``; ``None`` for a task that declares nothing.

    Parameters
    ----------
    results
        The run's ``results.json`` content.
    task_dir
        The task's folder (``api/published_results.yaml``, its library for readers).
    run_dir
        The run folder, for per-item comparisons (its ``plan.json`` and ``outputs/``); optional.
    data_dir
        The folder holding the published files of sources read from a file; optional (their rows are
        then missing and the source says why).

    Raises
    ------
    ConfigError
        When the declarations are malformed.
    """
    sources = load_declarations(task_dir)
    if not sources:
        return None
    ctx = _run_context(results)
    items = RunItems(run_dir).values if run_dir is not None else None
    rows, source_rows = [], []
    for source in sources:
        values, problem = published_values(source, task_dir, data_dir)
        dataset_order = {name: i for i, name in enumerate(source.datasets)}
        method_order = {name: i for i, name in enumerate(source.methods)}
        values.sort(key=lambda v: (dataset_order.get(v.dataset, len(dataset_order)), v.dataset,
                                   method_order.get(v.method, len(method_order)), v.method, v.metric))
        source_rows.append({
            "id": source.id, "label": source.label, "citation": source.citation, "doi": source.doi,
            "where": source.where, "spread": source.spread, "decimals": source.decimals, "tolerance": source.tolerance,
            "file": None if source.file is None else {"path": source.file.path, "source": source.file.source,
                                                      "sha256": source.file.sha256},
            "reader": source.reader, "available": not problem, "problem": problem, "n_values": len(values),
        })
        rows.extend(compare_value(source, v, ctx, items) for v in values)
    return {"description": DESCRIPTION, "sources": source_rows, **_counted(rows)}


def _counted(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The section's ``rows`` with their ``counts`` by status and their ``unexplained_differences``."""
    counts = {status: sum(r["status"] == status for r in rows) for status in STATUSES}
    unexplained = sum(r["status"] == "differs" and not (r["note"] or r["method_differences"]) for r in rows)
    return {"rows": rows, "counts": counts, "unexplained_differences": unexplained}


def collect_reproduction(results: dict, task_dir: str | Path, run_dir: str | Path) -> dict[str, Any]:
    """The entries a run's ``results.json`` gains from its task's declarations.

    ``{"reproduction": ...}``, nothing for a task that declares nothing, and for declarations that
    cannot be used a ``reproduction_failed`` QC row instead (``{"qc": [...]}``): a malformed
    declaration costs the section, never the run's results.
    """
    from openpert.config.project import data_folder

    task_dir = Path(task_dir)
    try:
        section = reproduction_section(results, task_dir, run_dir=run_dir, data_dir=data_folder(task_dir.parent.parent))
    except (ConfigError, OSError, ValueError) as err:
        flag = QCFlag("reproduction_failed", f"the Reproduction section could not be made: {err}")
        return {"qc": [*(results.get("qc") or []), flag.to_dict()]}
    return {} if section is None else {"reproduction": section}


def find_task_dir(results: dict, root: str | Path) -> Path | None:
    """The folder of a run's task in the project at ``root`` (``src/<task>/``), if it has one there."""
    name = (results.get("task") or {}).get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        return None
    folder = Path(root) / "src" / name
    return folder if (folder / "api").is_dir() else None


def amend_results(results: dict, results_dir: str | Path, root: str | Path) -> dict[str, Any]:
    """The reproduction section of a run computed again with the project's current declarations.

    Returns ``{"reproduction": ...}`` to merge into the run's results, or ``{}`` when the project at
    ``root`` does not have the run's task or the task declares nothing (the run's own section, if
    any, is then kept). ``openpert report`` renders old runs with it.

    Raises
    ------
    ConfigError
        When the task's declarations are malformed.
    """
    from openpert.config.project import data_folder

    task_dir = find_task_dir(results, root)
    if task_dir is None:
        return {}
    section = reproduction_section(results, task_dir, run_dir=results_dir, data_dir=data_folder(root))
    if section is None:
        return {}
    return {"reproduction": keep_item_comparisons(section, results.get("reproduction"))}


#: Fields of a row that an item-by-item comparison sets.
_ITEM_FIELDS = ("measured", "measured_run", "ci_low", "ci_high", "difference", "within_spread", "within_ci", "status",
                "items")


def keep_item_comparisons(section: dict[str, Any], previous: Any) -> dict[str, Any]:
    """``section`` with the item-by-item comparisons of ``previous`` where it could make none.

    A section computed again without the run's score files (a copied ``results.json``) compares
    per-item sources on the means only; the run's own section, made beside its score files, keeps
    the comparison on the source's items. Its rows win for the same published value, with the
    current declarations' notes.
    """
    if not isinstance(previous, dict):
        return section
    old = {_row_key(r): r for r in previous.get("rows") or [] if isinstance(r, dict)}
    rows = []
    for row in section["rows"]:
        before = old.get(_row_key(row))
        items, kept = row.get("items"), (before or {}).get("items")
        if isinstance(items, dict) and not items.get("available") and isinstance(kept, dict) and kept.get("available"):
            row = {**row, **{k: before.get(k) for k in _ITEM_FIELDS}}
        rows.append(row)
    return {**section, **_counted(rows)}


def _row_key(row: dict[str, Any]) -> tuple:
    return tuple(row.get(k) for k in ("source_id", "published_dataset", "published_method", "published_metric"))


def report_amendment(root: str | Path) -> Callable[[dict, Path], dict]:
    """The ``amend`` of :func:`openpert.report.render_site` for the project at ``root``.

    Each run's Reproduction section is computed again with the current declarations; declarations
    that cannot be used leave the run's own section (if any) and say why in a warning.
    """
    import warnings

    def amend(results: dict, results_dir: Path) -> dict:
        try:
            return amend_results(results, results_dir, root)
        except (ConfigError, OSError, ValueError) as err:
            warnings.warn(f"{results_dir}: Reproduction not recomputed: {err}", stacklevel=2)
            return {}

    return amend

