"""Identical files of image environments stored once, as hard links, the way images share their layers.

The image environments of a project repeat one another: ``ml`` holds every file of ``core`` and
adds torch, ``text`` holds every file of ``ml``, and an overlay holds every file of its base. Built
apart, they take about five times the disk of what they hold that differs. Once an environment is
built, :func:`share_identical_files` replaces each of its files whose content equals the file at
the same place in a finished environment by a hard link to that file.

This is safe because nothing edits a file of a finished environment in place: pip removes a file
and writes a new one, Python writes bytecode through a rename, and jobs see environments
read-only. Removing an environment (a rebuild, :func:`~openpert.images.environments.prune_envs`)
only drops its links; the files live on in the environments that share them.

A module's bytecode (``__pycache__/<module>.<tag>.pyc``) records its source's modification time,
and a hard link carries the modification time of the file it links to. So a source file is linked
only together with its bytecode, and the bytecode is never linked alone: every source keeps
bytecode that matches it, and Python never compiles it again.
"""

from __future__ import annotations

import dataclasses
import errno
import filecmp
import os
import stat
from collections.abc import Iterable
from pathlib import Path

#: The reasons ``os.link`` fails for a whole file system, not one file: then nothing is shared.
CANNOT_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP}


@dataclasses.dataclass(frozen=True)
class Shared:
    """What :func:`share_identical_files` linked.

    Attributes
    ----------
    files
        Files of the environment that are now hard links to a file of another environment.
    bytes
        Their total size: the disk the environment no longer takes.
    refused
        Why linking stopped, when the file system refused it (e.g. another device); ``None``
        otherwise.
    """

    files: int = 0
    bytes: int = 0
    refused: str | None = None


def _regular_files(root: Path) -> dict[str, os.stat_result]:
    """``relative path -> lstat`` of every regular file below ``root`` (symbolic links left out)."""
    files = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                continue  # removed since it was listed (a rebuild of that environment): nothing to share
            if stat.S_ISREG(info.st_mode):
                files[os.path.relpath(path, root)] = info
    return files


def _is_bytecode(relative: str) -> bool:
    return relative.endswith(".pyc") and os.path.basename(os.path.dirname(relative)) == "__pycache__"


def _bytecode_by_source(files: Iterable[str]) -> dict[str, list[str]]:
    """``source .py -> its bytecode files`` (``pkg/__pycache__/mod.cpython-311.pyc`` belongs to ``pkg/mod.py``)."""
    compiled: dict[str, list[str]] = {}
    for relative in filter(_is_bytecode, files):
        folder, name = os.path.split(relative)
        # A module's name has no dot, so the first dot ends it.
        source = os.path.join(os.path.dirname(folder), name.split(".", 1)[0] + ".py")
        compiled.setdefault(source, []).append(relative)
    return {source: sorted(names) for source, names in compiled.items()}


def _linkable(mine: os.stat_result, theirs: os.stat_result | None) -> bool:
    """Whether two files could be one: same size and permissions, on one device, not already one."""
    return (theirs is not None and theirs.st_size == mine.st_size and theirs.st_mode == mine.st_mode
            and theirs.st_dev == mine.st_dev and theirs.st_ino != mine.st_ino)


def _link(source: Path, target: Path) -> None:
    """Make ``target`` a hard link to ``source``, replacing it atomically (a reader sees one or the other)."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.link")
    os.link(source, temporary)
    try:
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def share_identical_files(env: str | os.PathLike, others: Iterable[str | os.PathLike]) -> Shared:
    """Hard-link each file of ``env`` to an identical file at the same place in one of ``others``.

    Parameters
    ----------
    env
        The environment just built (no process may be using it yet).
    others
        Finished environments, tried in order; a file is linked to the first that has it.

    Returns
    -------
    Shared
        How many files were linked and their size. When the file system refuses hard links (the
        environments lie on different devices, or it has none), linking stops there and
        ``refused`` says why; what was linked before stays linked.

    Notes
    -----
    Files are the same when their bytes, size and permission bits are. A module's source is linked
    only with all its bytecode files, and only when the other environment has the same ones (see
    the module docstring).
    """
    env = Path(env)
    mine = _regular_files(env)
    compiled = _bytecode_by_source(mine)
    done: set[str] = set()
    files = size = 0
    for other in map(Path, others):
        theirs = _regular_files(other)
        their_compiled = _bytecode_by_source(theirs)
        for relative, info in mine.items():
            if relative in done or _is_bytecode(relative) or not _linkable(info, theirs.get(relative)):
                continue
            group = [relative]
            if relative.endswith(".py"):
                # Bytecode of equal sources differs in the modification time it records: it moves
                # with its source, and a source whose bytecode files differ in name stays apart.
                if compiled.get(relative, []) != their_compiled.get(relative, []):
                    continue
                group += compiled.get(relative, [])
            try:
                if not filecmp.cmp(env / relative, other / relative, shallow=False):
                    continue
                for name in group:
                    _link(other / name, env / name)
            except FileNotFoundError:
                # The other environment is being removed (a rebuild, a prune) under its own lock:
                # this file stays unshared. A source linked without its bytecode stays correct;
                # Python compiles it again.
                continue
            except OSError as err:
                if err.errno in CANNOT_LINK:
                    return Shared(files, size, refused=f"{other / relative} -> {env / relative}: {err.strerror}")
                raise
            done.update(group)
            files += len(group)
            size += sum(mine[name].st_size for name in group)
    return Shared(files, size)
