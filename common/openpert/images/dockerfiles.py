"""Dockerfiles: the one Viash's build would produce for a component, and base Dockerfiles rendered for a build.

A component's Dockerfile is its base image (``FROM <registry>/<organization>/<base>:<tag>``), the
setup its docker engine adds, in the order written (python packages with pip, apt packages,
docker lines), and its resources copied into ``/opt/openpert/<namespace>/<name>/`` beside the
script, as Viash lays out a built component. The build context is the project root, so that a
resource of the task library (``src/<task>/<task>_lib``) is in reach; :data:`DOCKERIGNORE` keeps the
context to the files an image needs (``<Dockerfile>.dockerignore`` beside each Dockerfile, which
BuildKit reads).

A base Dockerfile rendered for a build names its parent image with the build's tag, so that ``ml``
of commit ``abc1234`` is built on ``core`` of the same commit.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from openpert.config.project import project_file
from openpert.config.viash import ComponentConfig, as_list
from openpert.images import ImageError
from openpert.images.bases import BaseImage
from openpert.images.components import image_declaration
from openpert.images.naming import base_image_name, project_naming

#: Where a component's resources go in its image (then ``<namespace>/<name>/``).
COMPONENT_PREFIX = "/opt/openpert"
#: The build context is the project root: only what images need goes in (an allow-list, so that
#: ``.venv``, caches and ``.git`` never do).
DOCKERIGNORE = """\
# The build context is the project root; images need only these.
*
!pyproject.toml
!README.md
!common/
!docker/
!src/
**/__pycache__/
**/*.pyc
**/*.egg-info/
"""


def _quote(word: str) -> str:
    return shlex.quote(word)


def _setup_lines(entry: dict, where: str) -> list[str]:
    """Dockerfile lines of one setup entry, as Viash writes them (pip upgrades unless ``upgrade: false``)."""
    kind = entry.get("type")
    if kind == "python":
        packages = [str(p) for field in ("packages", "pip", "pypi") for p in as_list(entry.get(field))]
        if any(as_list(entry.get(field)) for field in ("git", "github", "gitlab", "url", "svn")):
            raise ImageError(f"{where}: python setup from git, github, gitlab, url or svn is not built by the harness; "
                             "install a pinned release from PyPI")
        if not packages:
            return []
        upgrade = " --upgrade" if entry.get("upgrade", True) else ""
        return [f"RUN pip install --no-cache-dir{upgrade} {' '.join(_quote(p) for p in packages)}"]
    if kind == "apt":
        packages = [str(p) for p in as_list(entry.get("packages"))]
        if not packages:
            return []
        lines = []
        if any("=" not in p for p in packages):
            # Debian packages of the base image's release (bookworm) get security fixes only; pinning
            # them would break the build each time one is published.
            lines.append("# hadolint ignore=DL3008")
        frontend = "" if entry.get("interactive") else "DEBIAN_FRONTEND=noninteractive "
        lines.append("RUN apt-get update \\\n"
                     f" && {frontend}apt-get install -y --no-install-recommends {' '.join(_quote(p) for p in packages)} \\\n"
                     " && rm -rf /var/lib/apt/lists/*")
        return lines
    if kind == "docker":
        lines = [f"ARG {a}" for a in as_list(entry.get("build_args"))]
        lines += [f"ENV {e}" for e in as_list(entry.get("env"))]
        lines += [f"COPY {c}" for c in as_list(entry.get("copy"))]
        lines += [f"ADD {a}" for a in as_list(entry.get("add"))]
        lines += [f"RUN {r}" for r in as_list(entry.get("run"))]
        lines += [f"LABEL {label}" for label in as_list(entry.get("label"))]
        return lines
    raise ImageError(f"{where}: setup type {kind!r} is not built by the harness (use python, apt or docker)")


def _waive_consecutive_runs(lines: list[str]) -> list[str]:
    """Mark a RUN that follows a RUN with hadolint's inline waiver of DL3059 (consolidate RUNs).

    Each setup entry is its own RUN, as Viash builds it, so that a layer maps to one entry of the
    config; the waiver says so where two RUNs meet.
    """
    out: list[str] = []
    previous = ""
    waived = False
    for line in lines:
        if line.startswith("RUN ") and previous.startswith("RUN "):
            if out and out[-1].startswith("# hadolint ignore="):
                out[-1] += ",DL3059"
            else:
                out.append("# hadolint ignore=DL3059")
            waived = True
        out.append(line)
        if line and not line.startswith("#"):
            previous = line
    if waived:
        out.insert(2, "# One RUN per setup entry, as Viash builds it (a layer per entry): DL3059 is waived where two meet.")
    return out


def component_destination(config: ComponentConfig) -> str:
    """The folder of a component's resources in its image: ``/opt/openpert/<namespace>/<name>``."""
    return "/".join(part for part in (COMPONENT_PREFIX, config.namespace, config.name) if part)


def component_dockerfile(config: ComponentConfig, tag: str | None = None) -> str:
    """The Dockerfile of a component's image.

    Parameters
    ----------
    config
        The component.
    tag
        Tag of the base image to build on (a build's tag, so that components use the base images of the
        same build); default: the tag the docker engine names.

    Raises
    ------
    ImageError
        When the component has no docker engine or a setup entry the harness does not build.
    """
    declaration = image_declaration(config)
    root = config.root
    image = declaration.image.with_tag(tag) if tag and declaration.base is not None else declaration.image
    rel_config = config.path.relative_to(root)
    lines = [
        f"# Generated by openpert from {rel_config}: edit that file, not this one.",
        "# Build from the project root: docker build --file <this file> --tag <image> .",
        f"FROM {image}",
        "",
    ]
    for index, entry in enumerate(declaration.setup):
        setup = _setup_lines(entry, f"{config.path}: engines: setup[{index}]")
        if setup:
            lines += [f"# setup[{index}]: {entry.get('type')}", *setup, ""]
    lines = _waive_consecutive_runs(lines)
    destination = component_destination(config)
    for resource in config.resources:
        source = config.resource_path(resource)
        target = f"{destination}/{resource.get('dest') or source.name}"
        lines.append(f"COPY {source.relative_to(root)} {target}")
    naming = project_naming(root)
    labels = {
        "org.opencontainers.image.title": f"{config.namespace}/{config.name}" if config.namespace else config.name,
        "org.opencontainers.image.description": (config.summary or config.label).replace('"', "'"),
        "org.opencontainers.image.version": tag or naming.version,
    }
    link = _repository_link(root)
    if link:
        labels["org.opencontainers.image.source"] = link
    lines += [
        "",
        "LABEL " + " \\\n      ".join(f'{key}="{value}"' for key, value in labels.items()),
        f"WORKDIR {destination}",
        # As Viash does: a component is started by its runner, not by an entrypoint of the base image.
        "ENTRYPOINT []",
        "",
    ]
    return "\n".join(lines)


def _repository_link(root: Path) -> str | None:
    links = project_file(root).get("links") or {}
    repository = links.get("repository") if isinstance(links, dict) else None
    return str(repository) if repository else None


_FROM_LINE = re.compile(r"^(\s*FROM\s+(?:--platform=\S+\s+)?)(\S+)", re.IGNORECASE | re.MULTILINE)


def rendered_base_dockerfile(root: str | Path, base: BaseImage, tag: str) -> str:
    """A base image's Dockerfile with its parent (a project base image) named with ``tag``.

    A base built on a public image is returned as written.
    """
    text = base.dockerfile.read_text()
    if base.parent is None:
        return text
    parent = base_image_name(root, base.parent, tag)
    return _FROM_LINE.sub(lambda m: f"{m.group(1)}{parent}", text, count=1)
