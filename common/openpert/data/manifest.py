"""A task's data manifest (``api/data_manifest.yaml``): every public file its dataset loaders read.

An entry names where the file lives in the store (``path``), its pinned origin (``url``) or the
originals it is derived from (``derive``), its sha256 and size (``null`` when they could not be
known before a first download), licence and citation. ``docs/data.md`` is the format's reference.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from openpert.config.viash import ConfigError, load_yaml

#: The file name of a task's manifest, in its ``api/`` folder.
MANIFEST_NAME = "data_manifest.yaml"

_SHA256 = re.compile(r"[0-9a-f]{64}")
_FUNCTION = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
#: URLs whose content cannot change under the same name: a git commit, a Dataverse file id, a release asset.
_PINNED_URLS = (
    re.compile(r"https://raw\.githubusercontent\.com/[^/]+/[^/]+/[0-9a-f]{40}/.+"),
    re.compile(r"https://github\.com/[^/]+/[^/]+/raw/[0-9a-f]{40}/.+"),
    re.compile(r"https://github\.com/[^/]+/[^/]+/releases/download/[^/]+/.+"),
    re.compile(r"https://dataverse\.[^/]+/api/access/datafile/\d+"),
)
_ENTRY_KEYS = {"path", "url", "sha256", "size", "license", "non_commercial", "citation", "source", "datasets", "derive"}
_SOURCE_KEYS = {"name", "path", "url", "sha256", "size"}


@dataclass(frozen=True)
class Download:
    """A file fetched as it is: its place in the store, its pinned URL and its checksum (``None``: unpinned)."""

    path: str
    url: str
    sha256: str | None
    size: int | None

    @property
    def pinned(self) -> bool:
        """Whether the checksum was known before any download."""
        return self.sha256 is not None


@dataclass(frozen=True)
class Derivation:
    """How a file is made from downloaded originals: ``function(sources, output, **args)``."""

    function: str
    sources: tuple[tuple[str, Download], ...]
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DataFile:
    """One entry of a manifest.

    Attributes
    ----------
    path
        Where the file lives in the store (and in any mirror).
    url
        Its pinned origin; ``None`` for a derived file.
    sha256, size
        Its checksum and size in bytes; ``None`` when not known before a first download.
    license, non_commercial, citation, source
        Terms of use, whether they forbid commercial use, what to cite, and a readable origin.
    datasets
        The dataset ids that read it (``None``: every dataset of the task).
    derive
        How it is made from originals, for a file that was never published as it is.
    manifest
        The manifest that declares it (for messages).
    """

    path: str
    url: str | None
    sha256: str | None
    size: int | None
    license: str
    non_commercial: bool
    citation: str
    source: str
    datasets: tuple[str, ...] | None
    derive: Derivation | None
    manifest: Path

    @property
    def pinned(self) -> bool:
        """Whether the file's checksum was known before any download (for a derived file: its own)."""
        return self.sha256 is not None

    @property
    def download(self) -> Download | None:
        """The file as a download from its ``url`` (``None`` for a derived file)."""
        return None if self.url is None else Download(self.path, self.url, self.sha256, self.size)

    def read_by(self, dataset_id: str) -> bool:
        """Whether the dataset ``dataset_id`` reads this file."""
        return self.datasets is None or dataset_id in self.datasets

    def identity(self) -> tuple:
        """What two manifests declaring the same path must agree on."""
        return (self.url, self.sha256, self.size, self.derive)


def _store_path(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: path must be a relative path in the store, got {value!r}")
    posix = PurePosixPath(value)
    if "\\" in value or posix.is_absolute() or any(part in ("", ".", "..") for part in value.split("/")) \
            or posix.parts[0].startswith("."):
        raise ConfigError(f"{where}: path {value!r} must be relative, with '/' between names, no '..' and no hidden first folder")
    return value


def _checksum(entry: dict, where: str) -> tuple[str | None, int | None]:
    sha, size = entry.get("sha256"), entry.get("size")
    if sha is not None and (not isinstance(sha, str) or not _SHA256.fullmatch(sha)):
        raise ConfigError(f"{where}: sha256 must be 64 lowercase hex digits or null, got {sha!r}")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise ConfigError(f"{where}: size must be a number of bytes or null, got {size!r}")
    if (sha is None) != (size is None):
        raise ConfigError(f"{where}: sha256 and size are known together or not at all (null)")
    return sha, size


def url_problem(url: Any) -> str | None:
    """Why ``url`` cannot serve as a file's origin, or ``None``.

    A URL must be ``https``; on a host that can pin it (a git commit, a release asset, a Dataverse
    file id) it must be pinned. Elsewhere (a bucket) the sha256 pins the content; a file this
    project could not download to checksum it has ``sha256: null`` and its first fetch records the
    sum (:meth:`openpert.data.store.DataStore.observed`), which every later fetch must match.
    """
    if not isinstance(url, str) or not url.startswith("https://"):
        return f"url must be an https:// URL, got {url!r}"
    pinnable = re.match(r"https://(raw\.githubusercontent\.com|github\.com)/", url) or "/api/access/datafile/" in url
    if pinnable and not any(p.fullmatch(url) for p in _PINNED_URLS):
        return f"url {url!r} is not pinned: name the 40-hex commit (not a branch), the release or the Dataverse file id"
    return None


def _download(entry: Any, where: str, *, key: str = "path") -> Download:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping, got {entry!r}")
    unknown = sorted(set(entry) - _SOURCE_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_SOURCE_KEYS))}")
    path = _store_path(entry.get(key), where)
    sha, size = _checksum(entry, where)
    problem = url_problem(entry.get("url"))
    if problem:
        raise ConfigError(f"{where}: {problem}")
    return Download(path, entry["url"], sha, size)


def _derivation(spec: Any, where: str) -> Derivation:
    if not isinstance(spec, dict) or set(spec) - {"function", "args", "from"}:
        raise ConfigError(f"{where}: derive must be a mapping of function, from and optional args")
    function = spec.get("function")
    if not isinstance(function, str) or not _FUNCTION.fullmatch(function):
        raise ConfigError(f"{where}: derive.function must be 'module:function', got {function!r}")
    args = spec.get("args") or {}
    if not isinstance(args, dict):
        raise ConfigError(f"{where}: derive.args must be a mapping, got {args!r}")
    originals = spec.get("from")
    if not isinstance(originals, list) or not originals:
        raise ConfigError(f"{where}: derive.from must list the originals (name, path, url, sha256, size)")
    sources = []
    for i, original in enumerate(originals):
        name = original.get("name") if isinstance(original, dict) else None
        if not isinstance(name, str) or not name.isidentifier():
            raise ConfigError(f"{where}: derive.from[{i}] needs a name (an identifier), got {name!r}")
        sources.append((name, _download({k: v for k, v in original.items() if k != "name"}, f"{where}: derive.from[{i}]")))
    if len({n for n, _ in sources}) != len(sources):
        raise ConfigError(f"{where}: derive.from names must differ")
    return Derivation(function, tuple(sources), dict(args))


def _text(entry: dict, key: str, where: str, *, required: bool = True) -> str:
    value = entry.get(key, "" if not required else None)
    if not isinstance(value, str) or (required and not value.strip()):
        raise ConfigError(f"{where}: {key} must be {'non-empty ' if required else ''}text, got {value!r}")
    return value.strip()


def _entry(entry: Any, where: str, manifest: Path) -> DataFile:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping, got {entry!r}")
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_ENTRY_KEYS))}")
    path = _store_path(entry.get("path"), where)
    where = f"{where} ({path})"
    sha, size = _checksum(entry, where)
    derive = _derivation(entry["derive"], where) if "derive" in entry else None
    url = entry.get("url")
    if derive is not None and url is not None:
        raise ConfigError(f"{where}: a derived file has no url of its own (its originals have)")
    if derive is None:
        problem = url_problem(url)
        if problem:
            raise ConfigError(f"{where}: {problem}")
    datasets = entry.get("datasets")
    if datasets is not None and (not isinstance(datasets, list) or not datasets
                                 or not all(isinstance(d, str) and d for d in datasets)):
        raise ConfigError(f"{where}: datasets must be a non-empty list of dataset ids, got {datasets!r}")
    non_commercial = entry.get("non_commercial", False)
    if not isinstance(non_commercial, bool):
        raise ConfigError(f"{where}: non_commercial must be true or false, got {non_commercial!r}")
    return DataFile(path=path, url=url, sha256=sha, size=size, license=_text(entry, "license", where),
                    non_commercial=non_commercial, citation=_text(entry, "citation", where),
                    source=_text(entry, "source", where, required=False),
                    datasets=tuple(datasets) if datasets is not None else None, derive=derive, manifest=manifest)


def read_manifest(path: str | Path) -> list[DataFile]:
    """Read and check one manifest.

    Parameters
    ----------
    path
        The ``data_manifest.yaml`` file.

    Returns
    -------
    Its entries, in file order.

    Raises
    ------
    ConfigError
        Naming the file, the entry and what is wrong.
    """
    path = Path(path)
    doc = load_yaml(path)
    if not isinstance(doc, dict) or set(doc) != {"files"} or not isinstance(doc["files"], list):
        raise ConfigError(f"{path}: a data manifest is a mapping with one key, files: a list of entries")
    files = [_entry(e, f"{path}: files[{i}]", path) for i, e in enumerate(doc["files"])]
    seen: set[str] = set()
    for f in files:
        if f.path in seen:
            raise ConfigError(f"{path}: {f.path} is declared twice")
        seen.add(f.path)
    return files


def task_manifest(task_dir: str | Path) -> list[DataFile]:
    """The entries of a task's manifest (``[]`` for a task that reads no public file)."""
    path = Path(task_dir) / "api" / MANIFEST_NAME
    return read_manifest(path) if path.is_file() else []


def project_manifest(root: str | Path) -> list[DataFile]:
    """The entries of the project's own manifest, ``common/api/data_manifest.yaml``: files the harness reads."""
    return task_manifest(Path(root) / "common")


def merge_manifests(manifests: Iterable[Sequence[DataFile]]) -> list[DataFile]:
    """One entry per store path across tasks; tasks that read the same file must declare it alike.

    Raises
    ------
    ConfigError
        When two manifests declare one path with another url, checksum, size or derivation.
    """
    by_path: dict[str, DataFile] = {}
    for files in manifests:
        for f in files:
            other = by_path.setdefault(f.path, f)
            if other.identity() != f.identity():
                raise ConfigError(f"{f.path} is declared differently by {other.manifest} and {f.manifest} "
                                  "(url, sha256, size or derive): one file has one origin")
    return sorted(by_path.values(), key=lambda f: f.path)
