"""Image names and tags: the registry prefix from ``_viash.yaml``, tags from the version and git.

- Registry prefix: ``links.docker_registry`` and ``organization`` of ``_viash.yaml``
  (``ghcr.io/openpert``); either may be absent, and the prefix shrinks accordingly.
- Base images: ``<prefix>/<base>`` (``ghcr.io/openpert/core``).
- Component images, as Viash names them (the package name between organization and namespace):
  ``<prefix>/<project name>/<namespace>/<name>`` (``ghcr.io/openpert/openpert/perturbqa/methods/gat``).
- Tags: the project ``version`` (``0.1.0``), which component configs name; a build of a commit is
  tagged ``<version>-<short commit>``, with ``-dirty`` when the work tree differs from the commit,
  so that an image never claims a commit it was not built from.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

from openpert.config.project import project_file
from openpert.config.viash import PROJECT_FILE, ConfigError
from openpert.images import ImageError

#: What Docker accepts as a tag.
TAG_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


@dataclasses.dataclass(frozen=True)
class ImageName:
    """A Docker image reference: ``[registry/][organization/]name:tag``."""

    name: str
    tag: str
    registry: str | None = None
    organization: str | None = None

    @property
    def repository(self) -> str:
        """The reference without its tag."""
        return "/".join(part for part in (self.registry, self.organization, self.name) if part)

    def with_tag(self, tag: str) -> ImageName:
        return dataclasses.replace(self, tag=tag)

    def __str__(self) -> str:
        return f"{self.repository}:{self.tag}"


@dataclasses.dataclass(frozen=True)
class ProjectNaming:
    """What ``_viash.yaml`` says about image names."""

    root: Path
    name: str
    version: str
    registry: str | None
    organization: str | None

    @property
    def prefix(self) -> str:
        """``registry/organization`` (the parts that are set)."""
        return "/".join(part for part in (self.registry, self.organization) if part)


def project_naming(root: str | Path) -> ProjectNaming:
    """Read the naming settings of the project at ``root``.

    Raises
    ------
    ImageError
        When ``_viash.yaml`` lacks ``name`` or ``version``, or the version is not a valid tag.
    """
    root = Path(root).resolve()
    path = root / PROJECT_FILE
    try:
        data = project_file(root)
    except ConfigError as err:
        raise ImageError(f"{err} (image names come from the project's {PROJECT_FILE})") from None
    name, version = data.get("name"), data.get("version")
    if not isinstance(name, str) or not name:
        raise ImageError(f"{path}: name: needed to name component images")
    if not isinstance(version, (str, int, float)) or not str(version):
        raise ImageError(f"{path}: version: needed to tag images")
    version = str(version)
    if not TAG_PATTERN.fullmatch(version):
        raise ImageError(f"{path}: version: {version!r} is not a valid Docker tag")
    links = data.get("links") or {}
    registry = links.get("docker_registry") if isinstance(links, dict) else None
    organization = data.get("organization")
    return ProjectNaming(root=root, name=name, version=version, registry=registry or None,
                         organization=organization or None)


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageError(f"{root}: git {' '.join(args)} failed (a build tag needs a git checkout): {proc.stderr.strip()}")
    return proc.stdout


def commit_tag(root: str | Path) -> str:
    """``<version>-<short commit>``, plus ``-dirty`` when tracked files changed or untracked files exist.

    Untracked files count: a new component not yet committed would otherwise be built into an image
    that names a commit without it. Ignored files (caches, ``target/``) do not.
    """
    naming = project_naming(root)
    sha = _git(naming.root, "rev-parse", "--short", "HEAD").strip()
    dirty = bool(_git(naming.root, "status", "--porcelain").strip())
    return f"{naming.version}-{sha}{'-dirty' if dirty else ''}"


def base_image_name(root: str | Path, base: str, tag: str | None = None) -> ImageName:
    """The name of base image ``base`` (a folder of ``docker/``), tagged ``tag`` or the version."""
    naming = project_naming(root)
    return ImageName(name=base, tag=tag or naming.version, registry=naming.registry, organization=naming.organization)


def component_image_name(config, tag: str | None = None) -> ImageName:
    """The name of a component's image, as Viash names it: ``<prefix>/<project>/<namespace>/<name>``."""
    naming = project_naming(config.root)
    path = "/".join(part for part in (naming.name, config.namespace, config.name) if part)
    return ImageName(name=path, tag=tag or naming.version, registry=naming.registry, organization=naming.organization)
