"""The build order of the project's images: base images in ``FROM`` order, then every component.

A build is tagged once (default: ``<version>-<commit>[-dirty]``) and every image of it uses that
tag, components built on the base images of the same build. The Dockerfiles are written below an
output folder (default ``target/docker/``, which git ignores): ``base/<name>/Dockerfile`` for the
base images (their parent named with the build's tag) and ``<namespace>/<name>/Dockerfile`` for the
components, each with its ``Dockerfile.dockerignore``; the build context of all is the project root.

As data (:func:`build_order`) and as text (:func:`format_build_order`): ``tsv`` lines
``<image>\\t<dockerfile>\\t<context>`` for a shell loop (the images workflow), ``json``, or a
readable ``text`` listing.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from openpert.files import shown_path, write_text_atomic
from openpert.images.bases import base_images
from openpert.images.components import component_configs, image_declaration
from openpert.images.dockerfiles import DOCKERIGNORE, component_dockerfile, rendered_base_dockerfile
from openpert.images.naming import ImageName, base_image_name, commit_tag, component_image_name

FORMATS = ("text", "tsv", "json")


@dataclasses.dataclass(frozen=True)
class BuildStep:
    """One image to build.

    Attributes
    ----------
    image
        Its name and tag.
    dockerfile
        The Dockerfile to build (written below the output folder).
    context
        The build context (the project root).
    kind
        ``base`` or ``component``.
    source
        What the Dockerfile comes from: ``docker/<name>/Dockerfile`` or the component's config.
    builds_on
        The image it starts from (a project base image of the same build, or a public image).
    """

    image: ImageName
    dockerfile: Path
    context: Path
    kind: str
    source: Path
    builds_on: str

    def to_dict(self) -> dict[str, str]:
        return {"image": str(self.image), "dockerfile": str(self.dockerfile), "context": str(self.context),
                "kind": self.kind, "source": str(self.source), "builds_on": self.builds_on}


def build_order(root: str | Path, tag: str | None = None, out_dir: str | Path | None = None,
                paths: list[str | Path] | None = None) -> list[BuildStep]:
    """Write the Dockerfiles of a build and return its steps in build order.

    Parameters
    ----------
    root
        The project root.
    tag
        The build's tag (default: :func:`~openpert.images.naming.commit_tag`).
    out_dir
        Where the Dockerfiles are written (default ``<root>/target/docker``).
    paths
        Component folders to build (default: every component of ``src/``); the base images are
        always all listed, since they are what components start from.
    """
    root = Path(root).resolve()
    tag = tag or commit_tag(root)
    out = Path(out_dir).resolve() if out_dir else root / "target" / "docker"
    steps: list[BuildStep] = []
    bases = base_images(root)
    for base in bases.values():
        dockerfile = out / "base" / base.name / "Dockerfile"
        _write(dockerfile, rendered_base_dockerfile(root, base, tag))
        builds_on = str(base_image_name(root, base.parent, tag)) if base.parent else base.from_image
        steps.append(BuildStep(image=base_image_name(root, base.name, tag), dockerfile=dockerfile, context=root,
                               kind="base", source=base.dockerfile, builds_on=builds_on))
    rank = {name: index for index, name in enumerate(bases)}
    components = []
    for config in component_configs(root, paths):
        declaration = image_declaration(config)
        components.append((rank.get(declaration.base.name if declaration.base else "", -1), str(config.path), config, declaration))
    for _, _, config, declaration in sorted(components, key=lambda item: (item[0], item[1])):
        dockerfile = out / (config.namespace or "") / config.name / "Dockerfile"
        _write(dockerfile, component_dockerfile(config, tag))
        builds_on = str(declaration.image.with_tag(tag)) if declaration.base else str(declaration.image)
        steps.append(BuildStep(image=component_image_name(config, tag), dockerfile=dockerfile, context=root,
                               kind="component", source=config.path, builds_on=builds_on))
    return steps


def _write(dockerfile: Path, text: str) -> None:
    write_text_atomic(dockerfile, text)
    write_text_atomic(dockerfile.with_name(dockerfile.name + ".dockerignore"), DOCKERIGNORE)


def format_build_order(steps: list[BuildStep], fmt: str = "text", root: str | Path | None = None) -> str:
    """The build order as ``text`` (readable, paths relative to ``root``), ``tsv`` or ``json``."""
    if fmt == "tsv":
        return "".join(f"{s.image}\t{s.dockerfile}\t{s.context}\n" for s in steps)
    if fmt == "json":
        return json.dumps([s.to_dict() for s in steps], indent=2) + "\n"
    if fmt != "text":
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")

    def rel(path: Path) -> str:
        return shown_path(path, None if root is None else Path(root).resolve())

    lines = []
    for number, step in enumerate(steps, 1):
        lines.append(f"{number:3d}. {step.kind:9s} {step.image}")
        lines.append(f"     from {step.builds_on}; {rel(step.dockerfile)} (from {rel(step.source)})")
    n_base = sum(s.kind == "base" for s in steps)
    lines.append(f"{len(steps)} images: {n_base} base, {len(steps) - n_base} components")
    return "\n".join(lines) + "\n"
