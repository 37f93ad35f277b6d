"""The components a change touches, on a git checkout of the fixture project."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from openpert.config.viash import ConfigError
from openpert.testing.changed_components import changed_files, touched_components


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def checkout(project_copy) -> Path:
    (project_copy / "common" / "pertsci").mkdir(parents=True)
    (project_copy / "common" / "pertsci" / "de.py").write_text("x = 1\n")
    (project_copy / "common" / "openpert").mkdir(parents=True)
    (project_copy / "common" / "openpert" / "report.py").write_text("x = 1\n")
    _git(project_copy, "init", "-q", "-b", "main")
    _git(project_copy, "add", "-A")
    _git(project_copy, "commit", "-qm", "base")
    return project_copy


def _touched(root: Path) -> list[str]:
    return [str(p.relative_to(root / "src" / "tiny")) for p in touched_components(root, changed_files(root, "main"))]


def _append(path: Path) -> None:
    path.write_text(path.read_text() + "\n# changed\n")


def test_nothing_changed_touches_nothing(checkout):
    assert _touched(checkout) == []


def test_a_script_touches_its_component_only(checkout):
    _append(checkout / "src/tiny/methods/group_mean/script.py")
    assert _touched(checkout) == ["methods/group_mean"]


def test_a_task_library_touches_the_components_that_declare_it(checkout):
    _append(checkout / "src/tiny/tiny_lib/shrinkage.py")
    assert _touched(checkout) == ["methods/shrunk_mean"]


def test_the_api_and_the_science_package_touch_every_component_of_a_task(checkout):
    every = sorted(str(p.parent.relative_to(checkout / "src/tiny")) for p in (checkout / "src/tiny").rglob("config.vsh.yaml")
                   if "api" not in p.parts)
    _append(checkout / "src/tiny/api/file_test.yaml")
    assert _touched(checkout) == every
    _git(checkout, "checkout", "-q", "--", ".")
    _append(checkout / "common/pertsci/de.py")
    assert _touched(checkout) == every
    _git(checkout, "checkout", "-q", "--", ".")
    _append(checkout / "common/api/argument_group_llm.yaml")
    assert _touched(checkout) == every


def test_the_harness_touches_no_component(checkout):
    _append(checkout / "common/openpert/report.py")
    assert _touched(checkout) == []


def test_a_new_component_is_touched(checkout):
    shutil.copytree(checkout / "src/tiny/methods/group_mean", checkout / "src/tiny/methods/group_median")
    config = checkout / "src/tiny/methods/group_median/config.vsh.yaml"
    config.write_text(config.read_text().replace("name: group_mean", "name: group_median"))
    assert _touched(checkout) == ["methods/group_median"]


def test_an_unknown_base_is_an_error_naming_git(checkout):
    with pytest.raises(ConfigError, match="git merge-base nope HEAD failed"):
        changed_files(checkout, "nope")


def _rules(root: Path) -> tuple[list[str], list[str]]:
    from openpert.testing.changed_components import rules_changes

    return rules_changes(root, changed_files(root, "main"))


def test_a_method_alone_changes_no_rule(checkout):
    _append(checkout / "src/tiny/methods/group_mean/script.py")
    assert _rules(checkout) == ([], ["src/tiny/methods/group_mean"])


def test_the_api_test_resources_metrics_and_controls_are_the_rules(checkout):
    _append(checkout / "src/tiny/api/comp_method.yaml")
    _append(checkout / "src/tiny/metrics/errors/script.py")
    _append(checkout / "src/tiny/control_methods/truth/script.py")
    (checkout / "resources_test/tiny/syn/solution.h5ad").write_bytes(b"edited")
    (checkout / "scripts/create_test_resources").mkdir(parents=True)
    (checkout / "scripts/create_test_resources/tiny.sh").write_text("echo\n")
    rules, methods = _rules(checkout)
    assert [r for r in rules if not r.endswith(")")] == [
        "resources_test/tiny/syn/solution.h5ad", "scripts/create_test_resources/tiny.sh", "src/tiny/api/comp_method.yaml"]
    # The API touches every component: each metric and control is named, no method.
    assert "src/tiny/metrics/errors (metric)" in rules and "src/tiny/control_methods/truth (control method)" in rules
    assert "src/tiny/datasets/synthetic (dataset)" in rules
    assert not [r for r in rules if "/methods/" in r]
    assert methods == []


def test_the_cli_fails_rules_changed_with_a_method_unless_approved(checkout, monkeypatch, capsys):
    from openpert import cli

    monkeypatch.chdir(checkout)
    _append(checkout / "src/tiny/metrics/errors/script.py")
    assert cli.main(["changed", "--base", "main", "--rules"]) == 0
    assert "- `src/tiny/metrics/errors (metric)`" in capsys.readouterr().out
    _append(checkout / "src/tiny/methods/group_mean/script.py")
    assert cli.main(["changed", "--base", "main", "--rules"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("**This change changes the benchmark's rules**") and "`src/tiny/methods/group_mean`" in out
    assert "rules-change-approved" in out
    assert cli.main(["changed", "--base", "main", "--rules", "--approved"]) == 0


def test_a_change_within_methods_folders_is_method_only(checkout):
    from openpert.testing.changed_components import method_only_change

    _append(checkout / "src/tiny/methods/group_mean/script.py")
    (checkout / "src/tiny/methods/group_mean/notes.md").write_text("why\n")  # untracked, beside the script
    _append(checkout / "src/tiny/methods/shrunk_mean/config.vsh.yaml")
    assert method_only_change(checkout, changed_files(checkout, "main")) == [
        checkout / "src/tiny/methods/group_mean", checkout / "src/tiny/methods/shrunk_mean"]


@pytest.mark.parametrize("other", ["src/tiny/tiny_lib/shrinkage.py", "src/tiny/control_methods/truth/script.py",
                                   "common/pertsci/de.py", "common/openpert/report.py", "src/tiny/api/comp_method.yaml"])
def test_a_method_with_anything_else_gets_the_whole_suite(checkout, other):
    from openpert.testing.changed_components import method_only_change

    _append(checkout / "src/tiny/methods/group_mean/script.py")
    assert method_only_change(checkout, changed_files(checkout, "main")) is not None
    _append(checkout / other)
    assert method_only_change(checkout, changed_files(checkout, "main")) is None


def test_nothing_changed_or_a_deleted_method_gets_the_whole_suite(checkout):
    from openpert.testing.changed_components import method_only_change

    assert method_only_change(checkout, changed_files(checkout, "main")) is None
    shutil.rmtree(checkout / "src/tiny/methods/group_mean")
    assert method_only_change(checkout, changed_files(checkout, "main")) is None


def test_the_cli_prints_the_scope_for_the_workflow(checkout, monkeypatch, capsys):
    from openpert import cli

    monkeypatch.chdir(checkout)
    _append(checkout / "src/tiny/methods/llm_constant/script.py")
    _append(checkout / "src/tiny/methods/group_mean/script.py")
    assert cli.main(["changed", "--base", "main", "--scope"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "scope=methods", "methods=src/tiny/methods/group_mean src/tiny/methods/llm_constant", "tasks=tiny", "llm_tasks=tiny"]
    _append(checkout / "src/tiny/metrics/errors/script.py")
    assert cli.main(["changed", "--base", "main", "--scope"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "scope=full"
