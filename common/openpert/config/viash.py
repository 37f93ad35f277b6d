"""Read Viash-format component configs (``config.vsh.yaml``) without Viash.

A component config may pull in other YAML files with ``__merge__`` (a path or a list of paths,
relative to the file that names it, or to the project root when it starts with ``/``). Merging
follows Viash: the merged files are applied first, in order, and the including file on top of them;
mappings merge key by key, lists are concatenated, and any other value of the including file wins.
Merges nest (a merged file may merge further files). Every error names the file and the key.

The project root is the nearest folder above the config that holds ``_viash.yaml``.
"""

from __future__ import annotations

import dataclasses
import pickle
import re
from collections import Counter
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from openpert.config.formats import FileFormat

#: Component types known to the harness (``info.type`` of a component's API file).
COMPONENT_TYPES = ("dataset", "control_method", "method", "metric")
#: Roles of control methods (``info.control``). Positive controls set the scale's 1 and the strongest
#: negative control its 0; baselines are simple references, shown and ranked; adversarial controls
#: game a metric without modelling the biology (they feed its gameability); a ceiling is a realistic
#: upper bound under the data's own noise (it gives the metric's dynamic range).
CONTROL_ROLES = ("positive", "negative", "baseline", "adversarial", "ceiling")
#: Control roles that never rank among methods.
UNRANKED_ROLES = ("positive", "negative", "adversarial", "ceiling")
#: Most seed replicates a control may ask for (each is a job on every dataset).
MAX_SEEDS = 100
#: Component and dataset ids: they become folder and file names.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*")

#: Argument types of Viash and the Python types their values take.
ARGUMENT_TYPES = {"file": str, "string": str, "integer": int, "long": int, "double": float, "boolean": bool,
                  "boolean_true": bool, "boolean_false": bool}

# Key recording which files a mapping was merged from (stripped from what users see).
_MERGED_FROM = "__openpert_merged_from__"


class ConfigError(ValueError):
    """A component config (or a file it merges) is malformed. The message names file and key."""


#: The project's settings file, at its root (Viash's package config); read by :func:`openpert.config.project.project_file`.
PROJECT_FILE = "_viash.yaml"


def find_project_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` that holds ``_viash.yaml``.

    Raises
    ------
    ConfigError
        When no ``_viash.yaml`` is found up to the filesystem root.
    """
    start = Path(start).resolve()
    for folder in [start, *start.parents] if start.is_dir() else start.parents:
        if (folder / PROJECT_FILE).is_file():
            return folder
    raise ConfigError(f"{start}: no _viash.yaml found in this folder or any above it")


#: The file name of a component's config.
CONFIG_NAME = "config.vsh.yaml"


def config_files(path: str | Path) -> list[Path]:
    """The component configs at ``path``: the file itself, or every ``config.vsh.yaml`` below a folder, sorted.

    Files under an ``api`` folder (below ``path``) are interfaces, not components, and are left out.
    A path that is neither a config nor a folder gives none; the caller says what that means.
    """
    path = Path(path)
    if path.is_file():
        return [path] if path.name == CONFIG_NAME else []
    if not path.is_dir():
        return []
    return sorted(p for p in path.rglob(CONFIG_NAME) if "api" not in p.relative_to(path).parts)


#: libyaml's parser where PyYAML was built with it: the same safe constructors, parsing about 10x faster
#: (a run reads several hundred component and API files).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


#: Parsed YAML, pickled, by the file's bytes. A process reads the same component and API files again
#: and again (each config merges several API files; every task listing reads every config), and
#: unpickling costs about a tenth of parsing. Keyed by content, never by path or time: an edited
#: file is parsed anew, however soon after it was read. Callers get a fresh copy they may change.
_PARSED: dict[bytes, bytes] = {}
_PARSED_MAX = 4096


def load_yaml(path: Path) -> Any:
    """Load one YAML file, with errors that name it."""
    path = Path(path)
    try:
        text = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise ConfigError(f"{path}: file not found") from None
    parsed = _PARSED.get(text)
    if parsed is None:
        try:
            value = yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 - a safe loader
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: invalid YAML: {err}") from None
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        parsed = _PARSED[text] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return pickle.loads(parsed)  # noqa: S301 - pickled by this function, from YAML's safe constructors


def as_list(value: Any) -> list:
    """A Viash field that may be one value or a list of them, as a list (``[]`` for none)."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _resolve_merge_path(ref: Any, including_file: Path, root: Path, key: str) -> Path:
    if not isinstance(ref, str) or not ref:
        raise ConfigError(f"{including_file}: {key}: expected a path, got {ref!r}")
    target = root / ref.lstrip("/") if ref.startswith("/") else including_file.parent / ref
    target = target.resolve()
    if not target.is_file():
        raise ConfigError(f"{including_file}: {key}: merged file {ref!r} not found (looked at {target})")
    return target


def deep_merge(base: Any, top: Any) -> Any:
    """Merge ``top`` onto ``base`` as Viash does: mappings by key, lists concatenated, else ``top``."""
    if isinstance(base, dict) and isinstance(top, dict):
        out = dict(base)
        for key, value in top.items():
            out[key] = deep_merge(base[key], value) if key in base else value
        return out
    if isinstance(base, list) and isinstance(top, list):
        return [*base, *top]
    return top


def resolve_merges(node: Any, file: Path, root: Path, *, key: str = "", _stack: tuple = ()) -> Any:
    """Return ``node`` with every ``__merge__`` (at any depth) resolved.

    Mappings that merged files remember them under a private key, so that an argument knows which
    ``file_*.yaml`` format it was built from.
    """
    if isinstance(node, list):
        return [resolve_merges(v, file, root, key=f"{key}[{i}]", _stack=_stack) for i, v in enumerate(node)]
    if not isinstance(node, dict):
        return node
    refs = node.get("__merge__")
    merged: Any = {}
    sources: list[str] = []
    if refs is not None:
        for ref in as_list(refs):
            target = _resolve_merge_path(ref, file, root, f"{key}.__merge__" if key else "__merge__")
            if target in _stack:
                chain = " -> ".join(str(p) for p in (*_stack, target))
                raise ConfigError(f"{file}: {key or '<root>'}: circular __merge__: {chain}")
            content = load_yaml(target)
            if content is None:
                content = {}
            if not isinstance(content, dict):
                raise ConfigError(f"{target}: a merged file must hold a mapping, got {type(content).__name__}")
            content = resolve_merges(content, target, root, _stack=(*_stack, target))
            sources.extend([str(target), *content.pop(_MERGED_FROM, [])])
            merged = deep_merge(merged, content)
    own = {
        k: resolve_merges(v, file, root, key=f"{key}.{k}" if key else str(k), _stack=_stack)
        for k, v in node.items()
        if k != "__merge__"
    }
    out = deep_merge(merged, own)
    if sources:
        out[_MERGED_FROM] = sources
    return out


def _strip_private(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_private(v) for k, v in node.items() if k != _MERGED_FROM}
    if isinstance(node, list):
        return [_strip_private(v) for v in node]
    return node


@dataclasses.dataclass
class Argument:
    """One argument of a component.

    Attributes
    ----------
    name
        The name without leading dashes (``input_train`` for ``--input_train``).
    type
        Viash argument type (``file``, ``string``, ``integer``, ``double``, ``boolean``...).
    direction
        ``input`` or ``output`` (only meaningful for files).
    format_id
        For a file argument built from ``api/file_*.yaml``: that file's stem (``file_train``).
    file_format
        The parsed format of that file, used to validate what the argument points to.
    """

    name: str
    type: str
    direction: str = "input"
    required: bool = False
    default: Any = None
    multiple: bool = False
    description: str = ""
    example: Any = None
    choices: list | None = None
    format_id: str | None = None
    file_format: FileFormat | None = None
    group: str | None = None

    @property
    def is_file(self) -> bool:
        return self.type == "file"

    def coerce(self, value: Any, *, where: str) -> Any:
        """Convert ``value`` (e.g. a command-line string) to this argument's type."""
        if value is None:
            return None
        if self.multiple and isinstance(value, (list, tuple)):
            return [self.coerce(v, where=where) for v in value]
        kind = ARGUMENT_TYPES.get(self.type)
        try:
            if kind is bool and isinstance(value, str):
                if value.lower() not in {"true", "false", "yes", "no", "1", "0"}:
                    raise ValueError(value)
                out: Any = value.lower() in {"true", "yes", "1"}
            elif kind is int and isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            else:
                out = kind(value) if kind is not None else value
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: --{self.name}: expected {self.type}, got {value!r}") from None
        if self.choices is not None and out not in self.choices:
            raise ConfigError(f"{where}: --{self.name}: {out!r} is not one of {self.choices}")
        return out


def _parse_argument(raw: Any, file: Path, key: str, group: str | None) -> Argument:
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: {key}: an argument must be a mapping, got {raw!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not name.lstrip("-"):
        raise ConfigError(f"{file}: {key}.name: every argument needs a name like --input")
    arg_type = raw.get("type", "string")
    if arg_type not in ARGUMENT_TYPES:
        raise ConfigError(f"{file}: {key} ({name}).type: unknown type {arg_type!r}; expected one of {sorted(ARGUMENT_TYPES)}")
    direction = raw.get("direction", "input")
    if direction not in ("input", "output"):
        raise ConfigError(f"{file}: {key} ({name}).direction: expected input or output, got {direction!r}")
    format_id = None
    file_format = None
    sources = [Path(s) for s in raw.get(_MERGED_FROM, [])]
    format_files = [s for s in sources if s.stem.startswith("file_")]
    if format_files:
        format_id = format_files[0].stem
        fmt = (raw.get("info") or {}).get("format")
        if fmt is not None:
            file_format = FileFormat.from_spec(fmt, source=f"{format_files[0]}: info.format", format_id=format_id)
    default = raw.get("default")
    arg = Argument(name=name.lstrip("-"), type=arg_type, direction=direction, required=bool(raw.get("required", False)),
                   default=default, multiple=bool(raw.get("multiple", False)),
                   description=str(raw.get("description") or raw.get("summary") or ""), example=raw.get("example"),
                   choices=raw.get("choices"), format_id=format_id, file_format=file_format, group=group)
    if default is not None:
        arg.default = arg.coerce(default, where=f"{file}: {key} ({name}).default")
    return arg


@dataclasses.dataclass
class ComponentConfig:
    """A component, as its merged ``config.vsh.yaml`` describes it.

    Use :func:`read_config` to create one.
    """

    path: Path
    root: Path
    data: dict
    arguments: list[Argument]

    # --- identity -------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.data["name"]

    @property
    def namespace(self) -> str | None:
        return self.data.get("namespace")

    @property
    def info(self) -> dict:
        return self.data.get("info") or {}

    @property
    def type(self) -> str:
        """``info.type``: dataset, control_method, method or metric."""
        return self.info.get("type", "")

    @property
    def control(self) -> str | None:
        """``info.control`` of a control method: one of :data:`CONTROL_ROLES`."""
        return self.info.get("control")

    @property
    def games(self) -> list[str] | None:
        """``info.games`` of an adversarial control: the metric ids it is built to game.

        Its scores count towards the gameability of those metrics only; ``None`` (not declared)
        means every metric.

        Raises
        ------
        ConfigError
            When ``info.games`` is not a non-empty list of metric ids.
        """
        games = self.info.get("games")
        if games is None:
            return None
        if not isinstance(games, list) or not games or not all(isinstance(g, str) and g for g in games):
            raise ConfigError(f"{self.path}: info.games: expected a non-empty list of metric ids, got {games!r}")
        return list(games)

    @property
    def seeds(self) -> list[int]:
        """Seed replicates ``0..n-1`` of ``info.seeds: n``; empty for a component run once.

        A seeded component is run once per seed with ``--seed k`` and its metric values are averaged
        over the seeds, so that a random control does not rest on one lucky draw.

        Raises
        ------
        ConfigError
            When ``info.seeds`` is not an integer between 1 and :data:`MAX_SEEDS`.
        """
        n = self.info.get("seeds")
        if n is None:
            return []
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SEEDS:
            raise ConfigError(f"{self.path}: info.seeds: expected an integer from 1 to {MAX_SEEDS} (the number of seed "
                              f"replicates), got {n!r}")
        return list(range(n))

    @property
    def dataset_entries(self) -> list[dict[str, Any]]:
        """``info.datasets`` of a dataset component: the datasets it makes, each ``{id: ..., <argument>: <value>}``.

        Raises
        ------
        ConfigError
            When ``info.datasets`` is not a list, an entry has no string ``id``, or its ``large``
            is not a boolean.
        """
        entries = self._entries("datasets")
        for i, entry in enumerate(entries):
            if not isinstance(entry.get("large", False), bool):
                raise ConfigError(f"{self.path}: info.datasets[{i}].large must be true or false")
            if not isinstance(entry.get("build", ""), str):
                raise ConfigError(f"{self.path}: info.datasets[{i}].build must name a build (an info.builds id)")
        return entries

    @property
    def build_entries(self) -> list[dict[str, Any]]:
        """``info.builds`` of a dataset component: the sources it builds once, each ``{id: ..., <argument>: <value>}``.

        A dataset entry with ``build: <id>`` is cut from that build: its job reads the build's
        outputs and runs after it (``docs/plan_json.md``).

        Raises
        ------
        ConfigError
            When ``info.builds`` is not a list or an entry has no string ``id``.
        """
        return self._entries("builds")

    def _entries(self, key: str) -> list[dict[str, Any]]:
        """``info.<key>``: a list of ``{id: ..., <argument>: <value>}``, or an error naming the entry."""
        entries = self.info.get(key) or []
        if not isinstance(entries, list):
            raise ConfigError(f"{self.path}: info.{key} must be a list of {{id: ..., <argument>: <value>}}")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                raise ConfigError(f"{self.path}: info.{key}[{i}] needs an id")
        return entries

    @property
    def label(self) -> str:
        return self.data.get("label") or self.name

    @property
    def summary(self) -> str:
        return self.data.get("summary") or ""

    @property
    def description(self) -> str:
        return self.data.get("description") or ""

    @cached_property
    def task_dir(self) -> Path | None:
        """``src/<task>`` when the component lives in a task folder.

        Looked up once per config (every resource path and job asks for it; a config is not moved once read).
        """
        for folder in self.path.parents:
            if (folder / "api").is_dir():
                return folder
        return None

    # --- arguments ------------------------------------------------------------------------------
    def argument(self, name: str) -> Argument:
        for arg in self.arguments:
            if arg.name == name.lstrip("-"):
                return arg
        raise ConfigError(f"{self.path}: no argument --{name.lstrip('-')}; known: {[a.name for a in self.arguments]}")

    @property
    def file_inputs(self) -> list[Argument]:
        return [a for a in self.arguments if a.is_file and a.direction == "input"]

    @property
    def file_outputs(self) -> list[Argument]:
        return [a for a in self.arguments if a.is_file and a.direction == "output"]

    @property
    def parameters(self) -> list[Argument]:
        """Arguments that are not files (hyperparameters, seeds, flags)."""
        return [a for a in self.arguments if not a.is_file]

    def test_defaults(self) -> dict[str, Any]:
        """``info.test_default``: parameter values for component tests (e.g. fewer epochs)."""
        values = self.info.get("test_default") or {}
        if not isinstance(values, dict):
            raise ConfigError(f"{self.path}: info.test_default must be a mapping of argument -> value")
        return {k: self.argument(k).coerce(v, where=f"{self.path}: info.test_default") for k, v in values.items()}

    # --- resources, engines, runners -----------------------------------------------------------------------
    @property
    def resources(self) -> list[dict]:
        return self.data.get("resources") or []

    @property
    def engines(self) -> list[dict]:
        return self.data.get("engines") or []

    @property
    def runners(self) -> list[dict]:
        return self.data.get("runners") or []

    @cached_property
    def script(self) -> Path:
        """The main script: the first resource of a script type."""
        if self._script_resource is None:
            raise ConfigError(f"{self.path}: resources: no script resource (e.g. {{type: python_script, path: script.py}})")
        return self.resource_path(self._script_resource)

    @property
    def script_type(self) -> str:
        return self._script_resource["type"] if self._script_resource is not None else ""

    @property
    def _script_resource(self) -> dict | None:
        return next((r for r in self.resources if isinstance(r, dict) and str(r.get("type", "")).endswith("_script")), None)

    @cached_property
    def _resource_folders(self) -> tuple[Path, ...]:
        """Where resources may lie: the component's folder, and its task's library when it is in a task."""
        folders = [self.path.parent.resolve()]
        if self.task_dir is not None:
            folders.append((self.task_dir / f"{self.task_dir.name}_lib").resolve())
        return tuple(folders)

    def resource_path(self, res: dict) -> Path:
        """Absolute path of a resource entry (``/`` = project root, else next to the config).

        A resource lies inside the component's folder or inside its task's library
        (``src/<task>/<task>_lib``); anything else (``../`` climbing out, another task's files,
        the test resources, system files) is an error naming the config and the path.
        """
        ref = res.get("path") if isinstance(res, dict) else None
        if not isinstance(ref, str) or not ref:
            raise ConfigError(f"{self.path}: resources: entry without a path: {res!r}")
        resolved = ((self.root / ref.lstrip("/")) if ref.startswith("/") else (self.path.parent / ref)).resolve()
        allowed = self._resource_folders
        if not any(resolved == a or resolved.is_relative_to(a) for a in allowed):
            raise ConfigError(f"{self.path}: resources: {ref!r} resolves to {resolved}, outside the component's folder "
                              f"and its task library ({self.task_dir.name + '_lib' if self.task_dir else 'none'})")
        return resolved

    @property
    def labels(self) -> list[str]:
        """Resource labels of the nextflow runner (``directives.label``)."""
        for runner in self.runners:
            if runner.get("type") == "nextflow":
                label = (runner.get("directives") or {}).get("label") or []
                return [label] if isinstance(label, str) else list(label)
        return []

    @property
    def metrics(self) -> list[dict]:
        """``info.metrics`` of a metric component."""
        return self.info.get("metrics") or []

    def public_dict(self) -> dict:
        """The merged config as Viash would show it (private bookkeeping removed)."""
        return _strip_private(self.data)

    @cached_property
    def public_yaml(self) -> str:
        """:meth:`public_dict` as YAML in its own key order: the ``.config.vsh.yaml`` beside a job's script.

        Dumped once per config, not once per job (a config is not changed once read).
        """
        return yaml.safe_dump(self.public_dict(), sort_keys=False, allow_unicode=True)


def collect_arguments(data: dict, file: Path) -> list[Argument]:
    """The arguments of a merged config: ``arguments`` and those of every ``argument_groups`` entry."""
    args: list[Argument] = []
    for i, raw in enumerate(data.get("arguments") or []):
        args.append(_parse_argument(raw, file, f"arguments[{i}]", None))
    groups = data.get("argument_groups") or []
    if not isinstance(groups, list):
        raise ConfigError(f"{file}: argument_groups must be a list")
    for g, group in enumerate(groups):
        if not isinstance(group, dict) or "name" not in group:
            raise ConfigError(f"{file}: argument_groups[{g}]: each group needs a name and arguments")
        for i, raw in enumerate(group.get("arguments") or []):
            args.append(_parse_argument(raw, file, f"argument_groups[{g}].arguments[{i}]", group["name"]))
    dupes = [n for n, c in Counter(a.name for a in args).items() if c > 1]
    if dupes:
        raise ConfigError(f"{file}: arguments: defined more than once: {', '.join('--' + d for d in dupes)}")
    return args


def read_config(path: str | Path) -> ComponentConfig:
    """Read a ``config.vsh.yaml``, resolving ``__merge__`` and parsing its arguments.

    Parameters
    ----------
    path
        The component's ``config.vsh.yaml``.

    Returns
    -------
    The merged component config.

    Raises
    ------
    ConfigError
        With the file and key, when the YAML is invalid, a merged file is missing, a required key
        (``name``) is absent or an argument is malformed.
    """
    path = Path(path).resolve()
    root = find_project_root(path)
    raw = load_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a config must be a mapping, got {type(raw).__name__}")
    data = resolve_merges(raw, path, root)
    data.pop(_MERGED_FROM, None)
    if not isinstance(data.get("name"), str) or not data["name"]:
        raise ConfigError(f"{path}: name: every component needs a name")
    if not NAME_PATTERN.fullmatch(data["name"]):
        raise ConfigError(f"{path}: name: {data['name']!r} must match {NAME_PATTERN.pattern} (it becomes a folder name)")
    info = data.get("info") or {}
    if not isinstance(info, dict):
        raise ConfigError(f"{path}: info must be a mapping")
    if info.get("type") and info["type"] not in COMPONENT_TYPES:
        raise ConfigError(f"{path}: info.type: {info['type']!r} is not one of {COMPONENT_TYPES}")
    config = ComponentConfig(path=path, root=root, data=data, arguments=collect_arguments(data, path))
    for res in config.resources:
        config.resource_path(res)  # raises for a resource outside the component and its task library
    return config
