"""The repository keeps its own rules: the layout, the component configs, and ruff."""

from __future__ import annotations

import subprocess
import sys

from project_paths import ROOT

from openpert.cli import main
from openpert.config.layout_rules import check_dependencies, check_project


def test_layout_rules_hold_for_every_module_and_component():
    report = check_project(ROOT)
    assert [str(v) for v in report.violations] == []
    assert report.modules["harness"] > 0 and report.modules["science"] > 0 and report.modules["tasks"] > 0


def test_every_import_is_declared_and_every_declaration_imported(tmp_path):
    """pyproject.toml declares what the harness, pertsci and the tasks import, and nothing else."""
    assert [str(v) for v in check_dependencies(ROOT)] == []
    # the same code against an edited pyproject.toml: a dependency dropped, one nothing imports added
    for folder in ("common", "src"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    text = (ROOT / "pyproject.toml").read_text()
    edited = text.replace('    "markupsafe>=3.0",\n', "").replace('    "jinja2>=3.1",\n', '    "jinja2>=3.1",\n    "matplotlib>=3.7",\n')
    assert edited.count("\n") == text.count("\n")
    (tmp_path / "pyproject.toml").write_text(edited)
    found = {(v.rule, v.message.split(" ")[1 if v.rule == "undeclared-dependency" else 0]) for v in check_dependencies(tmp_path)}
    assert found == {("undeclared-dependency", "markupsafe"), ("unused-dependency", "matplotlib")}


def test_openpert_lint_passes_on_the_repository(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["lint"]) == 0, capsys.readouterr().out
    assert "layout: 0 violation(s)" in capsys.readouterr().out


def test_lint_of_a_path_that_does_not_exist_is_an_error(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["lint", "src/no_such_task"]) == 2
    assert "src/no_such_task: no such file or folder" in capsys.readouterr().err


def test_ruff_passes():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:]
