"""The components a change touches: what a pull request's component tests must run, and which rules it changes.

A component is touched when a file in its own folder changed, or something it depends on did:

- a resource it declares outside its folder (its task library, ``src/<task>/<task>_lib/``);
- its task's API (``src/<task>/api/``): formats and interfaces every component of the task uses;
- the task's test resources (``resources_test/<task>/``), which every component test reads;
- the shared science package (``common/pertsci/``), which any component may import; the shared
  API pieces (``common/api/``), which any component may merge (a rare change, so all are tested
  rather than each config's merges traced); and the files its image is built from (``docker/``:
  the Dockerfiles and requirement files of its base image's chain).

Changes to the harness alone touch no component: the harness's own tests cover it. The answer is a
list of component folders, so that CI runs exactly their tests.

A change to the benchmark's rules (:func:`rules_changes`: a task's API, the test resources and their
recipes, a dataset loader, a metric, a control) is named at the top of a pull request's checks, and a pull request that
also adds or edits a method (:func:`changed_methods`) fails them until a maintainer approves it
(``openpert changed --rules``).

A change that touches nothing but methods' own folders (:func:`method_only_change`) gets a pull
request's short path of checks: those methods' tests and their tasks' tests, their tasks' bundled
benchmark, and a real model's answers where a method needs one; anything else gets the whole suite
(``openpert changed --scope``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

from openpert.config.task import discover_tasks
from openpert.config.viash import ComponentConfig, ConfigError, config_files, read_config
from openpert.images.components import image_files


def git(root: Path, *args: str) -> str:
    """The output of ``git <args>`` in ``root`` (stripped); a failure is a :class:`ConfigError` with git's message."""
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ConfigError(f"{root}: git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def changed_files(root: Path, base: str) -> list[Path]:
    """Files that differ between ``base`` (a git ref) and the working tree, plus untracked ones.

    Raises
    ------
    ConfigError
        When git cannot compare (not a checkout, unknown ref), with git's own message.
    """
    merge_base = git(root, "merge-base", base, "HEAD")
    names = (git(root, "diff", "--name-only", merge_base).splitlines()
             + git(root, "ls-files", "--others", "--exclude-standard").splitlines())
    return sorted({(root / name).resolve() for name in names if name})


def _within(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def _depends_on(config: ComponentConfig, path: Path) -> bool:
    folder = config.path.parent.resolve()
    if _within(path, folder):
        return True
    task_dir = config.task_dir
    if task_dir is not None and (_within(path, task_dir / "api")
                                 or _within(path, config.root / "resources_test" / task_dir.name)):
        return True
    if _within(path, config.root / "common" / "pertsci") or _within(path, config.root / "common" / "api"):
        return True
    if any(_within(path, f.resolve()) for f in image_files(config)):
        return True  # the component's image (its base chain) is built from it
    for res in config.resources:
        try:
            if _within(path, config.resource_path(res)):
                return True
        except ConfigError:
            continue  # a bad resource is lint's to report; it cannot make a file a dependency
    return False


def touched_components(root: Path, paths: Iterable[Path]) -> list[Path]:
    """Folders of the components that ``paths`` (changed files) touch, sorted.

    A changed file that is a component's config makes that component touched even when the config
    no longer reads (the test will say why); a deleted component is not listed.
    """
    root = Path(root).resolve()
    paths = [Path(p).resolve() for p in paths]
    touched: set[Path] = set()
    for task in discover_tasks(root):
        for config_path in config_files(task.dir):
            folder = config_path.parent
            if any(_within(p, folder) for p in paths):
                touched.add(folder)
                continue
            try:
                config = read_config(config_path)
            except ConfigError:
                continue  # unreadable and unchanged: not this change's doing
            if any(_depends_on(config, p) for p in paths):
                touched.add(folder)
    return sorted(touched)


#: Folders (relative to the project root, ``*`` one task) whose files are the benchmark's rules: what
#: every method is scored by. A change there needs a maintainer's review (``.github/CODEOWNERS``).
RULES_FOLDERS = ("src/*/api", "resources_test", "scripts/create_test_resources")
#: Component types whose change is a change of the rules: they make the data, score methods or set the scale.
RULES_COMPONENT_TYPES = ("dataset", "metric", "control_method")


def rules_changes(root: Path, paths: Iterable[Path]) -> tuple[list[str], list[str]]:
    """What in ``paths`` (changed files) changes the benchmark's rules, and the methods the change adds or edits.

    Returns
    -------
    rules
        One line each, sorted: a file of :data:`RULES_FOLDERS`, and every dataset loader, metric and
        control method the change touches (:func:`touched_components`: its own files, its task
        library, the shared science, its image), named with its type.
    methods
        Method folders with a changed file of their own.

    Paths are relative to ``root``.
    """
    root = Path(root).resolve()
    paths = [Path(p).resolve() for p in paths]
    rules = {str(p.relative_to(root)) for p in paths if p.is_relative_to(root) and _in_rules_folder(p.relative_to(root))}
    methods = []
    for folder in touched_components(root, paths):
        comp_type = _component_type(folder)
        if comp_type in RULES_COMPONENT_TYPES:
            rules.add(f"{folder.relative_to(root)} ({comp_type.replace('_', ' ')})")
        elif comp_type == "method" and any(_within(p, folder) for p in paths):
            methods.append(str(folder.relative_to(root)))
    return sorted(rules), methods


def _in_rules_folder(relative: Path) -> bool:
    for folder in RULES_FOLDERS:
        pattern = Path(folder).parts
        if len(relative.parts) > len(pattern) and all(want in ("*", got) for want, got in zip(pattern, relative.parts)):
            return True
    return False


def _component_type(folder: Path) -> str | None:
    try:
        return read_config(folder / "config.vsh.yaml").type
    except ConfigError:
        return None


def method_only_change(root: Path, paths: Iterable[Path]) -> list[Path] | None:
    """The method folders ``paths`` (changed files) lie in, when every one lies in a method's own folder.

    Returns ``None`` when a changed file lies anywhere else (the harness, the science package, a
    task library, a test, a workflow, a control, ...), in a deleted method, or when nothing changed:
    such a change gets the whole test suite. A method's own folder holds its config, script and the
    files beside them, which nothing but that method reads.
    """
    root = Path(root).resolve()
    folders = {_method_folder(root, Path(p).resolve()) for p in paths}
    # A deleted method, or a folder whose config does not read as a method's, gets the whole suite.
    if not folders or None in folders or any(_component_type(f) != "method" for f in folders):
        return None
    return sorted(folders)


def _method_folder(root: Path, path: Path) -> Path | None:
    """The folder ``src/<task>/methods/<name>`` that ``path`` lies in, if any."""
    if not path.is_relative_to(root):
        return None
    parts = path.relative_to(root).parts
    if len(parts) < 5 or parts[0] != "src" or parts[2] != "methods":
        return None  # a file of methods/ itself, or outside every task's methods
    return root.joinpath(*parts[:4])


def check_scope(root: Path, paths: Iterable[Path]) -> dict[str, str]:
    """What a pull request's checks must cover, as ``openpert changed --scope`` prints it for ``$GITHUB_OUTPUT``.

    ``scope`` is ``methods`` for a method-only change (:func:`method_only_change`), else ``full``;
    ``methods`` the changed methods' folders, ``tasks`` their tasks and ``llm_tasks`` the tasks
    where a changed method needs a language model (space-separated; empty for ``full``).
    """
    from openpert.run.sandbox import needs_llm

    methods = method_only_change(root, paths)
    if methods is None:
        return {"scope": "full", "methods": "", "tasks": "", "llm_tasks": ""}
    root = Path(root).resolve()
    llm = {m for m in methods if needs_llm(read_config(m / "config.vsh.yaml"))}
    return {"scope": "methods", "methods": " ".join(str(m.relative_to(root)) for m in methods),
            "tasks": " ".join(sorted({m.parent.parent.name for m in methods})),
            "llm_tasks": " ".join(sorted({m.parent.parent.name for m in llm}))}
