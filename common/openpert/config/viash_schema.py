"""Validation of component configs and ``_viash.yaml`` against Viash's published JSON schemas.

Viash decodes configs strictly: a key its schema does not know is an error in ``viash build``, not
a warning. The harness reads configs more leniently, so this check is what keeps them valid Viash.
The schemas (``config.schema.json`` and ``package.schema.json`` of one Viash release, as
``viash export json_schema`` writes them) are not part of the repository; they are read from
``$OPENPERT_VIASH_SCHEMAS``, else ``<project>/../shared/viash_schemas/`` where that holds them, else
the user's cache (``$XDG_CACHE_HOME/openpert/viash_schemas``). Where they are missing they are
downloaded on first use from Viash's schema repository (pinned, checked against the checksums
below, as ``scripts/fetch_viash_schemas.sh`` does); when that fails, the error says the command that
fetches them. Validation never skips silently.

Errors name the file and line of the offending key: a merged config's key is looked up in the
component's own file first, then in the files it merges.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.request
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from openpert.config.project import project_file
from openpert.config.viash import ComponentConfig, ConfigError

#: The Viash release whose schemas the project is checked against.
VIASH_SCHEMA_VERSION = "0.9.4"
#: ``package.schema.json`` refers to the config schema by this public address.
_CONFIG_SCHEMA_URL = ("https://raw.githubusercontent.com/viash-io/viash-schemas/refs/heads/main/json_schemas/"
                      f"{VIASH_SCHEMA_VERSION}/config.schema.json")


#: Where the schemas are downloaded from (a pinned commit of viash-io/viash-schemas); the
#: environment variable ``VIASH_SCHEMAS_URL`` overrides it, for ``scripts/fetch_viash_schemas.sh`` too.
SCHEMA_SOURCE = "https://raw.githubusercontent.com/viash-io/viash-schemas/8d0519c/json_schemas"
#: SHA-256 of each schema file of :data:`VIASH_SCHEMA_VERSION`; a download that differs is refused.
SCHEMA_SHA256 = {
    "config.schema.json": "36ae2050cf60505703231b754a86ca725639821a3f405595ab0144ea02055106",
    "package.schema.json": "9d523becaa6c6fae3bfe5d299191c5359e68ef5e6e30b3fca7016371aa7a7250",
}
#: Seconds a schema download may take before it counts as failed.
DOWNLOAD_TIMEOUT_S = 30
#: Folders whose download failed in this process, with the reason: one attempt per process, so that
#: linting a hundred components offline costs one timeout, not a hundred.
_failed_downloads: dict[str, str] = {}


def schema_dir(root: str | Path) -> Path:
    """Where the schemas of :data:`VIASH_SCHEMA_VERSION` are read from (it may not exist yet).

    ``$OPENPERT_VIASH_SCHEMAS``, else the project's ``../shared/viash_schemas`` when it holds this
    version, else the user's cache, where :func:`ensure_schemas` downloads them.
    """
    env = os.environ.get("OPENPERT_VIASH_SCHEMAS")
    if env:
        return Path(env) / VIASH_SCHEMA_VERSION
    shared = Path(root).resolve().parent / "shared" / "viash_schemas" / VIASH_SCHEMA_VERSION
    if shared.is_dir():
        return shared
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "openpert" / "viash_schemas" / VIASH_SCHEMA_VERSION


def _has_schemas(folder: Path) -> bool:
    return all((folder / name).is_file() for name in SCHEMA_SHA256)


def fetch_schemas(folder: Path, *, base_url: str | None = None, timeout: float = DOWNLOAD_TIMEOUT_S) -> Path:
    """Download the schemas of :data:`VIASH_SCHEMA_VERSION` into ``folder`` and check their checksums.

    Parameters
    ----------
    folder
        Where ``config.schema.json`` and ``package.schema.json`` go (created if needed).
    base_url
        Holds ``<version>/<file>``; default ``$VIASH_SCHEMAS_URL``, else :data:`SCHEMA_SOURCE`.
    timeout
        Seconds each download may take.

    Returns
    -------
    Path
        ``folder``.

    Raises
    ------
    ConfigError
        When a file cannot be downloaded or its SHA-256 is not the pinned one; nothing partial is left.
    """
    base = (base_url or os.environ.get("VIASH_SCHEMAS_URL") or SCHEMA_SOURCE).rstrip("/")
    folder.mkdir(parents=True, exist_ok=True)
    for name, expected in SCHEMA_SHA256.items():
        url = f"{base}/{VIASH_SCHEMA_VERSION}/{name}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                content = response.read()
        except (OSError, ValueError) as err:  # URLError and timeouts are OSErrors; a malformed URL a ValueError
            raise ConfigError(f"{url}: could not download the Viash schema: {err}") from err
        got = hashlib.sha256(content).hexdigest()
        if got != expected:
            raise ConfigError(f"{url}: has sha256 {got}, expected {expected}; refusing it")
        partial = folder / f".{name}.partial"
        partial.write_bytes(content)
        os.replace(partial, folder / name)
    return folder


def ensure_schemas(root: str | Path) -> Path:
    """The folder holding the schemas for project ``root``, downloading them there if missing.

    Raises
    ------
    ConfigError
        When they are missing and cannot be downloaded: the message gives the reason and the command
        that fetches them (and how to point the harness at a copy).
    """
    folder = schema_dir(root)
    if _has_schemas(folder):
        return folder
    if str(folder) not in _failed_downloads:
        try:
            fetch_schemas(folder)
            return folder
        except (ConfigError, OSError) as err:
            _failed_downloads[str(folder)] = str(err)
    raise ConfigError(
        f"{folder}: Viash {VIASH_SCHEMA_VERSION} JSON schemas not found, and downloading them failed "
        f"({_failed_downloads[str(folder)]}). Fetch them with `bash scripts/fetch_viash_schemas.sh {folder.parent}`, "
        "or set OPENPERT_VIASH_SCHEMAS to the folder holding "
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


def _validators_for(root: str | Path):
    return _validators(str(ensure_schemas(root)))


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
    config_validator, _ = _validators_for(config.root)
    errors = _deepest(config_validator.iter_errors(config.public_dict()))
    files = _merged_files(config)
    return sorted({_describe(e, files) for e in errors})


def validate_project_file(root: str | Path) -> list[str]:
    """Problems of ``_viash.yaml`` under Viash's package schema (empty when valid)."""
    path = Path(root) / "_viash.yaml"
    _, package_validator = _validators_for(root)
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

