"""Validation of component configs and ``_viash.yaml`` against Viash's published JSON schemas.

Viash decodes configs strictly: a key its schema does not know is an error in ``viash build``, not
a warning. The harness reads configs more leniently, so this check is what keeps them valid Viash.
The schemas (``config.schema.json`` and ``package.schema.json`` of one Viash release, as
``viash export json_schema`` writes them) are not part of the repository: the project's data
manifest (``common/api/data_manifest.yaml``) pins them, and the data store fetches them like any
public file (``openpert data fetch --project``; from ``../shared/viash_schemas`` where it exists).
``$OPENPERT_VIASH_SCHEMAS`` names a folder that holds them instead. Validation never skips
silently: when they cannot be had, the error says why and how to fetch them.

Errors name the file and line of the offending key: a merged config's key is looked up in the
component's own file first, then in the files it merges.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from openpert.config.project import project_file
from openpert.config.viash import ComponentConfig, ConfigError

#: The Viash release whose schemas the project is checked against.
VIASH_SCHEMA_VERSION = "0.9.4"
#: Where the schemas of :data:`VIASH_SCHEMA_VERSION` live in the data store (and in ``../shared``).
SCHEMA_STORE_FOLDER = f"viash_schemas/{VIASH_SCHEMA_VERSION}"
SCHEMA_FILES = ("config.schema.json", "package.schema.json")
#: ``package.schema.json`` refers to the config schema by this public address.
_CONFIG_SCHEMA_URL = ("https://raw.githubusercontent.com/viash-io/viash-schemas/refs/heads/main/json_schemas/"
                      f"{VIASH_SCHEMA_VERSION}/config.schema.json")
#: Store folders whose fetch failed in this process, with the reason: one attempt per process, so
#: that linting a hundred components offline costs one failed fetch, not a hundred.
_failed_fetches: dict[str, str] = {}


def schema_dir(root: str | Path) -> Path:
    """Where the schemas of :data:`VIASH_SCHEMA_VERSION` are read from (it may not exist yet).

    ``$OPENPERT_VIASH_SCHEMAS/<version>``, else their folder in the data store, where
    :func:`ensure_schemas` fetches them. ``root`` is the project (kept for the callers' symmetry
    with :func:`ensure_schemas`, whose local mirror it locates).
    """
    from openpert.data.store import DataStore, default_store_dir

    env = os.environ.get("OPENPERT_VIASH_SCHEMAS")
    if env:
        return Path(env) / VIASH_SCHEMA_VERSION
    return DataStore(default_store_dir()).path_of(SCHEMA_STORE_FOLDER)


def ensure_schemas(root: str | Path) -> Path:
    """The folder holding the schemas for project ``root``, fetched into the data store if missing.

    Raises
    ------
    ConfigError
        When ``$OPENPERT_VIASH_SCHEMAS`` lacks them, or the store cannot fetch them: the message
        gives the reason and the command that fetches them.
    """
    from openpert.data.fetching import FetchError, fetch, sources_from_environment
    from openpert.data.manifest import project_manifest
    from openpert.data.store import DataStore, default_store_dir

    folder = schema_dir(root)
    if os.environ.get("OPENPERT_VIASH_SCHEMAS"):
        missing = [name for name in SCHEMA_FILES if not (folder / name).is_file()]
        if missing:
            raise ConfigError(f"{folder}: lacks {', '.join(missing)} ($OPENPERT_VIASH_SCHEMAS names {folder.parent}); "
                              "unset it to use the data store (`openpert data fetch --project`)")
        return folder
    if all((folder / name).is_file() for name in SCHEMA_FILES):
        return folder  # the store installs a file only once verified
    if str(folder) not in _failed_fetches:
        files = [f for f in project_manifest(root) if f.path.startswith(f"{SCHEMA_STORE_FOLDER}/")]
        if sorted(Path(f.path).name for f in files) != sorted(SCHEMA_FILES):
            raise ConfigError(f"{Path(root) / 'common' / 'api' / 'data_manifest.yaml'}: must declare "
                              f"{', '.join(f'{SCHEMA_STORE_FOLDER}/{n}' for n in SCHEMA_FILES)}")
        try:
            fetch(files, DataStore(default_store_dir()), sources_from_environment(root))
            return folder
        except FetchError as err:
            _failed_fetches[str(folder)] = str(err)
    raise ConfigError(
        f"{folder}: Viash {VIASH_SCHEMA_VERSION} JSON schemas not in the data store, and fetching them failed "
        f"({_failed_fetches[str(folder)]}). Fetch them with `openpert data fetch --project` (with --mirror where "
        "GitHub cannot be reached), or set OPENPERT_VIASH_SCHEMAS to a folder holding "
        f"{VIASH_SCHEMA_VERSION}/config.schema.json and {VIASH_SCHEMA_VERSION}/package.schema.json")


@lru_cache(maxsize=4)
def _validators(folder: str):
    import jsonschema
    from referencing import Registry, Resource

    config_schema = json.loads((Path(folder) / "config.schema.json").read_text())
    package_schema = json.loads((Path(folder) / "package.schema.json").read_text())
    # The package schema points at the config schema by URL; serve the local copy under it, so
    # that validation never needs the network.
    registry = Registry().with_resource(_CONFIG_SCHEMA_URL, Resource.from_contents(config_schema))
    return (jsonschema.Draft7Validator(config_schema, registry=registry),
            jsonschema.Draft7Validator(package_schema, registry=registry))


def _deepest(errors: Iterable) -> list:
    """The most telling error of each failure.

    For ``anyOf``/``oneOf`` (an argument may be any of Viash's argument types), the branch that
    matched the value's ``type`` fails on what is really wrong, typically an unknown key; the other
    branches only say that ``type`` differs.
    """
    from jsonschema.exceptions import best_match

    def descendants(error):
        for sub in error.context or []:
            yield sub
            yield from descendants(sub)

    out = []
    for error in errors:
        nested = list(descendants(error))
        unknown = [e for e in nested if e.validator == "additionalProperties"]
        leaves = [e for e in nested if not e.context]
        out.append(unknown[0] if unknown else (best_match(leaves) if leaves else error))
    return out


def _unknown_keys(error) -> list[str]:
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set((error.schema or {}).get("properties", {}))
        return sorted(k for k in error.instance if k not in allowed)
    return []


def _locate(key: str, files: list[Path]) -> tuple[Path, int]:
    """File and line where ``key`` is written: as a YAML key if it is, else anywhere (a stray key
    made by an unquoted comma in a flow mapping has no colon); the first file when not found."""
    as_key = re.compile(rf"(^|[{{,\s]){re.escape(key)}\s*:")
    for pattern in (as_key, re.compile(re.escape(key))):
        for path in files:
            try:
                lines = path.read_text().splitlines()
            except OSError:
                continue
            for number, line in enumerate(lines, 1):
                if pattern.search(line):
                    return path, number
    return files[0], 1


def _merged_files(config: ComponentConfig) -> list[Path]:
    """The config file, then every file it merges (recursively), in the order they are named."""
    seen: list[Path] = []

    def visit(path: Path) -> None:
        if path in seen or not path.is_file():
            return
        seen.append(path)
        text = path.read_text()
        for ref in re.findall(r"__merge__:\s*['\"]?([^'\"\s,}]+)", text):
            visit((config.root / ref.lstrip("/")) if ref.startswith("/") else (path.parent / ref).resolve())

    visit(config.path)
    return seen


def _describe(error, config_files: list[Path]) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
    unknown = _unknown_keys(error)
    if unknown:
        path, line = _locate(unknown[0], config_files)
        return f"{path}:{line}: {where}: unknown key(s) {', '.join(map(repr, unknown))}; Viash refuses keys its schema does not know"
    key = next((str(p) for p in reversed(error.absolute_path) if isinstance(p, str)), None)
    path, line = _locate(key, config_files) if key else (config_files[0], 1)
    return f"{path}:{line}: {where}: {error.message[:300]}"


def validate_component(config: ComponentConfig) -> list[str]:
    """Problems of a merged component config under Viash's config schema (empty when valid)."""
    config_validator, _ = _validators(str(ensure_schemas(config.root)))
    errors = _deepest(config_validator.iter_errors(config.public_dict()))
    files = _merged_files(config)
    return sorted({_describe(e, files) for e in errors})


def validate_project_file(root: str | Path) -> list[str]:
    """Problems of ``_viash.yaml`` under Viash's package schema (empty when valid)."""
    path = Path(root) / "_viash.yaml"
    _, package_validator = _validators(str(ensure_schemas(root)))
    data = project_file(root)
    errors = _deepest(package_validator.iter_errors(data))
    return sorted({_describe(e, [path]) for e in errors})


def namespace_collisions(configs: Iterable[ComponentConfig]) -> list[str]:
    """Components sharing a ``namespace/name`` pair, which ``viash ns build`` refuses."""
    seen: dict[tuple[str, str], Path] = {}
    problems = []
    for config in configs:
        key = (config.namespace or "", config.name)
        if key in seen:
            problems.append(f"{config.path}: namespace/name {'/'.join(filter(None, key))} is also {seen[key]}; "
                            "viash ns build groups components by it")
        else:
            seen[key] = config.path
    return problems

