"""The ``openpert images`` command line (also ``python -m openpert.images``).

Subcommands
-----------
``build-order [PATH...] [--format text|tsv|json] [--tag TAG] [--output-dir DIR]``
    Write the Dockerfiles of a build and list the images in build order.
``dockerfile COMPONENT [--tag TAG]``
    Print the Dockerfile of a component's image.
``tag [--release]``
    Print the build tag (``<version>-<commit>[-dirty]``) or, with ``--release``, the version.
``lint [PATH...]``
    hadolint on the base Dockerfiles and every component's generated one, and what keeps a
    component's declaration from being reproducible.
``env BASE|COMPONENT [--rebuild]``
    Build (or find cached) the environment of a base image or a component; print its folder.
``prune``
    Remove cached environments that no longer match the requirement files.
``test [PATH...] [--exclude PATH] [-j N]``
    Run component tests, each in the environment of its image, with a summary.
``pin BASE|--tools [--python PYTHON]``
    Re-pin a requirement file from an environment (default: this interpreter's).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from openpert.config.viash import ConfigError, find_project_root


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``images`` subcommands to ``parser`` (the ``images`` parser of ``openpert``)."""
    sub = parser.add_subparsers(dest="images_command", required=True)

    p = sub.add_parser("build-order", help="write the Dockerfiles of a build and list its images in build order")
    p.add_argument("paths", nargs="*", help="component folders (default: every component of src/)")
    p.add_argument("--format", choices=["text", "tsv", "json"], default="text",
                   help="tsv: '<image>\\t<dockerfile>\\t<context>' lines for a shell loop")
    p.add_argument("--tag", help="tag of every image of the build (default: <version>-<commit>[-dirty])")
    p.add_argument("--output-dir", help="where the Dockerfiles are written (default: target/docker)")

    p = sub.add_parser("dockerfile", help="print the Dockerfile of a component's image")
    p.add_argument("component", help="the component's folder or config.vsh.yaml")
    p.add_argument("--tag", help="tag of the base image (default: the one its config names)")

    p = sub.add_parser("tag", help="print the build tag of this checkout")
    p.add_argument("--release", action="store_true", help="the project version alone (what configs name)")

    p = sub.add_parser("lint", help="hadolint every Dockerfile; check components' image declarations")
    p.add_argument("paths", nargs="*", help="component folders (default: every component of src/)")

    p = sub.add_parser("env", help="build (or find) the environment of a base image or a component")
    p.add_argument("target", help="a base image name (core, ml...) or a component folder")
    p.add_argument("--rebuild", action="store_true", help="build again even when cached")
    p.add_argument("--cache-dir", help="where environments are kept (default: .cache/images or $OPENPERT_IMAGE_ENVS)")

    p = sub.add_parser("prune", help="remove cached environments that no longer match the requirement files")
    p.add_argument("--cache-dir", help="where environments are kept (default: .cache/images or $OPENPERT_IMAGE_ENVS)")

    p = sub.add_parser("test", help="run component tests, each in the environment of its image")
    p.add_argument("paths", nargs="*", help="component folders or folders above them (default: src/)")
    p.add_argument("--exclude", action="append", default=[], help="leave out the components below this folder (repeatable)")
    p.add_argument("-j", "--jobs", type=int, default=2, help="component tests at once (default 2)")
    p.add_argument("--timeout", type=float, help="seconds one component's test may take")
    p.add_argument("--cache-dir", help="where environments are kept (default: .cache/images or $OPENPERT_IMAGE_ENVS)")

    p = sub.add_parser("pin", help="re-pin a base image's requirements.txt from an environment")
    p.add_argument("base", nargs="?", help="the base image (its '# requires:' line says what to pin)")
    p.add_argument("--tools", action="store_true", help="re-pin docker/test_requirements.txt instead")
    p.add_argument("--python", default=sys.executable, help="interpreter of the environment to pin from (default: this one)")


def run(ns: argparse.Namespace) -> int:
    """Carry out an ``images`` subcommand; the exit status."""
    root = find_project_root(Path.cwd())
    handlers = {"build-order": _build_order, "dockerfile": _dockerfile, "tag": _tag, "lint": _lint, "env": _env,
                "prune": _prune, "test": _test, "pin": _pin}
    return handlers[ns.images_command](ns, root)


def _build_order(ns: argparse.Namespace, root: Path) -> int:
    from openpert.images.build_order import build_order, format_build_order

    steps = build_order(root, tag=ns.tag, out_dir=ns.output_dir, paths=ns.paths or None)
    sys.stdout.write(format_build_order(steps, ns.format, root))
    return 0


def _dockerfile(ns: argparse.Namespace, root: Path) -> int:
    from openpert.images.components import component_configs
    from openpert.images.dockerfiles import component_dockerfile

    for config in component_configs(root, [ns.component]):
        sys.stdout.write(component_dockerfile(config, ns.tag))
    return 0


def _tag(ns: argparse.Namespace, root: Path) -> int:
    from openpert.images.naming import commit_tag, project_naming

    print(project_naming(root).version if ns.release else commit_tag(root))
    return 0


def _lint(ns: argparse.Namespace, root: Path) -> int:
    import tempfile

    from openpert.images.bases import base_images
    from openpert.images.components import component_configs, declaration_problems
    from openpert.images.dockerfiles import component_dockerfile
    from openpert.images.hadolint import lint_dockerfiles

    problems: list[str] = []
    configs = component_configs(root, ns.paths or None)
    for config in configs:
        problems.extend(declaration_problems(config))
    with tempfile.TemporaryDirectory(prefix="openpert-dockerfiles-") as folder:
        files = [base.dockerfile for base in base_images(root).values()]
        named: dict[str, str] = {}
        for index, config in enumerate(configs):
            try:
                text = component_dockerfile(config)
            except ConfigError as err:
                problems.append(str(err))
                continue
            path = Path(folder) / f"{index}.Dockerfile"
            path.write_text(text)
            named[str(path)] = f"{config.path.parent.relative_to(root)} (generated Dockerfile)"
            files.append(path)
        for finding in lint_dockerfiles(files):
            for tmp, name in named.items():
                finding = finding.replace(tmp, name)
            problems.append(finding)
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problem(s)" if problems else f"no problems found ({len(configs)} components)")
    return 1 if problems else 0


def _env(ns: argparse.Namespace, root: Path) -> int:
    from openpert.images.bases import base_images
    from openpert.images.components import component_configs
    from openpert.images.environments import base_env, component_env

    if ns.target in base_images(root):
        env = base_env(root, ns.target, cache_dir=ns.cache_dir, rebuild=ns.rebuild)
    else:
        (config,) = component_configs(root, [ns.target])[:1]
        env = component_env(config, cache_dir=ns.cache_dir, rebuild=ns.rebuild)
    print(env.path)
    return 0


def _prune(ns: argparse.Namespace, root: Path) -> int:
    from openpert.images.environments import prune_envs

    removed = prune_envs(root, cache_dir=ns.cache_dir, log=lambda message: None)
    for folder in removed:
        print(f"removed {folder}")
    print(f"{len(removed)} environment(s) removed")
    return 0


def _test(ns: argparse.Namespace, root: Path) -> int:
    from openpert.images.component_tests import format_summary, test_components

    result = test_components(root, ns.paths or None, exclude=ns.exclude, cache_dir=ns.cache_dir, jobs=ns.jobs,
                             timeout=ns.timeout)
    print(format_summary(result, root))
    return 1 if result.failed else 0


def _pin(ns: argparse.Namespace, root: Path) -> int:
    from openpert.files import write_text_atomic
    from openpert.images.bases import DOCKER_DIR, TEST_REQUIREMENTS, base_chain
    from openpert.images.requirements import format_requirements, pin_requirements, read_requirements

    if ns.tools == bool(ns.base):
        raise ConfigError("openpert images pin: name a base image or give --tools (one of them)")
    if ns.tools:
        path, parents = root / DOCKER_DIR / TEST_REQUIREMENTS, []
    else:
        chain = base_chain(root, ns.base)
        path, parents = chain[-1].requirements_path, [b.requirements() for b in chain[:-1]]
    current = read_requirements(path)
    if not current.requires:
        raise ConfigError(f"{path}: no '# requires: ...' line saying which packages to pin")
    description = "\n".join(line.removeprefix("#").removeprefix(" ") for line in path.read_text().splitlines()
                            if line.startswith("#") and not line.lstrip("# ").startswith("requires:"))
    pins = pin_requirements(ns.python, current.requires, parents)
    write_text_atomic(path, format_requirements(pins, current.requires, description))
    print(f"{path}: {len(pins)} pins from {ns.python}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m openpert.images``: the same subcommands as ``openpert images``."""
    parser = argparse.ArgumentParser(prog="python -m openpert.images", description="Base images, component images and "
                                     "their environments.")
    add_arguments(parser)
    ns = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return run(ns)
    except ConfigError as err:
        print(f"openpert images: error: {err}", file=sys.stderr)
        return 2
