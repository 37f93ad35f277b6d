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
(a mapping or any value), ``llm_usage`` (a language-model component's account of its calls,
:mod:`openpert.config.llm_usage`). Numeric matrices (``X``, ``layers``, ``obsm``...) must be finite unless the
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

A file is read only once what it declares allows it (:mod:`openpert.config.declared`): its HDF5
datasets' shapes and dtypes, its parquet footer, its size. A file that declares more than
:data:`SIZE_FACTOR` times what its rules' files allow (a prediction against its test file's rows
x genes), or more than the memory its validation may use, is refused without reading it; a file
whose reading this process cannot bound to :data:`IN_PROCESS_BYTES` is read in a process with a
memory limit of its own (:mod:`openpert.config.bounded`). No output can take the harness's memory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from openpert.config.declared import Declared, RefusedFile, declared_size
from openpert.files import format_bytes

# numpy and pandas are imported where files are read: the command line and the component-test plugin
# import this module for its specs and errors, and most of their commands read no file.

FILE_TYPES = ("h5ad", "csv", "tsv", "parquet", "json", "jsonl", "yaml")
#: File types whose slots are ``columns`` (the others: h5ad's slot groups, or ``keys``).
TABLE_TYPES = ("csv", "tsv", "parquet")
SLOT_TYPES = ("integer", "double", "float", "string", "boolean", "object", "numeric", "long", "llm_usage")
H5AD_LIST_SLOTS = ("layers", "obs", "var", "obsm", "varm", "obsp", "varp", "uns")
#: Longest label of a dataset, method or metric: labels head table columns and figure axes.
LABEL_MAX = 30
#: ``uns`` entries that are a dataset's label (its long text goes in ``dataset_summary`` and
#: ``dataset_description``); a file that carries one longer than :data:`LABEL_MAX` is invalid.
LABEL_SLOTS = ("dataset_name",)
_MATRIX_SLOTS = {"X", "layers", "obsm", "varm", "obsp", "varp"}
RELATIONS = ("equal", "same_set", "subset")
#: Most memory reading a file may take (as its metadata bounds it) to be read in the harness's own
#: process; a larger file, or one whose reading metadata cannot bound, is read in a bounded process.
IN_PROCESS_BYTES = 128 * 2**20
#: What a file whose rows a rule ties to another file may declare: this many times the larger of
#: that file's declared size and 8 bytes x its rows x (the columns a rule ties), ...
SIZE_FACTOR = 4
#: ... plus this much, so that small inputs leave room for text and metadata.
SIZE_FLOOR = 64 * 2**20
#: Memory a validation may use where the caller gives none (MB): ``$OPENPERT_VALIDATION_MEMORY_MB``.
DEFAULT_MEMORY_MB = 4096
#: Longest problem in a message (a value the file holds is quoted, and the file chose its length).
PROBLEM_MAX = 400
#: What a rule's attribute ties of this file: its rows or its columns.
_ROW_ATTRIBUTES = ("obs_names", "n_obs", "n_rows", "obs:", "column:")
_COLUMN_ATTRIBUTES = ("var_names", "n_vars", "var:")


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
        groups = ("X", *H5AD_LIST_SLOTS) if ftype == "h5ad" else ("columns",) if ftype in TABLE_TYPES else ("keys",)
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

    def to_dict(self) -> dict[str, Any]:
        """This format as plain data (:meth:`from_dict` rebuilds it): to validate in another process."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FileFormat:
        """The format :meth:`to_dict` gave."""
        return cls(format_id=data["format_id"], type=data["type"],
                   slots={group: [Slot(**slot) for slot in slots] for group, slots in data["slots"].items()},
                   matches=[MatchRule(**rule) for rule in data["matches"]], source=data.get("source", ""),
                   min_rows=data.get("min_rows", 0))

    # ------------------------------------------------------------------------------------------
    def validate(self, path: str | Path, context: Mapping[str, str | Path] | None = None, *,
                 memory_mb: float | None = None) -> None:
        """Check a file against this format.

        Parameters
        ----------
        path
            The file to check.
        context
            Format id -> path of the other files of the same dataset or job, for ``matches``.
            Rules whose other file is not in ``context`` are not checked.
        memory_mb
            Memory reading the file may take (the job's limit, for its outputs); default
            :data:`DEFAULT_MEMORY_MB`; ``$OPENPERT_VALIDATION_MEMORY_MB`` replaces the default and
            caps ``memory_mb`` (:func:`validation_memory_mb`). A file that declares more is
            refused without reading it.

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

        Before anything reads it, the file's metadata says what reading it takes
        (:func:`declared_of`): beyond what its rules' files allow or beyond ``memory_mb``, it is
        refused; beyond what this process may read (:data:`IN_PROCESS_BYTES`), or unbounded
        (parquet), it is read in a process of its own under a memory limit of ``memory_mb``.
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
            budget = int(validation_memory_mb(memory_mb) * 2**20)
            declared = self._declared(path, label)
            self._refuse_oversized(label, declared, others, budget)
            if declared.peak is not None and declared.peak <= IN_PROCESS_BYTES:
                problems = self.problems(path, others, memory_bytes=budget)
            else:
                from openpert.config.bounded import BoundedReadError, problems_in_bounded_process

                try:
                    problems = problems_in_bounded_process(self, path, others, memory_bytes=budget)
                except BoundedReadError as err:
                    raise FormatError(f"{label}: {err}") from None
            if problems:
                raise FormatError(f"{label}: " + "; ".join(_shortened(p) for p in problems))
            _remember_valid(identity, checks)

    def problems(self, path: Path, others: list[tuple[MatchRule, Path]], *, bounded: bool = False,
                 memory_bytes: int | None = None) -> list[str]:
        """Read the file at ``path`` and list what is wrong with it (empty: it is valid).

        Parameters
        ----------
        path
            The file.
        others
            The shape rules to check, each with the path of its other file.
        bounded
            This process runs under a memory limit of its own (:mod:`openpert.config.bounded`):
            the other files of rules are read here whatever their size. Otherwise what a rule
            compares of a large file is read in a bounded process of ``memory_bytes``.
        memory_bytes
            Memory of such a process (default: :func:`validation_memory_mb`).

        Raises
        ------
        FormatError
            When the file cannot be read as its type.
        """
        label = f"{path} ({self.format_id})"
        try:
            obj = load_file(path, self.type)
        except FormatError:
            raise
        except Exception as err:  # any reader error means the file is not of this type
            raise FormatError(f"{label}: cannot be read as {self.type}: {type(err).__name__}: {err}") from None
        problems = self._check_rows(obj) + self._check_slots(obj)
        for rule, other in others:
            problems.extend(self._check_match(obj, rule, other, bounded=bounded, memory_bytes=memory_bytes))
        return problems

    def _declared(self, path: Path, label: str) -> Declared:
        """What ``path`` declares, or a :class:`FormatError` saying why it cannot be read at all."""
        try:
            return declared_of(path, self.type)
        except RefusedFile as err:
            raise FormatError(f"{label}: refused without reading it: {err}") from None
        except Exception as err:  # any reader error means the file is not of this type
            raise FormatError(f"{label}: cannot be read as {self.type}: {type(err).__name__}: {err}") from None

    def _refuse_oversized(self, label: str, declared: Declared, others: list[tuple[MatchRule, Path]], budget: int) -> None:
        """Refuse a file that declares more than its rules' files allow or than its validation may use."""
        bound = self._bound_from_rules(others)
        what = f"declares {format_bytes(declared.nbytes)} of data in {format_bytes(declared.on_disk)} on disk"
        if declared.largest:
            what += f" (largest: {declared.largest})"
        if bound is not None and declared.nbytes > bound[0]:
            raise FormatError(f"{label}: {what}; a {self.format_id} of these inputs may declare at most "
                              f"{format_bytes(bound[0])} ({bound[1]}): refused without reading it")
        if declared.nbytes > budget:
            raise FormatError(f"{label}: {what}; reading it may take at most {format_bytes(budget)} "
                              "(the memory of its validation): refused without reading it")

    def _bound_from_rules(self, others: list[tuple[MatchRule, Path]]) -> tuple[int, str] | None:
        """The most this file may declare given the files its rows (and columns) are tied to.

        ``None`` unless rules tie both its rows and its columns to other files. Otherwise :data:`SIZE_FLOOR` +
        :data:`SIZE_FACTOR` x the larger of the row file's declared size and a float64 matrix of
        its rows by the columns of the file a rule ties this file's columns to.
        """
        rows = columns = None
        rows_said = columns_said = ""
        row_bytes, row_file = 0, ""
        for rule, other in others:
            tie = _tie(rule.this)
            if tie is None:
                continue
            try:
                theirs = declared_of(other, _type_from_suffix(other))
            except Exception:  # noqa: BLE001 - an unreadable file of a rule fails that rule, with its reason
                continue
            count = {"rows": theirs.n_rows, "columns": theirs.n_vars}.get(_tie(rule.that) or "")
            if tie == "rows":
                if theirs.nbytes > row_bytes:
                    row_bytes, row_file = theirs.nbytes, rule.file
                if count is not None and (rows is None or count > rows):
                    rows, rows_said = count, f"{rule.file}'s {count:,} rows"
            elif count is not None and (columns is None or count > columns):
                columns, columns_said = count, f"{rule.file}'s {count:,} columns"
        if rows is None or columns is None:
            # A file tied by its rows alone (a dataset's de_test to its id_map) may hold any number
            # of layers of any width: no size follows from its rules, only the memory bound applies.
            return None
        matrix = 8 * rows * columns
        basis = (f"the larger of {rows_said} x {columns_said} x 8 bytes ({format_bytes(matrix)}) and "
                 f"{row_file}'s {format_bytes(row_bytes)}")
        return SIZE_FLOOR + SIZE_FACTOR * max(matrix, row_bytes), f"{SIZE_FACTOR} x {basis}, + {format_bytes(SIZE_FLOOR)}"

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

    def _check_match(self, obj: Any, rule: MatchRule, other_path: Path, *, bounded: bool = False,
                     memory_bytes: int | None = None) -> list[str]:
        import numpy as np
        try:
            theirs_s = compared_attribute(other_path, rule.that, bounded=bounded, memory_bytes=memory_bytes)
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
    return Slot(name=str(raw["name"]), type=stype, required=bool(raw.get("required", True)),
                description=str(raw.get("description", "")), finite=raw.get("finite"))


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
    _remember(_COPIES, file_identity(copy), content_identity(original), _VALIDATED_MAX)


def _identity_if_any(path: Path) -> tuple | None:
    try:
        return content_identity(path)
    except OSError:  # a missing file is part of what was checked: its rule failed
        return None


def _remember(memory: dict, key: Any, value: Any, most: int) -> None:
    """Keep ``value`` under ``key`` in one of this module's memories of at most ``most`` entries (the oldest goes)."""
    with _MEMORY_LOCK:
        if key not in memory and len(memory) >= most:
            memory.pop(next(iter(memory)))
        memory[key] = value


def _remember_valid(identity: tuple, checks: set[tuple]) -> None:
    with _MEMORY_LOCK:
        if identity not in _VALIDATED and len(_VALIDATED) >= _VALIDATED_MAX:
            _VALIDATED.pop(next(iter(_VALIDATED)))
        _VALIDATED.setdefault(identity, set()).update(checks)


class _UnreadableFile(Exception):
    """The other file of a shape rule cannot be read; the message says why."""


class _NeedsBoundedRead(Exception):
    """Reading an element takes more than this process may read: a bounded process must."""


def validation_memory_mb(job_mb: float | None = None) -> float:
    """Memory (MB) the validation of one file may use.

    Parameters
    ----------
    job_mb
        The memory limit of the job whose file it is (``None``: no job, or no limit).

    Returns
    -------
    float
        ``job_mb``, else :data:`DEFAULT_MEMORY_MB`; ``$OPENPERT_VALIDATION_MEMORY_MB``, when set,
        replaces the default and caps ``job_mb``.

    Raises
    ------
    FormatError
        When the variable is not a number.
    """
    value = os.environ.get("OPENPERT_VALIDATION_MEMORY_MB", "")
    try:
        cap = float(value) if value else None
    except ValueError:
        raise FormatError(f"$OPENPERT_VALIDATION_MEMORY_MB: expected a number of MB, got {value!r}") from None
    if job_mb:
        return min(job_mb, cap) if cap else job_mb
    return cap or DEFAULT_MEMORY_MB


def _tie(attribute_name: str) -> str | None:
    """Whether a rule's attribute names rows, columns or neither of its file."""
    if attribute_name.startswith(_ROW_ATTRIBUTES):
        return "rows"
    if attribute_name.startswith(_COLUMN_ATTRIBUTES):
        return "columns"
    return None


def _shortened(problem: str) -> str:
    """A problem cut to :data:`PROBLEM_MAX` characters: messages quote values the file chose."""
    return problem if len(problem) <= PROBLEM_MAX else problem[: PROBLEM_MAX - 1] + "\u2026"


#: (file identity, type) -> what the file declares (:func:`declared_of`).
_DECLARED: dict[tuple, Declared] = {}
_DECLARED_MAX = 256


def declared_of(path: str | Path, ftype: str) -> Declared:
    """:func:`openpert.config.declared.declared_size`, remembered by :func:`content_identity`.

    A dataset's files are the other file of every job's rules; their metadata is read once.
    """
    key = (content_identity(path), ftype)
    with _MEMORY_LOCK:
        if key in _DECLARED:
            return _DECLARED[key]
    declared = declared_size(path, ftype)
    _remember(_DECLARED, key, declared, _DECLARED_MAX)
    return declared


def _comparable(value: Any) -> Any:
    """An attribute as rules compare it: a scalar as it is, values as an index of strings."""
    import numpy as np
    import pandas as pd
    if np.isscalar(value):
        return value
    if isinstance(getattr(value, "dtype", None), pd.CategoricalDtype):
        value = value.astype(object)
    # Strings stay Python objects: a fixed-width array is as wide as the longest string for every
    # value, and converting names to one and back would be two copies of every name for nothing.
    values = np.asarray(value, dtype=object) if isinstance(value, (list, tuple)) else np.asarray(value)
    if values.dtype == object and pd.api.types.infer_dtype(values, skipna=False) == "string":
        return pd.Index(values, dtype=object)
    return pd.Index(values.astype(str))


#: (file identity, type, attribute) -> the attribute as compared: the other file of a rule is
#: usually a dataset's, compared by every job of the dataset; keeping its few values spares reading it.
_ATTRIBUTES: dict[tuple, Any] = {}
_ATTRIBUTES_MAX = 256


def compared_attribute(path: Path, name: str, *, bounded: bool = False, memory_bytes: int | None = None) -> Any:
    """:func:`attribute` ``name`` of the file at ``path`` (type from its suffix), as shape rules compare it.

    Of an h5ad file only the element that holds the attribute is read (:func:`read_h5ad_attribute`).
    Unless ``bounded`` (this process has a memory limit of its own), what takes more than
    :data:`IN_PROCESS_BYTES` to read is read in a bounded process of ``memory_bytes`` (default:
    :func:`validation_memory_mb`; :func:`openpert.config.bounded.attribute_in_bounded_process`).
    Values are remembered by the file's :func:`content_identity`.

    Returns
    -------
    A scalar, or the values as a ``pandas.Index`` of strings.

    Raises
    ------
    KeyError
        When the file has no such attribute.
    _UnreadableFile
        When the file cannot be read (or is refused); the message says why.
    """
    from openpert.config.bounded import attribute_in_bounded_process

    try:
        ftype = _type_from_suffix(path)
        key = (content_identity(path), ftype, name)
        with _MEMORY_LOCK:
            if key in _ATTRIBUTES:
                return _ATTRIBUTES[key]
        declared = declared_of(path, ftype)
        if memory_bytes is None:
            memory_bytes = int(validation_memory_mb() * 2**20)
        value = None
        if ftype == "h5ad":
            try:
                value = _comparable(read_h5ad_attribute(path, name, declared, bounded=bounded))
            except _NeedsBoundedRead:
                value = attribute_in_bounded_process(path, name, memory_bytes=memory_bytes)
        elif bounded or (declared.peak is not None and declared.peak <= IN_PROCESS_BYTES):
            value = _comparable(attribute(load_file(path, ftype), ftype, name))
        else:
            value = attribute_in_bounded_process(path, name, memory_bytes=memory_bytes)
    except KeyError:
        raise
    except Exception as err:  # any reader error, a refused file or a bounded read that failed included
        raise _UnreadableFile(f"cannot read {path}: {type(err).__name__}: {err}") from None
    _remember(_ATTRIBUTES, key, value, _ATTRIBUTES_MAX)
    return value


def read_h5ad_attribute(path: Path, name: str, declared: Declared, *, bounded: bool = False) -> Any:
    """A ``matches`` attribute of an h5ad file, reading only the element that holds it.

    ``n_obs``, ``n_vars`` and ``n_rows`` come from the declared shapes; ``obs_names``,
    ``var_names``, ``obs:<col>``, ``var:<col>`` and ``uns:<key>`` read that one element (anndata's
    ``read_elem``), not the whole file: comparing a prediction's genes with a training file of
    millions of cells reads the training file's gene names only.

    Parameters
    ----------
    path
        The file.
    name
        The attribute.
    declared
        What the file declares (:func:`declared_of`).
    bounded
        This process has a memory limit of its own: read the element whatever it declares.

    Raises
    ------
    KeyError
        When the file has no such attribute.
    _NeedsBoundedRead
        Unless ``bounded``, when the element takes more than :data:`IN_PROCESS_BYTES` to read.
    """
    counts = {"n_obs": declared.n_obs, "n_rows": declared.n_obs, "n_vars": declared.n_vars}
    if name in counts:
        if counts[name] is None:
            raise KeyError(f"no attribute {name!r} in a h5ad file")
        return counts[name]
    import h5py
    from anndata.io import read_elem

    with h5py.File(path, "r") as file:
        group, _, key = name.partition(":")
        if name in ("obs_names", "var_names"):
            axis = file.get(name[:3])
            index = axis.attrs.get("_index", "_index") if axis is not None else None
            element = f"{name[:3]}/{index.decode() if isinstance(index, bytes) else index}"
        elif group in ("obs", "var") and key and key in _column_order(file.get(group)):
            element = f"{group}/{key}"
        elif group == "uns" and key:
            element = f"uns/{key}"
        else:
            raise KeyError(f"no attribute {name!r} in a h5ad file")
        if element not in file:
            raise KeyError(f"no attribute {name!r} in a h5ad file")
        nbytes, peak = declared.under(element)
        if not bounded and (peak is None or peak > IN_PROCESS_BYTES):
            raise _NeedsBoundedRead(f"{path}: {element} declares {format_bytes(nbytes)}")
        return read_elem(file[element])


def _column_order(group: Any) -> list[str]:
    """The columns of an anndata dataframe group (its ``column-order``), ``[]`` when it is none."""
    import numpy as np
    if group is None:
        return []
    order = group.attrs.get("column-order", [])
    return [c.decode() if isinstance(c, bytes) else str(c) for c in np.atleast_1d(order)]


# --- reading --------------------------------------------------------------------------------------
_CACHE: dict[tuple, Any] = {}
_CACHE_MAX = 16
#: Largest file (as declared) the reading cache keeps: it holds a few small reference files, not outputs.
_CACHE_ITEM_BYTES = 8 * 2**20


def load_file(path: Path, ftype: str) -> Any:
    """Read a whole file of a known type. Small files are cached by :func:`content_identity`.

    Reference files (a dataset's test file) are read by many validations; caching keeps the
    harness overhead per job small. The cache holds a few small objects at most. This reads
    whatever the file holds: callers check what it declares first (:meth:`FileFormat.validate`).
    """
    import pandas as pd
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
    with _MEMORY_LOCK:
        declared = _DECLARED.get(key)
    if declared is not None and declared.nbytes <= _CACHE_ITEM_BYTES:
        _remember(_CACHE, key, obj, _CACHE_MAX)
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
    import numpy as np
    import pandas as pd
    import scipy.sparse as sp

    arr = value
    if sp.issparse(arr):
        arr = arr.data
    elif isinstance(arr, pd.DataFrame):
        arr = arr.to_numpy()
    elif isinstance(arr, (pd.Series, pd.Index)):
        # Categories stay Python objects: ``astype(str)`` would first make them one fixed-width array,
        # as wide as the longest string for every value (a few long texts would take gigabytes).
        arr = arr.to_numpy() if not isinstance(arr.dtype, pd.CategoricalDtype) else np.asarray(arr.astype(object))
    elif isinstance(arr, list) and slot.type != "object":
        arr = np.asarray(arr, dtype=object)
        if arr.size and all(isinstance(v, (int, float, bool, np.number)) for v in arr.ravel()):
            arr = arr.astype(float) if slot.type != "boolean" else arr.astype(bool)
    elif hasattr(arr, "__array__") and not isinstance(arr, np.ndarray):
        arr = np.asarray(arr)
    problems: list[str] = []
    if slot.type == "object":
        return problems
    if slot.type == "llm_usage":
        from openpert.config.llm_usage import usage_problems

        return usage_problems(value, where)
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
    elif ftype in TABLE_TYPES:
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
