"""The project's layout rules: which code may import which, and what a component must declare.

Three rooms, and imports run one way (harness -/-> science -/-> task):

- the harness, ``common/openpert/``: imports neither the science package nor any task's code;
- the shared science package, ``common/pertsci/``: never imports the harness nor any task;
- each task, ``src/<task>/``: its library ``src/<task>/<task>_lib/`` and its components import the
  science package and their own library, never the harness (except ``src/<task>/analysis.py``, a
  harness plugin run in-process) and never another task.

For components, the rules are about what reaches a job: every repository module a script imports
is declared in its ``resources`` (its task library as ``/src/<task>/<task>_lib``, a helper next to
the script by its file name); nothing under ``src/`` refers to ``tests/``; and only dataset
components may read the project's shared data folder, through their declared ``--shared_data``
input. Imports are read with :mod:`ast`, so a rule never depends on how the code is formatted.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
import threading
from collections.abc import Iterable
from pathlib import Path

from openpert.config.viash import ComponentConfig, ConfigError, config_files, read_config

HARNESS = "openpert"
SCIENCE = "pertsci"
#: Task code that runs inside the harness's process rather than in a job.
HARNESS_PLUGINS = ("analysis.py",)
#: Words that only code reading the shared data folder on its own would contain.
_SHARED_DATA_LOOKUPS = re.compile(r"OPENPERT_SHARED_DATA|shared_data_dir|\.\./shared/data|\bshared/data\b")
_TESTS_REFERENCE = re.compile(r"(^|[\s'\"(/])tests/")


@dataclasses.dataclass(frozen=True)
class Violation:
    """One broken rule: where, which rule, and what is wrong."""

    path: Path
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.message}"


@dataclasses.dataclass
class LayoutReport:
    """Every violation found, and how many modules of each room were read."""

    violations: list[Violation]
    modules: dict[str, int]

    def summary(self) -> str:
        counts = ", ".join(f"{room} {n}" for room, n in self.modules.items())
        return f"layout: {len(self.violations)} violation(s) in {sum(self.modules.values())} modules ({counts})"


#: CPython 3.11's AST constructor is not safe across threads (it fails with "AST constructor
#: recursion depth mismatch"); the local engine reads components' imports from several threads.
_AST_LOCK = threading.Lock()


@functools.lru_cache(maxsize=4096)
def source_imports(source: str, filename: str = "<source>") -> tuple[tuple[int, str, tuple[str, ...]], ...]:
    """Every absolute import of Python source: ``(line, dotted module, names imported from it)``.

    ``import a.b`` gives ``(line, "a.b", ())``; ``from a import b, c`` gives ``(line, "a", ("b", "c"))``.
    Relative imports are skipped. Read with :mod:`ast` (cached by source), so formatting never matters.

    Raises
    ------
    SyntaxError
        When the source is not valid Python.
    """
    with _AST_LOCK:
        tree = ast.parse(source, filename=filename)
    found: list[tuple[int, str, tuple[str, ...]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module, tuple(alias.name for alias in node.names)))
    return tuple(found)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, dotted module)`` of every absolute import in a Python file (relative ones are skipped)."""
    try:
        imports = source_imports(path.read_text(), str(path))
    except SyntaxError as err:
        raise ConfigError(f"{path}: line {err.lineno}: not valid Python: {err.msg}") from err
    return [(line, module) for line, module, _ in imports]


def python_files(folder: Path) -> list[Path]:
    """The Python files at or below a folder, sorted (none when it is no folder; caches left out)."""
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts) if folder.is_dir() else []


def task_libraries(root: Path) -> dict[str, str]:
    """Import name of each task library -> its task (``perturbqa_lib`` -> ``perturbqa``)."""
    return {lib.name: lib.parent.name for lib in sorted((root / "src").glob("*/*_lib")) if lib.is_dir()}


def check_import_direction(root: Path) -> LayoutReport:
    """Imports that run the wrong way between the harness, the science package and the tasks."""
    root = Path(root)
    libraries = task_libraries(root)
    violations: list[Violation] = []
    counts = {"harness": 0, "science": 0, "tasks": 0}

    def top(module: str) -> str:
        return module.split(".", 1)[0]

    for path in python_files(root / "common" / HARNESS):
        counts["harness"] += 1
        for line, module in imported_modules(path):
            if top(module) == SCIENCE or top(module) in libraries:
                violations.append(Violation(path, line, "harness-imports-science", f"the harness imports {module}"))
    for path in python_files(root / "common" / SCIENCE):
        counts["science"] += 1
        for line, module in imported_modules(path):
            if top(module) == HARNESS:
                violations.append(Violation(path, line, "science-imports-harness", f"the science package imports {module}"))
            elif top(module) in libraries:
                violations.append(Violation(path, line, "science-imports-task", f"the science package imports {module}"))
    for task_dir in sorted(p for p in (root / "src").iterdir() if (p / "api").is_dir()) if (root / "src").is_dir() else []:
        for path in python_files(task_dir):
            counts["tasks"] += 1
            plugin = path.parent == task_dir and path.name in HARNESS_PLUGINS
            for line, module in imported_modules(path):
                owner = libraries.get(top(module))
                if top(module) == HARNESS and not plugin:
                    violations.append(Violation(path, line, "task-imports-harness",
                                                f"task code imports {module}; components run without the harness"))
                elif owner is not None and owner != task_dir.name:
                    violations.append(Violation(path, line, "task-imports-task",
                                                f"{task_dir.name} imports {module} of the task {owner}; move shared code to {SCIENCE}"))
    return LayoutReport(violations, counts)


def check_component(config: ComponentConfig) -> list[Violation]:
    """A component's undeclared imports, references to ``tests/`` and reads of the shared data folder."""
    violations: list[Violation] = []
    folder = config.path.parent
    task_dir = config.task_dir
    libraries = task_libraries(config.root)
    declared: set[Path] = set()
    for res in config.resources:
        if isinstance(res, dict) and isinstance(res.get("path"), str):
            declared.add(config.resource_path(res).resolve())
    sources = [p for p in python_files(folder) if p.resolve() in declared]
    for path in sources:
        for line, module in imported_modules(path):
            name = module.split(".", 1)[0]
            if name in libraries and task_dir is not None and libraries[name] == task_dir.name:
                needed = (task_dir / name).resolve()
                if needed not in declared:
                    violations.append(Violation(path, line, "undeclared-resource",
                                                f"imports {module}; declare {{type: file, path: /src/{task_dir.name}/{name}}} in resources"))
            elif (folder / f"{name}.py").is_file() and (folder / f"{name}.py").resolve() not in declared:
                violations.append(Violation(path, line, "undeclared-resource",
                                            f"imports {name}, a file next to the script; declare {{type: file, path: {name}.py}} in resources"))
        text = path.read_text()
        if config.type != "dataset":
            for match in _SHARED_DATA_LOOKUPS.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                violations.append(Violation(path, line, "undeclared-shared-data",
                                            f"{match.group(0)!r}: only dataset components read the shared data folder, "
                                            "through their --shared_data input; give methods what they need as dataset files"))
    if config.type != "dataset" and any(a.name == "shared_data" for a in config.arguments):
        violations.append(Violation(config.path, 1, "undeclared-shared-data", "only dataset components take --shared_data"))
    config_text = config.path.read_text()
    for path, text in [(config.path, config_text), *((p, p.read_text()) for p in sources)]:
        for match in _TESTS_REFERENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            violations.append(Violation(path, line, "refers-to-tests", "nothing under src/ refers to tests/; keep test support in the task"))
    return violations


def check_project(root: Path, configs: Iterable[Path] | None = None) -> LayoutReport:
    """The import direction of the whole project, plus the component rules of ``configs`` (default: all)."""
    root = Path(root)
    report = check_import_direction(root)
    paths = config_files(root / "src") if configs is None else configs
    for path in paths:
        try:
            report.violations.extend(check_component(read_config(path)))
        except ConfigError:
            continue  # lint_config reports configs that cannot be read, with the reason
    return report
