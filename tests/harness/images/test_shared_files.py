"""Identical files of environments stored once: openpert.images.shared_files."""

from __future__ import annotations

import errno
import os
import py_compile
import shutil
import struct
from importlib.util import cache_from_source
from pathlib import Path

import pytest

from openpert.images.shared_files import Shared, share_identical_files


def _write(path: Path, content: bytes, mode: int = 0o644, mtime: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    path.chmod(mode)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def _module(env: Path, relative: str, source: bytes, mtime: int, compiled: bool = True) -> Path:
    path = _write(env / relative, source, mtime=mtime)
    if compiled:
        py_compile.compile(str(path), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    return path


def _bytecode_matches_source(source: Path) -> bool:
    """Whether the bytecode of ``source`` records its modification time and size (Python would use it)."""
    header = Path(cache_from_source(str(source))).read_bytes()[:16]
    _, flags, mtime, size = struct.unpack("<4sIII", header)
    info = source.stat()
    return flags == 0 and mtime == int(info.st_mtime) & 0xFFFFFFFF and size == info.st_size & 0xFFFFFFFF


def _same_file(first: Path, second: Path) -> bool:
    return os.path.samestat(first.stat(), second.stat())


@pytest.fixture()
def two_envs(tmp_path) -> tuple[Path, Path]:
    """A finished environment ``old`` and a new one ``new`` with shared, different and near-identical files."""
    old, new = tmp_path / "old", tmp_path / "new"
    for env, mtime in ((old, 1_700_000_000), (new, 1_800_000_000)):
        _module(env, "lib/pkg/mod.py", b"VALUE = 42\n", mtime)
        _module(env, "lib/pkg/only_new_compiled.py", b"X = 1\n", mtime, compiled=env is new)
        _write(env / "lib/pkg/data.bin", b"\0" * 5000)
        _write(env / "lib/run.sh", b"#!/bin/sh\necho hi\n", mode=0o755 if env is old else 0o644)
        (env / "bin").mkdir(parents=True)
        (env / "bin" / "python").symlink_to("/usr/bin/python3")
    _write(old / "lib/pkg/table.txt", b"a b c\n")
    _write(new / "lib/pkg/table.txt", b"a b d\n")
    _write(new / "lib/pkg/new_only.txt", b"only here\n")
    return old, new


def test_identical_files_become_hard_links_and_different_ones_stay_apart(two_envs):
    old, new = two_envs
    shared = share_identical_files(new, [old])
    pyc = Path(cache_from_source(str(new / "lib/pkg/mod.py")))
    assert _same_file(new / "lib/pkg/data.bin", old / "lib/pkg/data.bin")
    assert _same_file(new / "lib/pkg/mod.py", old / "lib/pkg/mod.py")
    assert _same_file(pyc, Path(cache_from_source(str(old / "lib/pkg/mod.py"))))
    assert shared == Shared(files=3, bytes=5000 + len(b"VALUE = 42\n") + pyc.stat().st_size)
    # Different bytes, different permissions, or bytecode on one side only: kept apart, as they were.
    assert (new / "lib/pkg/table.txt").read_bytes() == b"a b d\n"
    assert not _same_file(new / "lib/run.sh", old / "lib/run.sh") and (new / "lib/run.sh").stat().st_mode & 0o777 == 0o644
    assert not _same_file(new / "lib/pkg/only_new_compiled.py", old / "lib/pkg/only_new_compiled.py")
    assert (new / "bin" / "python").is_symlink()
    # Sharing again finds nothing more to do.
    assert share_identical_files(new, [old]) == Shared()


def test_every_source_keeps_bytecode_that_python_accepts(two_envs):
    old, new = two_envs
    share_identical_files(new, [old])
    # A source takes the modification time of the file it links to: its bytecode must move with it.
    for source in (new / "lib/pkg/mod.py", new / "lib/pkg/only_new_compiled.py"):
        assert _bytecode_matches_source(source), source


def test_the_shared_files_outlive_the_environment_they_came_from(two_envs):
    old, new = two_envs
    share_identical_files(new, [old])
    shutil.rmtree(old)
    assert (new / "lib/pkg/data.bin").read_bytes() == b"\0" * 5000
    assert (new / "lib/pkg/mod.py").read_bytes() == b"VALUE = 42\n"
    assert _bytecode_matches_source(new / "lib/pkg/mod.py")


def test_a_file_system_that_refuses_hard_links_stops_sharing_and_says_why(two_envs, monkeypatch):
    old, new = two_envs
    before = (new / "lib/pkg/data.bin").stat().st_ino

    def refuse(source, target):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    monkeypatch.setattr(os, "link", refuse)
    shared = share_identical_files(new, [old])
    assert shared.files == 0 and shared.refused is not None and "Invalid cross-device link" in shared.refused
    assert str(new) in shared.refused and (new / "lib/pkg/data.bin").stat().st_ino == before
    assert not list(new.rglob("*.link")), "no temporary link left behind"


def test_any_other_link_error_is_raised(two_envs, monkeypatch):
    old, new = two_envs

    def fail(source, target):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "link", fail)
    with pytest.raises(OSError, match="No space left on device"):
        share_identical_files(new, [old])


def test_a_file_that_vanishes_from_the_other_environment_stays_unshared(two_envs, monkeypatch):
    old, new = two_envs
    real_link = os.link

    def removed_meanwhile(source, target):
        if Path(source).name == "data.bin":
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(source))
        real_link(source, target)

    monkeypatch.setattr(os, "link", removed_meanwhile)
    shared = share_identical_files(new, [old])
    assert shared.files == 2 and shared.refused is None
    assert not _same_file(new / "lib/pkg/data.bin", old / "lib/pkg/data.bin")
    assert _same_file(new / "lib/pkg/mod.py", old / "lib/pkg/mod.py")
