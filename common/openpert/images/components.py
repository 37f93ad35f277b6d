"""What a component's docker engine declares: the base image it runs in and the setup it adds.

A component names one of the project's base images in its docker engine, with Viash's fields::

    engines:
      - type: docker
        registry: ghcr.io
        organization: openpert
        image: ml
        tag: 0.1.0
        setup:                      # only what the base image lacks, pinned
          - type: python
            packages: [six==1.17.0]
      - type: native

Viash builds ``FROM ghcr.io/openpert/ml:0.1.0`` and runs the setup on top; the harness builds the
same image (:mod:`~openpert.images.dockerfiles`) and an environment with the same packages
(:mod:`~openpert.images.environments`). :func:`declaration_problems` says what keeps a declaration
from being reproducible: an image that is not a project base image, a tag other than the
project's version, unpinned or git-installed packages, packages the base image already pins, and
imports that neither the image nor the setup provides (:func:`unprovided_imports`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path

from openpert.config.viash import ComponentConfig, as_list, config_files
from openpert.files import shown_path
from openpert.images import ImageError
from openpert.images.bases import BaseImage, base_chain, base_images
from openpert.images.naming import ImageName, project_naming
from openpert.images.requirements import canonical_name, merge_pins, requirement_name

#: Fields of Viash's python requirement that name PyPI packages.
PYPI_FIELDS = ("packages", "pip", "pypi")
#: Fields of Viash's python requirement that install from elsewhere (not reproducible by version).
SOURCE_FIELDS = ("git", "github", "gitlab", "url", "svn")
#: Setup types the harness can turn into Dockerfile lines.
SETUP_TYPES = ("python", "apt", "docker")
_PINNED = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?==[A-Za-z0-9][A-Za-z0-9.+!_-]*")


def docker_engine(config: ComponentConfig) -> dict:
    """The component's first docker engine.

    Raises
    ------
    ImageError
        When the config has none.
    """
    for engine in config.engines:
        if isinstance(engine, dict) and engine.get("type") == "docker":
            return engine
    raise ImageError(f"{config.path}: engines: no docker engine (add {{type: docker, registry: ..., image: core, tag: ...}})")


def engine_image(engine: dict) -> ImageName:
    """The start image of a docker engine, as Viash reads it: ``registry/organization/image:tag``."""
    image = str(engine.get("image") or "")
    tag = engine.get("tag")
    head, _, last = image.rpartition("/")
    if tag is None and ":" in last:
        last, tag = last.split(":", 1)
        image = f"{head}/{last}" if head else last
    return ImageName(name=image, tag=str(tag) if tag is not None else "latest",
                     registry=engine.get("registry") or None, organization=engine.get("organization") or None)


@dataclasses.dataclass(frozen=True)
class ImageDeclaration:
    """A component's docker engine, read: its image, the project base image it is (if any), its setup."""

    config: ComponentConfig
    engine: dict
    image: ImageName
    base: BaseImage | None

    @property
    def setup(self) -> list[dict]:
        return [s for s in as_list(self.engine.get("setup")) if isinstance(s, dict)]

    @property
    def python_packages(self) -> list[str]:
        """PyPI requirement strings of the python setup entries, in order."""
        return [str(p) for s in self.setup if s.get("type") == "python" for f in PYPI_FIELDS for p in as_list(s.get(f))]

    @property
    def apt_packages(self) -> list[str]:
        return [str(p) for s in self.setup if s.get("type") == "apt" for p in as_list(s.get("packages"))]

    @property
    def docker_lines(self) -> list[dict]:
        """The ``type: docker`` setup entries (RUN, ENV, COPY... lines)."""
        return [s for s in self.setup if s.get("type") == "docker"]


def image_declaration(config: ComponentConfig) -> ImageDeclaration:
    """Read a component's docker engine and find the project base image it names.

    A start image that is not one of ``docker/``'s base images gives ``base=None`` (the component
    runs in a public image; :func:`declaration_problems` reports it).
    """
    engine = docker_engine(config)
    image = engine_image(engine)
    naming = project_naming(config.root)
    base = None
    for candidate in base_images(config.root).values():
        reference = ImageName(name=candidate.name, tag=image.tag, registry=naming.registry, organization=naming.organization)
        if reference.repository == image.repository:
            base = candidate
    return ImageDeclaration(config=config, engine=engine, image=image, base=base)


def declaration_problems(config: ComponentConfig) -> list[str]:
    """What keeps a component's docker engine from giving a reproducible image (empty when nothing).

    Each problem is ``<config>: engines: <what is wrong>``.
    """
    where = f"{config.path}: engines"
    try:
        declaration = image_declaration(config)
    except ImageError as err:
        return [str(err)]
    problems: list[str] = []
    naming = project_naming(config.root)
    if declaration.base is None:
        known = ", ".join(base_images(config.root)) or "none"
        problems.append(f"{where}: image {declaration.image} is not a base image of docker/; name one of: {known} "
                        f"(registry: {naming.registry}, organization: {naming.organization})")
    elif declaration.image.tag != naming.version:
        problems.append(f"{where}: tag {declaration.image.tag!r}: base images are tagged with the project version {naming.version!r}")
    for entry in declaration.setup:
        kind = entry.get("type")
        if kind not in SETUP_TYPES:
            problems.append(f"{where}: setup type {kind!r} is not supported (use {', '.join(SETUP_TYPES)})")
        if kind == "python":
            for field in SOURCE_FIELDS:
                for source in as_list(entry.get(field)):
                    problems.append(f"{where}: python {field}: {source!r}: install a pinned release from PyPI instead "
                                    "(the harness and pertsci are in the base image, from the same checkout)")
    inherited = {}
    if declaration.base is not None:
        try:
            pins = merge_pins(b.requirements() for b in base_chain(config.root, declaration.base.name))
        except ImageError as err:
            problems.append(str(err))
            pins = []
        inherited = {pin.key: pin for pin in pins}
    for package in declaration.python_packages:
        if "@" in package or "://" in package:
            problems.append(f"{where}: python package {package!r}: install a pinned release from PyPI instead "
                            "(the harness and pertsci are in the base image, from the same checkout)")
            continue
        if not _PINNED.fullmatch(package.replace(" ", "")):
            problems.append(f"{where}: python package {package!r}: pin it with == so that the image is reproducible")
        name = canonical_name(re.split(r"[\[=<>!~;\s]", package, maxsplit=1)[0])
        if name in inherited:
            pin = inherited[name]
            problems.append(f"{where}: python package {package!r} is already in image {declaration.base.name} "
                            f"({pin} at {shown_path(pin.source.resolve(), config.root)}:{pin.line}); drop it")
    return problems + unprovided_imports(config)


def _distribution_closure(names: set[str]) -> set[str]:
    """``names`` and every distribution they require, as far as the installed metadata tells (canonical names)."""
    import importlib.metadata

    found, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed here: what it brings is unknown, and not counted
        todo.extend(requirement_name(r) for r in requires if "extra ==" not in r)
    return found


def _docker_stamp(root: Path) -> tuple:
    """When each file of ``docker/`` last changed: the key under which an image's pins are kept."""
    return tuple(sorted((str(p), p.stat().st_mtime_ns) for p in (Path(root) / "docker").rglob("*") if p.is_file()))


@functools.lru_cache(maxsize=64)
def _image_pins(root: Path, base: str, stamp: tuple) -> frozenset[str]:
    """The distributions (canonical names) a base image holds: the pins of its ``FROM`` chain."""
    return frozenset(pin.key for pin in merge_pins(b.requirements() for b in base_chain(root, base)))


@functools.cache
def _import_distributions() -> dict[str, list[str]]:
    """Top-level import name -> installed distributions (read once: it walks every installed package)."""
    import importlib.metadata

    return dict(importlib.metadata.packages_distributions())


def unprovided_imports(config: ComponentConfig) -> list[str]:
    """Imports of a component's scripts that neither its base image nor its ``setup`` provides.

    Such an import runs wherever the harness's own environment happens to hold the package (``openpert
    test``, a local benchmark) and fails only in the component's image; it is caught here, from the
    sources, with the line to add. Read: the component's declared Python files. Left out: the standard
    library, the project's packages and task libraries, files beside the script. An import name is
    mapped to its distribution through the installed metadata (``sklearn`` -> ``scikit-learn``); one
    installed nowhere here is left to the component's test, which fails on it.

    Returns
    -------
    list of str
        ``<script>:<line>: imports <module> (distribution <name>), which ...: add ...``, one per module.
    """
    import importlib.metadata
    import sys

    from openpert.config.layout_rules import HARNESS, SCIENCE, imported_modules, task_libraries

    try:
        declaration = image_declaration(config)
    except ImageError:
        return []  # declaration_problems says why
    if declaration.base is None:
        return []
    try:
        chain_pins = _image_pins(config.root, declaration.base.name, _docker_stamp(config.root))
    except ImageError:
        return []
    setup = {requirement_name(package) for package in declaration.python_packages}
    provided = set(chain_pins) | _distribution_closure(setup)
    own = {HARNESS, SCIENCE, *task_libraries(config.root)}
    installed = _import_distributions()
    folder = config.path.parent
    declared = {config.resource_path(r).resolve() for r in config.resources if isinstance(r, dict) and isinstance(r.get("path"), str)}
    problems: list[str] = []
    seen: set[str] = set()
    for path in sorted(p for p in folder.rglob("*.py") if p.resolve() in declared):
        for line, module in imported_modules(path):
            top = module.split(".", 1)[0]
            if (top in seen or top in sys.stdlib_module_names or top in own or (path.parent / f"{top}.py").is_file()
                    or (path.parent / top).is_dir() or top not in installed):
                continue
            distributions = sorted({canonical_name(d) for d in installed[top]})
            if provided & set(distributions):
                continue
            seen.add(top)
            name = distributions[0]
            holders = [image for image in base_images(config.root) if image != declaration.base.name
                       and name in _image_pins(config.root, image, _docker_stamp(config.root))]
            try:
                version = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                version = "<version>"
            add = (f"add `setup: [{{type: python, packages: [{name}=={version}]}}]` to the docker engine of {config.path}")
            if holders:
                add = f"use `image: {holders[0]}`, which holds it, in the docker engine of {config.path}, or {add}"
            problems.append(f"{path}:{line}: imports {top} (distribution {name}), which image {declaration.base.name} "
                            f"does not hold and its setup does not add: {add}")
    return problems


def component_configs(root: str | Path, paths: list[str | Path] | None = None) -> list[ComponentConfig]:
    """The components at or below ``paths`` (default: the project's ``src/``), sorted by path.

    A path is a component folder, its ``config.vsh.yaml``, or any folder above components (a task).
    Relative paths are taken from ``root``.

    Raises
    ------
    ImageError
        For a path that does not exist or holds no component; ``ConfigError`` for a config that does
        not read (naming it).
    """
    from openpert.config.viash import read_config

    root = Path(root).resolve()
    found: dict[Path, None] = {}
    for given in paths or [root / "src"]:
        path = Path(given)
        path = path if path.is_absolute() else root / path
        if path.is_file() and path.name == "config.vsh.yaml":
            found[path.resolve()] = None
        elif path.is_dir():
            configs = [p.resolve() for p in config_files(path)]
            if not configs:
                raise ImageError(f"{path}: no component (config.vsh.yaml) here or below")
            found.update(dict.fromkeys(configs))
        else:
            raise ImageError(f"{path}: no such component folder or config")
    return [read_config(path) for path in sorted(found)]


def engine_block(root: str | Path, base: str = "core") -> dict:
    """The docker engine a new component gets: base image ``base`` of the project at ``root``, nothing added.

    For ``openpert create-component``: ``{type: docker, registry: ..., organization: ..., image: core,
    tag: <version>}`` (registry and organization only when ``_viash.yaml`` sets them).
    """
    from openpert.images.bases import base_image

    base_image(root, base)  # raises, naming the known ones, for an unknown base
    naming = project_naming(root)
    engine: dict = {"type": "docker"}
    if naming.registry:
        engine["registry"] = naming.registry
    if naming.organization:
        engine["organization"] = naming.organization
    engine.update({"image": base, "tag": naming.version})
    return engine


def image_files(config: ComponentConfig) -> list[Path]:
    """The files a component's image (and its environment) is built from, beyond the component's own.

    The Dockerfile and requirement file of every base image of its ``FROM`` chain, their ignore files,
    and the pinned test tools: a change to any of them changes what the component runs with, so
    its test must run again (``openpert changed``).
    """
    from openpert.images.bases import DOCKER_DIR, TEST_REQUIREMENTS

    declaration = image_declaration(config)
    if declaration.base is None:
        return []
    files: list[Path] = []
    for base in base_chain(config.root, declaration.base.name):
        files += [base.dockerfile, base.requirements_path, base.dockerfile.with_name("Dockerfile.dockerignore")]
    tools = config.root / DOCKER_DIR / TEST_REQUIREMENTS
    return [f for f in [*files, tools] if f.is_file()]
