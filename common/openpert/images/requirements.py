"""Pinned requirement files of the base images: reading, merging along ``FROM`` chains, pinning.

A base image's ``requirements.txt`` lists every package the image adds over its parent image, each
pinned with ``==``: together the files of a ``FROM`` chain (``core`` then ``ml``) are the complete,
closed set of packages of the image, so an image is the same for the same commit. The file's
header line ``# requires: a b c`` names the packages wanted directly; the rest of the file is their
dependencies, as :func:`pin_requirements` computes them from an installed environment (the
project's ``.venv``), so the pins can be refreshed after an upgrade there.

Only ``name==version`` lines, comments and blank lines are accepted: no ranges, URLs or options,
which would make the image depend on the day it was built.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from openpert.images import ImageError

_PIN = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(?P<version>[A-Za-z0-9][A-Za-z0-9.+!_-]*)")
_REQUIRES = re.compile(r"#\s*requires:\s*(?P<names>.*)$")


def canonical_name(name: str) -> str:
    """PEP 503 normalised name: ``PyYAML``, ``pyyaml`` and ``py_yaml`` compare equal as ``pyyaml``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The canonical distribution name of a requirement string (``PyYAML>=6.0`` -> ``pyyaml``,
    ``openpert[ml]`` -> ``openpert``)."""
    return canonical_name(re.split(r"[<>=!~;\[ (@]", requirement.strip(), maxsplit=1)[0])


@dataclasses.dataclass(frozen=True)
class Pin:
    """One ``name==version`` line and where it is written."""

    name: str
    version: str
    source: Path
    line: int

    @property
    def key(self) -> str:
        return canonical_name(self.name)

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


@dataclasses.dataclass(frozen=True)
class RequirementsFile:
    """A parsed requirement file: its pins and the packages its header says are wanted directly."""

    path: Path
    pins: tuple[Pin, ...]
    requires: tuple[str, ...]

    @property
    def names(self) -> set[str]:
        return {pin.key for pin in self.pins}


def read_requirements(path: str | Path) -> RequirementsFile:
    """Parse a pinned requirement file.

    Raises
    ------
    ImageError
        With ``file:line`` for anything but a ``name==version`` pin, a comment or a blank line, for a
        package pinned twice, and when the file is missing.
    """
    path = Path(path)
    if not path.is_file():
        raise ImageError(f"{path}: requirement file not found")
    pins: list[Pin] = []
    requires: list[str] = []
    seen: dict[str, Pin] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        header = _REQUIRES.match(line)
        if header:
            requires.extend(header.group("names").split())
            continue
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = _PIN.fullmatch(line)
        if not match:
            raise ImageError(f"{path}:{number}: {raw.strip()!r} is not a 'name==version' pin "
                             "(ranges, URLs and options make an image depend on the day it is built)")
        pin = Pin(match.group("name"), match.group("version"), path, number)
        if pin.key in seen:
            raise ImageError(f"{path}:{number}: {pin.name} is pinned again (first at line {seen[pin.key].line})")
        seen[pin.key] = pin
        pins.append(pin)
    return RequirementsFile(path=path, pins=tuple(pins), requires=tuple(requires))


def merge_pins(files: Iterable[RequirementsFile]) -> list[Pin]:
    """The pins of several files (a ``FROM`` chain, plus test tools) as one list, without repeats.

    The same pin in two files is kept once; the same package at two versions is an error, since one
    of the images would not hold what its file says.

    Raises
    ------
    ImageError
        Naming both places when a package is pinned at two versions.
    """
    merged: dict[str, Pin] = {}
    for file in files:
        for pin in file.pins:
            other = merged.get(pin.key)
            if other is not None and other.version != pin.version:
                raise ImageError(f"{pin.source}:{pin.line}: {pin} conflicts with {other} at {other.source}:{other.line}")
            merged.setdefault(pin.key, pin)
    return list(merged.values())


# Run inside the environment being pinned: the dependency closure of the wanted packages, with
# environment markers evaluated there (so a Linux/3.11 environment gives the Linux/3.11 closure).
_CLOSURE_SCRIPT = r"""
import json, sys
import importlib.metadata as md
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

found, missing, todo, done = {}, [], [Requirement(r) for r in json.loads(sys.argv[1])], set()
while todo:
    req = todo.pop()
    key = (canonicalize_name(req.name), frozenset(req.extras))
    if key in done:
        continue
    done.add(key)
    try:
        dist = md.distribution(req.name)
    except md.PackageNotFoundError:
        missing.append(req.name)
        continue
    found[canonicalize_name(dist.metadata["Name"])] = [dist.metadata["Name"], dist.version]
    for text in dist.requires or []:
        dep = Requirement(text)
        envs = [{"extra": e} for e in (set(req.extras) | {""})]
        if dep.marker is None or any(dep.marker.evaluate(env) for env in envs):
            todo.append(dep)
print(json.dumps({"found": found, "missing": sorted(set(missing))}))
"""


def dependency_closure(python: str | Path, wanted: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Installed name and version of ``wanted`` and everything they depend on, in ``python``'s environment.

    Parameters
    ----------
    python
        The interpreter of the environment to read (it needs ``packaging``).
    wanted
        Requirement strings (``torch``, ``pkg[extra]``).

    Returns
    -------
    ``{canonical name: (installed name, version)}``.

    Raises
    ------
    ImageError
        When a package (or one it needs) is not installed there, or the interpreter fails.
    """
    proc = subprocess.run([str(python), "-c", _CLOSURE_SCRIPT, json.dumps(list(wanted))], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageError(f"{python}: reading installed packages failed: {proc.stderr.strip()[-1000:]}")
    result = json.loads(proc.stdout)
    if result["missing"]:
        raise ImageError(f"{python}: not installed there, so it cannot be pinned: {', '.join(result['missing'])}")
    return {key: (name, version) for key, (name, version) in result["found"].items()}


def pin_requirements(python: str | Path, requires: Sequence[str], parents: Iterable[RequirementsFile] = ()) -> list[tuple[str, str]]:
    """Pins of ``requires`` and their dependencies, less what the parent images already hold.

    Returns
    -------
    ``(name, version)`` pairs sorted by name, as :func:`format_requirements` writes them.
    """
    inherited = set().union(*(parent.names for parent in parents))
    closure = dependency_closure(python, requires)
    return sorted(((name, version) for key, (name, version) in closure.items() if key not in inherited),
                  key=lambda item: canonical_name(item[0]))


def format_requirements(pins: Iterable[tuple[str, str]], requires: Sequence[str], description: str) -> str:
    """The text of a requirement file: a description, the ``# requires:`` header, one pin a line."""
    lines = [f"# {line}" if line else "#" for line in description.strip().splitlines()]
    lines.append(f"# requires: {' '.join(requires)}")
    lines.extend(f"{name}=={version}" for name, version in pins)
    return "\n".join(lines) + "\n"
