"""The base images: every ``docker/<name>/`` folder holding a ``Dockerfile`` and a ``requirements.txt``.

A base image builds on a public image (``core`` on ``python:3.11.x-slim``) or on another base image
of the project, which its ``FROM`` line names by the project's image name (``ml`` is ``FROM
ghcr.io/openpert/core:<version>``). That line is the only place the chain is written: the build
order, the environments (``ml`` = core's pins + ml's pins) and the Python version all follow it.

``docker/test_requirements.txt`` pins the test tools (pytest) that an image's *environment* gets on
top of the image's packages, to run component tests; the images themselves never hold them.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from openpert.images import ImageError
from openpert.images.naming import base_image_name, project_naming
from openpert.images.requirements import RequirementsFile, read_requirements

#: Folder of the base images, below the project root.
DOCKER_DIR = "docker"
#: Test tools of image environments, below :data:`DOCKER_DIR`.
TEST_REQUIREMENTS = "test_requirements.txt"

_FROM = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(?P<image>\S+)(?:\s+AS\s+\S+)?\s*$", re.IGNORECASE | re.MULTILINE)
_PYTHON_IMAGE = re.compile(r"^(?:docker\.io/)?(?:library/)?python:(?P<major>\d+)\.(?P<minor>\d+)")
#: How a chain that starts from another public image (``vllm/vllm-openai``) states its Python.
_PYTHON_LABEL = re.compile(r"""^\s*LABEL\s+org\.openpert\.python\s*=\s*["']?(?P<major>\d+)\.(?P<minor>\d+)["']?\s*$""",
                           re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class BaseImage:
    """One base image of the project."""

    name: str
    folder: Path
    from_image: str
    parent: str | None

    @property
    def dockerfile(self) -> Path:
        return self.folder / "Dockerfile"

    @property
    def requirements_path(self) -> Path:
        return self.folder / "requirements.txt"

    def requirements(self) -> RequirementsFile:
        return read_requirements(self.requirements_path)


def _split_tag(reference: str) -> tuple[str, str | None]:
    """``repo:tag`` -> (``repo``, ``tag``); a ``:`` inside the registry's host:port is not a tag."""
    reference = reference.split("@", 1)[0]
    head, _, last = reference.rpartition("/")
    if ":" in last:
        name, tag = last.split(":", 1)
        return (f"{head}/{name}" if head else name), tag
    return reference, None


def _from_line(dockerfile: Path) -> str:
    images = _FROM.findall(dockerfile.read_text())
    if len(images) != 1:
        raise ImageError(f"{dockerfile}: a base image's Dockerfile needs exactly one FROM line (found {len(images)})")
    if "$" in images[0]:
        raise ImageError(f"{dockerfile}: FROM {images[0]}: name the image literally (the build order and the "
                         "environments read the chain from this line)")
    return images[0]


def base_images(root: str | Path) -> dict[str, BaseImage]:
    """The base images of the project at ``root``, by name, parents before children.

    Raises
    ------
    ImageError
        For a folder without ``requirements.txt``, a ``FROM`` line that cannot be read, a parent that
        is not a base image of the project, or a cycle.
    """
    root = Path(root).resolve()
    folder = root / DOCKER_DIR
    if not folder.is_dir():
        return {}
    found: dict[str, BaseImage] = {}
    for dockerfile in sorted(folder.glob("*/Dockerfile")):
        name = dockerfile.parent.name
        if not (dockerfile.parent / "requirements.txt").is_file():
            raise ImageError(f"{dockerfile.parent}: a base image needs a pinned requirements.txt beside its Dockerfile")
        found[name] = BaseImage(name=name, folder=dockerfile.parent, from_image=_from_line(dockerfile), parent=None)
    prefix = project_naming(root).prefix
    for name, base in list(found.items()):
        repository, _ = _split_tag(base.from_image)
        for other in found:
            if repository == base_image_name(root, other).repository:
                found[name] = dataclasses.replace(base, parent=other)
        if found[name].parent is None and prefix and repository.startswith(prefix + "/"):
            raise ImageError(f"{base.dockerfile}: FROM {base.from_image} names a project image, but docker/ has no "
                             f"base image {repository.removeprefix(prefix + '/')!r}")
    ordered: dict[str, BaseImage] = {}

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if name in ordered:
            return
        if name in stack:
            raise ImageError(f"{found[name].dockerfile}: FROM chain loops: {' -> '.join((*stack, name))}")
        parent = found[name].parent
        if parent is not None:
            visit(parent, (*stack, name))
        ordered[name] = found[name]

    for name in sorted(found):
        visit(name, ())
    return ordered


def base_image(root: str | Path, name: str) -> BaseImage:
    """One base image by name; the error lists the known ones."""
    bases = base_images(root)
    if name not in bases:
        known = ", ".join(bases) or "none"
        raise ImageError(f"{Path(root).resolve() / DOCKER_DIR}: no base image {name!r} (known: {known})")
    return bases[name]


def base_chain(root: str | Path, name: str) -> list[BaseImage]:
    """The ``FROM`` chain of a base image, outermost first: ``[core, ml]`` for ``ml``."""
    bases = base_images(root)
    chain = [base_image(root, name)]
    while chain[0].parent is not None:
        chain.insert(0, bases[chain[0].parent])
    return chain


def python_version(root: str | Path, name: str) -> tuple[int, int]:
    """The Python (major, minor) of a base image: the version tag of its chain's ``python:`` image.

    A chain starting from another public image (the ``llm`` image from ``vllm/vllm-openai``) states
    it in its first Dockerfile: ``LABEL org.openpert.python="3.12"``.

    Raises
    ------
    ImageError
        When the chain does not start from an official ``python:<X.Y...>`` image.
    """
    first = base_chain(root, name)[0]
    match = _PYTHON_IMAGE.match(first.from_image) or _PYTHON_LABEL.search(first.dockerfile.read_text())
    if not match:
        raise ImageError(f"{first.dockerfile}: FROM {first.from_image}: the first image of a chain must be an official "
                         "python:<X.Y...> image, whose version the image environments use, or the Dockerfile must "
                         'state the Python of the image it starts from (LABEL org.openpert.python="3.12")')
    return int(match.group("major")), int(match.group("minor"))


def tool_requirements(root: str | Path) -> RequirementsFile | None:
    """The pinned test tools of image environments (``docker/test_requirements.txt``), if the project has them."""
    path = Path(root).resolve() / DOCKER_DIR / TEST_REQUIREMENTS
    return read_requirements(path) if path.is_file() else None
