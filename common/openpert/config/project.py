"""Where a project keeps what is not in its repository: the shared data folder."""

from __future__ import annotations

import os
from pathlib import Path


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


def shared_data_input(config, root: str | Path) -> dict[str, Path]:
    """``{"shared_data": <folder>}`` for a component that declares that input, else ``{}``.

    A dataset loader that reads the project's public data declares a file input ``--shared_data``;
    the engines and the component tests pass the folder explicitly, so that no script looks for it
    on its own. A missing folder is passed as nothing: the component decides whether it can do
    without (and says so) or fails naming what it needed.
    """
    if SHARED_DATA_ARGUMENT not in {a.name for a in config.file_inputs}:
        return {}
    folder = shared_data_dir(root)
    return {SHARED_DATA_ARGUMENT: folder} if folder.is_dir() else {}
