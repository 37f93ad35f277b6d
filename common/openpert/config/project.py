"""Where a project keeps what is not in its repository: the shared data folder (a pre-filled data store)."""

from __future__ import annotations

import copy
import functools
import os
from pathlib import Path
from typing import Any

from openpert.config.viash import PROJECT_FILE, ConfigError, load_yaml


def project_file(root: str | Path) -> dict[str, Any]:
    """The settings of the project at ``root``: its ``_viash.yaml`` as a mapping (a copy the caller may change).

    Parsed once per version of the file (its modification time and size): every component of a run
    asks for it.

    Raises
    ------
    ConfigError
        Naming the file, when it is missing, is not valid YAML or holds no mapping.
    """
    path = Path(root).resolve() / PROJECT_FILE
    try:
        stat = path.stat()
    except OSError:
        raise ConfigError(f"{path}: not found (the project's settings file)") from None
    return copy.deepcopy(_parsed(path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=16)
def _parsed(path: Path, _mtime_ns: int, _size: int) -> dict[str, Any]:
    data = load_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of project settings, got {type(data).__name__}")
    return data


def shared_data_dir(root: str | Path) -> Path:
    """The shared data folder of the project at ``root``.

    ``$OPENPERT_SHARED_DATA`` when set, else ``<root>/../shared/data``: it follows the project being
    run, never the place the package is installed from.
    """
    env = os.environ.get("OPENPERT_SHARED_DATA")
    if env:
        return Path(env).resolve()
    return (Path(root).resolve().parent / "shared" / "data").resolve()


#: A dataset component's file input of this name receives the project's shared data folder.
SHARED_DATA_ARGUMENT = "shared_data"


def data_folder(root: str | Path) -> Path | None:
    """The folder of public data a component run by hand (or its test) reads, or ``None``.

    The shared data folder when it exists, else the data store when ``openpert data fetch`` has
    filled it (both have the same layout). The benchmark does not use this: it fetches what its
    datasets declare and gives each dataset job a view of its own files.
    """
    from openpert.data.store import default_store_dir

    for folder in (shared_data_dir(root), default_store_dir()):
        if folder.is_dir():
            return folder
    return None


def shared_data_input(config, root: str | Path) -> dict[str, Path]:
    """``{"shared_data": <folder>}`` for a component that declares that input, else ``{}``.

    A dataset loader that reads the project's public data declares a file input ``--shared_data``;
    the component tests and ``openpert run-component`` pass :func:`data_folder` explicitly, so that
    no script looks for it on its own. No folder is passed as nothing: the component decides
    whether it can do without (and says so) or fails naming what it needed.
    """
    if SHARED_DATA_ARGUMENT not in {a.name for a in config.file_inputs}:
        return {}
    folder = data_folder(root)
    return {SHARED_DATA_ARGUMENT: folder} if folder is not None else {}
