"""File formats: ``api/file_*.yaml`` specs turned into validators.

A task's API describes each file it exchanges in ``info.format`` of a ``file_*.yaml``, in the manner
of Open Problems::

    type: file
    example: resources_test/my_task/dataset/prediction.h5ad
    label: Prediction
    info:
      format:
        type: h5ad
        layers:
          - {name: prediction, type: double, required: true, description: ...}
        uns:
          - {name: dataset_id, type: string, required: true}
        matches:
          - {this: obs_names, file: file_test, that: obs_names}

Supported ``type`` values and their slots:

``h5ad``
    ``X`` (a mapping), ``layers``, ``obs``, ``var``, ``obsm``, ``varm``, ``obsp``, ``uns`` (lists of
    ``{name, type, required, description}``).
``csv``, ``tsv``, ``parquet``
    ``columns``.
``json``, ``yaml``
    ``keys`` of the top-level mapping; ``jsonl`` applies ``keys`` to every record.

Slot types: ``integer``, ``double`` (any real number), ``string``, ``boolean``, ``object``
(a mapping or any value). Numeric matrices (``X``, ``layers``, ``obsm``...) must be finite unless the
slot says ``finite: false``; other slots are checked for finiteness only with ``finite: true``.

``min_rows`` (a non-negative integer, default 0) is the least number of rows a file must hold:
``obs`` of an h5ad file, rows of a csv/tsv/parquet table, records of a jsonl file, entries of a
json/yaml list or mapping. ``min_rows: 1`` on the file methods predict on makes a dataset that
yields no items fail (its job, naming the file) instead of scoring nothing.

``matches`` are the shape rules a task declares between files of one dataset/job: ``this`` and
``that`` name an attribute (``obs_names``, ``var_names``, ``obs:<col>``, ``var:<col>``, ``uns:<key>``,
``column:<col>``, ``n_rows``, ``n_obs``, ``n_vars``, ``keys``) of this file and of the file with
format id ``file``; ``relation`` is ``equal`` (same values in the same order, the default),
``same_set`` or ``subset`` (every value of this is in that).
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

FILE_TYPES = ("h5ad", "csv", "tsv", "parquet", "json", "jsonl", "yaml")
SLOT_TYPES = ("integer", "double", "float", "string", "boolean", "object", "numeric", "long")
H5AD_LIST_SLOTS = ("layers", "obs", "var", "obsm", "varm", "obsp", "varp", "uns")
#: Longest label of a dataset, method or metric: labels head table columns and figure axes.
LABEL_MAX = 30
#: ``uns`` entries that are a dataset's label (its long text goes in ``dataset_summary`` and
#: ``dataset_description``); a file that carries one longer than :data:`LABEL_MAX` is invalid.
LABEL_SLOTS = ("dataset_name",)
_MATRIX_SLOTS = {"X", "layers", "obsm", "varm", "obsp", "varp"}
RELATIONS = ("equal", "same_set", "subset")


class FormatError(ValueError):
    """A file does not match its format. The message names the file and every problem found."""


@dataclasses.dataclass(frozen=True)
class Slot:
    """One declared element of a file (a layer, an obs column, a csv column, a json key...)."""

    name: str
    type: str
    required: bool = True
    description: str = ""
    finite: bool | None = None


@dataclasses.dataclass(frozen=True)
class MatchRule:
    """A shape rule between this file and another file of the same dataset or job."""

    this: str
    file: str
    that: str
    relation: str = "equal"


@dataclasses.dataclass
class FileFormat:
    """A parsed ``info.format`` block.

    Attributes
    ----------
    format_id
        The stem of the ``file_*.yaml`` it came from (``file_prediction``).
    type
        One of :data:`FILE_TYPES`.
    slots
        Slot group (``X``, ``layers``, ``obs``, ``columns``, ``keys``...) -> declared slots.
    matches
        Shape rules against other files.
    min_rows
        The least number of rows (obs, table rows, records) the file must hold.
    """

    format_id: str
    type: str
    slots: dict[str, list[Slot]]
    matches: list[MatchRule]
    source: str = ""
    min_rows: int = 0

    @classmethod
    def from_spec(cls, spec: Mapping, *, source: str, format_id: str) -> FileFormat:
        """Parse an ``info.format`` mapping; errors name ``source`` and the key."""
        if not isinstance(spec, Mapping):
            raise FormatError(f"{source}: expected a mapping, got {spec!r}")
        ftype = spec.get("type")
        if ftype not in FILE_TYPES:
            raise FormatError(f"{source}.type: {ftype!r} is not one of {FILE_TYPES}")
        groups = {
            "h5ad": ("X", *H5AD_LIST_SLOTS),
            "csv": ("columns",),
            "tsv": ("columns",),
            "parquet": ("columns",),
            "json": ("keys",),
            "jsonl": ("keys",),
            "yaml": ("keys",),
        }[ftype]
        slots: dict[str, list[Slot]] = {}
        min_rows = spec.get("min_rows", 0)
        if isinstance(min_rows, bool) or not isinstance(min_rows, int) or min_rows < 0:
            raise FormatError(f"{source}.min_rows: expected a non-negative integer, got {min_rows!r}")
        for key, value in spec.items():
            if key in ("type", "matches", "min_rows"):
                continue
            if key not in groups:
                raise FormatError(f"{source}.{key}: not a slot of a {ftype} file; expected one of {groups}")
            if key == "X":
                value = [{"name": "X", **(value or {})}]
            if not isinstance(value, list):
                raise FormatError(f"{source}.{key}: expected a list of slots")
            slots[key] = [_parse_slot(v, f"{source}.{key}[{i}]") for i, v in enumerate(value)]
        matches = []
        for i, rule in enumerate(spec.get("matches") or []):
            where = f"{source}.matches[{i}]"
            if not isinstance(rule, Mapping) or not {"this", "file"} <= set(rule):
                raise FormatError(f"{where}: a rule needs 'this' and 'file' (and optionally 'that', 'relation')")
            relation = rule.get("relation", "equal")
            if relation not in RELATIONS:
                raise FormatError(f"{where}.relation: {relation!r} is not one of {RELATIONS}")
            matches.append(MatchRule(rule["this"], rule["file"], rule.get("that", rule["this"]), relation))
        return cls(format_id=format_id, type=ftype, slots=slots, matches=matches, source=source, min_rows=min_rows)

    # ------------------------------------------------------------------------------------------
    def validate(self, path: str | Path, context: Mapping[str, str | Path] | None = None) -> None:
        """Check a file against this format.

        Parameters
        ----------
        path
            The file to check.
        context
            Format id -> path of the other files of the same dataset or job, for ``matches``.
            Rules whose other file is not in ``context`` are not checked.

        Raises
        ------
        FormatError
            Naming the file and listing every problem.

        Notes
        -----
        What a file passes is remembered under its :func:`content_identity`: its own checks (slots
        and rows) by what they check, each shape rule with the identity of the file it compared. A
        check already passed costs a ``stat`` until either file changes, whatever the other rules
        in ``context``: a dataset's files, read by every job of the dataset, are read once, and so
        is a copy the harness made of a file (:func:`note_copy`). Jobs validating one file at the
        same time read it once: the second waits for the first's verdict.
        """
        path = Path(path)
        label = f"{path} ({self.format_id})"
        if not path.exists():
            raise FormatError(f"{label}: file not found")
        others = [(rule, Path(other)) for rule in self.matches
                  if (other := (context or {}).get(rule.file)) is not None and Path(other) != path]
        identity = content_identity(path)
        checks = {("own", self.type, repr(self.slots), self.min_rows),
                  *(("rule", rule, _identity_if_any(other)) for rule, other in others)}
        with _READING[hash(identity) % len(_READING)]:
            with _MEMORY_LOCK:
                if checks <= _VALIDATED.get(identity, set()):
                    return
            try:
                obj = load_file(path, self.type)
            except FormatError:
                raise
            except Exception as err:  # any reader error means the file is not of this type
                raise FormatError(f"{label}: cannot be read as {self.type}: {type(err).__name__}: {err}") from None
            problems = self._check_rows(obj) + self._check_slots(obj)
            for rule, other in others:
                problems.extend(self._check_match(obj, rule, other))
            if problems:
                raise FormatError(f"{label}: " + "; ".join(problems))
            _remember_valid(identity, checks)

    def _check_rows(self, obj: Any) -> list[str]:
        if not self.min_rows:
            return []
        try:
            n_rows = int(attribute(obj, self.type, "n_rows"))
        except (KeyError, TypeError):
            return [f"min_rows: cannot count the rows of this {self.type} file (its top level is {type(obj).__name__})"]
        if n_rows < self.min_rows:
            unit = {"h5ad": "rows (obs)", "jsonl": "records"}.get(self.type, "rows")
            return [f"has {n_rows} {unit}; the format asks for at least {self.min_rows} (min_rows)"]
        return []

    def _check_slots(self, obj: Any) -> list[str]:
        problems: list[str] = []
        for group, slots in self.slots.items():
            for slot in slots:
                found, value = _get_slot(obj, self.type, group, slot.name)
                where = slot.name if group == "X" else f"{group}[{slot.name!r}]"
                if not found:
                    if slot.required:
                        problems.append(f"required {where} is missing")
                    continue
                problems.extend(_check_value(value, slot, where, matrix=group in _MATRIX_SLOTS))
                if group == "uns" and slot.name in LABEL_SLOTS and isinstance(value, str) and len(value) > LABEL_MAX:
                    problems.append(f"{where} is the dataset's label in tables and figures: {len(value)} characters "
                                    f"({value!r}); at most {LABEL_MAX} (the long text goes in dataset_summary "
                                    "or dataset_description)")
        return problems

    def _check_match(self, obj: Any, rule: MatchRule, other_path: Path) -> list[str]:
        try:
            theirs_s = _compared_attribute(other_path, rule.that)
        except _UnreadableFile as err:  # the rule cannot hold, and the message says why
            return [f"shape rule {rule.this} ~ {rule.file}:{rule.that}: {err}"]
        except KeyError as err:
            return [f"shape rule {rule.this} ~ {rule.file}:{rule.that}: {err.args[0]}"]
        try:
            mine_s = _comparable(attribute(obj, self.type, rule.this))
        except KeyError as err:
            return [f"shape rule {rule.this} ~ {rule.file}:{rule.that}: {err.args[0]}"]
        if np.isscalar(mine_s) or np.isscalar(theirs_s):
            return [] if mine_s == theirs_s else [f"{rule.this} is {mine_s} but {rule.file} has {rule.that} {theirs_s}"]
        if mine_s.equals(theirs_s):  # the usual case, and it satisfies every relation: no set to build
            return []
        if rule.relation == "subset":
            extra = mine_s.difference(theirs_s)
            return [f"{rule.this}: {len(extra)} values not in {rule.file}'s {rule.that}, e.g. {list(extra[:3])}"] if len(extra) else []
        missing = theirs_s.difference(mine_s)
        extra = mine_s.difference(theirs_s)
        out = []
        if len(mine_s) != len(theirs_s):
            out.append(f"{rule.this} has {len(mine_s)} entries but {rule.file}'s {rule.that} has {len(theirs_s)}")
        if len(missing):
            out.append(f"{rule.this} lacks {len(missing)} of {rule.file}'s {rule.that}, e.g. {list(missing[:3])}")
        if len(extra):
            out.append(f"{rule.this} has {len(extra)} not in {rule.file}'s {rule.that}, e.g. {list(extra[:3])}")
        if not out and rule.relation == "equal" and not mine_s.equals(theirs_s):
            out.append(f"{rule.this} is not in the order of {rule.file}'s {rule.that}")
        return out


def _parse_slot(raw: Any, where: str) -> Slot:
    if not isinstance(raw, Mapping) or "name" not in raw:
        raise FormatError(f"{where}: a slot needs at least a name and a type")
    stype = raw.get("type", "object")
    if stype not in SLOT_TYPES:
        raise FormatError(f"{where}.type: {stype!r} is not one of {SLOT_TYPES}")
    return Slot(
        name=str(raw["name"]),
        type=stype,
        required=bool(raw.get("required", True)),
        description=str(raw.get("description", "")),
        finite=raw.get("finite"),
    )


def _type_from_suffix(path: Path) -> str:
    suffix = path.suffix.lower().lstrip(".")
    if suffix == "yml":
        return "yaml"
    if suffix not in FILE_TYPES:
        raise FormatError(f"{path}: cannot tell the file type from the suffix {path.suffix!r}")
    return suffix


# --- what passed ----------------------------------------------------------------------------------
#: File identity -> the checks it passed: ("own", type, slots, min_rows), ("rule", rule, other file's identity).
_VALIDATED: dict[tuple, set[tuple]] = {}
_VALIDATED_MAX = 4096
#: Guards what this module remembers (passed checks, compared attributes, copies): jobs validate from threads.
_MEMORY_LOCK = threading.Lock()
#: Held while a file is read and checked, by its identity's stripe: a second validator of the
#: same file waits, then finds the verdict remembered, rather than reading the file again.
_READING = tuple(threading.Lock() for _ in range(32))
#: Identity of a copy the harness made -> identity of the file it copied (see :func:`note_copy`).
_COPIES: dict[tuple, tuple] = {}


def file_identity(path: str | Path) -> tuple[int, int, int, int]:
    """The identity of a file's current content: device, inode, size and mtime (ns).

    Not the path, so a file keeps what it passed when it is renamed (as outputs are, to publish
    them), and not the ctime, which every hard link to the file changes (as staging an input does).
    A same-size rewrite whose writer sets the mtime back goes unseen; in a sandbox no job can write
    a checked file (inputs are mounted read-only, outputs are checked once every process of their
    job has ended).
    """
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def content_identity(path: str | Path) -> tuple[int, int, int, int]:
    """:func:`file_identity`, or for an unchanged copy noted by :func:`note_copy`, its original's.

    What validation remembers and what this module reads are keyed by it, so a copy passes what
    its original passed without being read.
    """
    identity = file_identity(path)
    with _MEMORY_LOCK:
        return _COPIES.get(identity, identity)


def note_copy(original: str | Path, copy: str | Path) -> None:
    """Record that ``copy`` was just made as a byte-for-byte copy of ``original``.

    The harness calls it for the copies it makes itself (published outputs). The copy then shares
    its original's :func:`content_identity` for as long as its own identity holds: a copy that is
    edited afterwards changes size or mtime, and is checked on its own again.
    """
    source, target = content_identity(original), file_identity(copy)
    with _MEMORY_LOCK:
        if target not in _COPIES and len(_COPIES) >= _VALIDATED_MAX:
            _COPIES.pop(next(iter(_COPIES)))
        _COPIES[target] = source


def _identity_if_any(path: Path) -> tuple | None:
    try:
        return content_identity(path)
    except OSError:  # a missing file is part of what was checked: its rule failed
        return None


def _remember_valid(identity: tuple, checks: set[tuple]) -> None:
    with _MEMORY_LOCK:
        if identity not in _VALIDATED and len(_VALIDATED) >= _VALIDATED_MAX:
            _VALIDATED.pop(next(iter(_VALIDATED)))
        _VALIDATED.setdefault(identity, set()).update(checks)


class _UnreadableFile(Exception):
    """The other file of a shape rule cannot be read; the message says why."""


def _comparable(value: Any) -> Any:
    """An attribute as rules compare it: a scalar as it is, values as an index of strings."""
    if np.isscalar(value):
        return value
    values = np.asarray(value)
    # Names are usually strings already: converting them to a fixed-width array and back would be
    # two copies of every name for nothing.
    if values.dtype == object and pd.api.types.infer_dtype(values, skipna=False) == "string":
        return pd.Index(values, dtype=object)
    return pd.Index(values.astype(str))


#: (file identity, type, attribute) -> the attribute as compared: the other file of a rule is
#: usually a dataset's, compared by every job of the dataset; keeping its few values spares reading it.
_ATTRIBUTES: dict[tuple, Any] = {}
_ATTRIBUTES_MAX = 256


def _compared_attribute(path: Path, name: str) -> Any:
    """:func:`attribute` ``name`` of the file at ``path`` (type from its suffix), :func:`_comparable`.

    Raises :class:`_UnreadableFile` when the file cannot be read, ``KeyError`` when it has no such
    attribute.
    """
    try:
        ftype = _type_from_suffix(path)
        key = (content_identity(path), ftype, name)
        with _MEMORY_LOCK:
            if key in _ATTRIBUTES:
                return _ATTRIBUTES[key]
        other = load_file(path, ftype)
    except Exception as err:  # any reader error
        raise _UnreadableFile(f"cannot read {path}: {type(err).__name__}: {err}") from None
    value = _comparable(attribute(other, ftype, name))
    with _MEMORY_LOCK:
        if len(_ATTRIBUTES) >= _ATTRIBUTES_MAX:
            _ATTRIBUTES.pop(next(iter(_ATTRIBUTES)))
        _ATTRIBUTES[key] = value
    return value


# --- reading --------------------------------------------------------------------------------------
_CACHE: dict[tuple, Any] = {}
_CACHE_MAX = 16


def load_file(path: Path, ftype: str) -> Any:
    """Read a file of a known type. Results are cached by :func:`file_identity`.

    Reference files (a dataset's test file) are read by many validations; caching keeps the
    harness overhead per job small. The cache holds a few objects at most.
    """
    key = (content_identity(path), ftype)
    if key in _CACHE:
        return _CACHE[key]
    if ftype == "h5ad":
        import anndata as ad

        obj = ad.read_h5ad(path)
    elif ftype in ("csv", "tsv"):
        obj = pd.read_csv(path, sep="," if ftype == "csv" else "\t")
    elif ftype == "parquet":
        obj = pd.read_parquet(path)
    elif ftype == "json":
        obj = json.loads(path.read_text())
    elif ftype == "jsonl":
        obj = []
        for i, line in enumerate(path.read_text().splitlines()):
            if not line.strip():
                continue
            try:
                obj.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise FormatError(f"{path}: line {i + 1} is not valid JSON: {err}") from None
    elif ftype == "yaml":
        obj = yaml.safe_load(path.read_text())
    else:  # pragma: no cover - guarded by FILE_TYPES
        raise FormatError(f"{path}: unknown file type {ftype!r}")
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = obj
    return obj


def _get_slot(obj: Any, ftype: str, group: str, name: str) -> tuple[bool, Any]:
    if ftype == "h5ad":
        if group == "X":
            return obj.X is not None, obj.X
        container = getattr(obj, group)
        if group in ("obs", "var"):
            return (name in container.columns), (container[name] if name in container.columns else None)
        return (name in container), (container[name] if name in container else None)
    if group == "columns":
        return (name in obj.columns), (obj[name] if name in obj.columns else None)
    if group == "keys":
        records = obj if ftype == "jsonl" else [obj]
        if not records or not all(isinstance(r, Mapping) for r in records):
            return False, None
        if not all(name in r for r in records):
            return False, None
        return True, [r[name] for r in records] if ftype == "jsonl" else obj[name]
    return False, None


def _check_value(value: Any, slot: Slot, where: str, *, matrix: bool) -> list[str]:
    import scipy.sparse as sp

    arr = value
    if sp.issparse(arr):
        arr = arr.data
    elif isinstance(arr, pd.DataFrame):
        arr = arr.to_numpy()
    elif isinstance(arr, (pd.Series, pd.Index)):
        arr = arr.to_numpy() if not isinstance(arr.dtype, pd.CategoricalDtype) else np.asarray(arr.astype(str))
    elif isinstance(arr, list) and slot.type != "object":
        arr = np.asarray(arr, dtype=object)
        if arr.size and all(isinstance(v, (int, float, bool, np.number)) for v in arr.ravel()):
            arr = arr.astype(float) if slot.type != "boolean" else arr.astype(bool)
    elif hasattr(arr, "__array__") and not isinstance(arr, np.ndarray):
        arr = np.asarray(arr)
    problems: list[str] = []
    if slot.type == "object":
        return problems
    if not isinstance(arr, np.ndarray):
        arr = np.asarray(arr)
    kind = arr.dtype.kind
    if slot.type in ("integer", "long"):
        if kind == "f":
            finite = arr[np.isfinite(arr)]
            if finite.size and not np.all(finite == np.round(finite)):
                problems.append(f"{where} should hold integers but has non-integer values")
        elif kind not in "iu":
            problems.append(f"{where} should be integer, found dtype {arr.dtype}")
    elif slot.type in ("double", "float", "numeric"):
        if kind not in "iuf":
            problems.append(f"{where} should be numeric, found dtype {arr.dtype}")
    elif slot.type == "string":
        if kind not in "OUS" or (kind == "O" and arr.size and not all(isinstance(v, str) for v in arr.ravel()[:1000])):
            problems.append(f"{where} should hold strings, found dtype {arr.dtype}")
    elif slot.type == "boolean":
        if kind != "b":
            problems.append(f"{where} should be boolean, found dtype {arr.dtype}")
    check_finite = slot.finite if slot.finite is not None else matrix
    if check_finite and kind in "fc" and not problems:
        bad = ~np.isfinite(arr)
        if bad.any():
            n_nan = int(np.isnan(arr).sum())
            problems.append(f"{where} has {int(bad.sum())} non-finite values ({n_nan} NaN, {int(bad.sum()) - n_nan} inf)")
    return problems


def attribute(obj: Any, ftype: str, name: str) -> Any:
    """The value of a ``matches`` attribute (``obs_names``, ``column:id``, ``n_rows``...) of a file."""
    if ftype == "h5ad":
        simple = {"obs_names": lambda: obj.obs_names, "var_names": lambda: obj.var_names,
                  "n_obs": lambda: obj.n_obs, "n_vars": lambda: obj.n_vars, "n_rows": lambda: obj.n_obs}
        if name in simple:
            return simple[name]()
        group, _, key = name.partition(":")
        if group in ("obs", "var") and key in getattr(obj, group).columns:
            return getattr(obj, group)[key]
        if group == "uns" and key in obj.uns:
            return obj.uns[key]
    elif ftype in ("csv", "tsv", "parquet"):
        if name == "n_rows":
            return len(obj)
        group, _, key = name.partition(":")
        if group == "column" and key in obj.columns:
            return obj[key]
    elif ftype in ("json", "yaml", "jsonl"):
        if name == "keys" and isinstance(obj, Mapping):
            return list(obj)
        if name in ("n_rows", "length") and isinstance(obj, (list, Mapping)):
            return len(obj)
        group, _, key = name.partition(":")
        if group == "column" and isinstance(obj, list):
            return [r.get(key) for r in obj]
    raise KeyError(f"no attribute {name!r} in a {ftype} file")
