"""The layout rules on a small project built to break each of them, one at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from openpert.config.layout_rules import check_component, check_import_direction, imported_modules
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


def test_unparsable_python_is_an_error_naming_the_file(tmp_path):
    bad = _write(tmp_path / "bad.py", "def f(:\n")
    with pytest.raises(ConfigError, match="bad.py: line 1"):
        imported_modules(bad)
