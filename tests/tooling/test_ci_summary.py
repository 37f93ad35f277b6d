"""``tests/tooling/ci_summary.py``: each failed check in one line with its fix, read from the checks' real outputs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tooling import ci_summary
from tooling.ci_summary import (
    Failure,
    actionlint_failures,
    benchmark_failures,
    collect,
    image_test_failures,
    junit_failures,
    lint_failures,
    ruff_failures,
    summary_markdown,
)

from openpert.cli import main


def _tool(name: str) -> str | None:
    return shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)


@pytest.mark.skipif(_tool("ruff") is None, reason="ruff is not installed")
def test_ruff_problems_name_place_code_and_fix(tmp_path):
    (tmp_path / "bad.py").write_text("import os\n\nprint(undefined_name)\n")
    out = subprocess.run([_tool("ruff"), "check", "--no-cache", "--isolated", "--output-format=concise", "bad.py"],
                         cwd=tmp_path, capture_output=True, text=True).stdout
    (tmp_path / "ruff.txt").write_text(out)
    failures = ruff_failures(tmp_path / "ruff.txt")
    assert [(f.where, f.message.split()[0]) for f in failures] == [("bad.py:1:8", "F401"), ("bad.py:3:7", "F821")]
    assert failures[1].fix == "edit the line (`ruff rule F821` explains the rule)"
    unused = failures[0]
    assert "`os` imported but unused" in unused.message and unused.fix == "`ruff check --fix .`"
    line = unused.markdown()
    assert "\n" not in line and line.startswith("- **ruff** `bad.py:1:8`: F401")


@pytest.mark.skipif(_tool("actionlint") is None, reason="actionlint is not installed")
def test_actionlint_problems_name_the_workflow_line_and_rule(tmp_path):
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "ci.yml").write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n"
                                      "      - run: echo ${{ github.nope }}\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    out = subprocess.run([_tool("actionlint"), "-oneline"], cwd=tmp_path, capture_output=True, text=True).stdout
    (tmp_path / "actionlint.txt").write_text(out)
    (failure,) = actionlint_failures(tmp_path / "actionlint.txt")
    assert failure.where == ".github/workflows/ci.yml:6:23" and 'property "nope" is not defined' in failure.message
    assert failure.fix == "edit the workflow (rule `expression`), then run `actionlint .github/workflows/ci.yml`"


def test_failed_and_erroring_tests_from_pytest_junit_xml(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_sample.py").write_text(
        "import pytest\n\n"
        "def test_ok():\n    assert True\n\n"
        "def test_wrong():\n    assert 1 + 1 == 3, 'arithmetic is off'\n\n"
        "class TestGroup:\n    def test_in_class(self):\n        raise ValueError('bad value')\n\n"
        "@pytest.fixture\ndef broken():\n    raise RuntimeError('fixture broke')\n\n"
        "def test_setup(broken):\n    pass\n")
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:openpert", "-q",
                    "--junitxml", str(tmp_path / "junit.xml"), "tests/test_sample.py"], cwd=tmp_path, capture_output=True)
    failures = junit_failures(tmp_path / "junit.xml")
    by_node = {f.where: f for f in failures}
    assert set(by_node) == {"tests/test_sample.py::test_wrong", "tests/test_sample.py::TestGroup::test_in_class",
                            "tests/test_sample.py::test_setup"}
    assert by_node["tests/test_sample.py::test_wrong"].message.startswith("test failed: AssertionError: arithmetic is off")
    assert by_node["tests/test_sample.py::test_setup"].message.startswith("test error:")
    assert by_node["tests/test_sample.py::test_wrong"].fix == "reproduce with `python -m pytest 'tests/test_sample.py::test_wrong'`"


def test_a_failed_component_test_points_at_openpert_test(tmp_path):
    (tmp_path / "junit.xml").write_text(
        '<testsuites><testsuite name="pytest"><testcase classname="src.t.methods.m.config.vsh.yaml" name="component[m]">'
        '<failure message="ComponentTestError: m failed: exited with code 1">trace</failure></testcase></testsuite></testsuites>')
    (failure,) = junit_failures(tmp_path / "junit.xml")
    assert failure.where == "src/t/methods/m/config.vsh.yaml::component[m]" and failure.fix == "`openpert test src/t/methods/m`"


def test_a_component_test_stopped_at_its_time_limit_is_not_told_to_rerun(tmp_path):
    (tmp_path / "junit.xml").write_text(
        '<testsuites><testsuite name="pytest"><testcase classname="src.t.methods.m.config.vsh.yaml" name="component[m]">'
        '<failure message="ComponentTestError: m failed: time limit exceeded (600 s); label lowtime (10 min) set the limit: '
        'replace it with midtime (1 h)">trace</failure></testcase></testsuite></testsuites>')
    (failure,) = junit_failures(tmp_path / "junit.xml")
    assert "openpert test" not in failure.fix and "`src/t/methods/m/config.vsh.yaml`" in failure.fix


def test_a_cut_short_or_missing_report_is_a_failure_not_a_pass(tmp_path):
    (tmp_path / "junit.xml").write_text("<testsuites><testsuite><testcase")
    (cut,) = junit_failures(tmp_path / "junit.xml")
    assert "not valid JUnit XML" in cut.message
    (missing,) = lint_failures(tmp_path / "lint.txt")
    assert missing.check == "openpert lint" and "the step did not run" in missing.message
    (nothing,) = benchmark_failures(tmp_path / "results")
    assert "the benchmark did not run" in nothing.message


def test_openpert_lint_problems_are_one_line_each(project_copy, tmp_path, capsys, monkeypatch):
    method = project_copy / "src/tiny/methods/group_mean/config.vsh.yaml"
    method.write_text(method.read_text().replace("label: Group mean", "label: " + "G" * 31))
    monkeypatch.chdir(project_copy)
    assert main(["lint"]) == 1
    (tmp_path / "lint.txt").write_text(capsys.readouterr().out)
    failures = lint_failures(tmp_path / "lint.txt")
    (failure,) = [f for f in failures if f.where == str(method)]
    assert failure.message == "label: 31 characters; at most 30"
    assert all(f.where and f.message for f in failures), "the totals lines are not problems"
    assert failure.fix == f"as the message says, then `openpert lint {method}`"


def test_the_lint_fix_of_a_script_problem_is_a_command_lint_accepts(project_copy, tmp_path, capsys, monkeypatch):
    """A layout problem names the script; its fix lints the component's folder, which lint reads."""
    script = project_copy / "src/tiny/methods/group_mean/script.py"
    script.write_text("import openpert.files\n" + script.read_text())
    monkeypatch.chdir(project_copy)
    assert main(["lint"]) == 1
    (tmp_path / "lint.txt").write_text(capsys.readouterr().out)
    (failure,) = [f for f in lint_failures(tmp_path / "lint.txt") if "script.py" in f.where]
    command = failure.fix.split("`")[1].split()
    assert command == ["openpert", "lint", str(script.parent)]
    assert main(command[1:]) == 1 and "script.py" in capsys.readouterr().out
    # lint given the script itself says what to give it, rather than reading it as a config
    assert main(["lint", str(script)]) == 2
    assert f"not a component config; lint reads config.vsh.yaml files: give it the component's folder (openpert lint {script.parent})" in capsys.readouterr().err


def test_a_job_stopped_at_its_time_limit_is_not_told_to_rerun(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(json.dumps({
        "methods": [{"id": "slow", "config": "src/t/methods/slow/config.vsh.yaml"}],
        "failures": [{"job_id": "d/slow", "component": "slow", "stage": "method", "exit_code": 143,
                      "reason": "time limit exceeded (600 s); label lowtime (10 min) set the limit: replace it with midtime"}]}))
    (failure,) = benchmark_failures(results)
    assert "openpert test" not in failure.fix and "`src/t/methods/slow/config.vsh.yaml`" in failure.fix
    assert "replace it with midtime" in failure.message


def test_failed_benchmark_jobs_name_job_reason_and_component(fixture_runs):
    _, mixed, mixed_out, clean_out = fixture_runs
    assert benchmark_failures(clean_out) == []
    failures = benchmark_failures(mixed_out)
    expected = {f["job_id"] for f in mixed["failures"]}
    assert {f.where for f in failures} == expected and expected
    raised = next(f for f in failures if f.where.endswith("/fail_raise"))
    assert "method job failed (exit 1)" in raised.message and raised.fix == "`openpert test src/tiny/methods/fail_raise`"


def test_the_summary_counts_failures_and_names_what_passed(tmp_path, capsys):
    failures = [Failure("ruff", "a.py:1:1", "F401 unused", "`ruff check --fix .`")]
    text = summary_markdown(failures, ["ruff", "openpert lint", "ruff"])
    assert text.splitlines() == ["### 1 failed check(s)", "", failures[0].markdown(), "", "Passed: openpert lint."]
    assert summary_markdown([], ["ruff", "tests"]) == "### All checks passed\n\nruff, tests: no problem.\n"
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "results.json").write_text(json.dumps({"failures": [], "config_errors": []}))
    (tmp_path / "lint.txt").write_text("layout: 0 violation(s) in 3 modules\nno problems found\n")
    summary = tmp_path / "summary.md"
    summary.write_text("earlier\n")
    assert ci_summary.main(["--lint", str(tmp_path / "lint.txt"), "--results", str(tmp_path / "results"), "-o", str(summary)]) == 0
    assert summary.read_text() == "earlier\n### All checks passed\n\nopenpert lint, benchmark: no problem.\n"
    assert collect() == ([], [])
    assert ci_summary.main([]) == 2 and "give at least one of" in capsys.readouterr().err


def test_a_component_failing_in_its_image_environment_points_at_test_images(tmp_path):
    from openpert.images.component_tests import ComponentTestResult, EnvBuild, TestRun, format_summary

    root = tmp_path / "project"
    failed = root / "src/t/methods/needs_xgb"
    pytest_tail = ("F\n=== FAILURES ===\nE   ModuleNotFoundError: No module named 'xgboost'\n"
                   "FAILED src/t/methods/needs_xgb/config.vsh.yaml::component[needs_xgb] - ComponentTestError: needs_xgb failed\n"
                   "1 failed in 3.1s")
    run = TestRun(envs=[EnvBuild("core", tmp_path / "envs/core", None, 2)], seconds=9.0, results=[
        ComponentTestResult(root / "src/t/methods/fine", "core", "passed", 3.0, "1 passed"),
        ComponentTestResult(failed, "core", "failed", 3.1, pytest_tail)])
    (tmp_path / "image_tests.txt").write_text(format_summary(run, root))
    (failure,) = image_test_failures(tmp_path / "image_tests.txt")
    assert failure.where == "src/t/methods/needs_xgb"
    # the module's name is what the author acts on: the summary keeps it, and says where to declare it
    assert failure.message == "in the core environment: no module named 'xgboost': the image does not hold it"
    assert "docker engine of `src/t/methods/needs_xgb/config.vsh.yaml`" in failure.fix
    assert failure.fix.endswith("then `bash scripts/test_images.sh src/t/methods/needs_xgb`")
    # another failure keeps pytest's line
    other = pytest_tail.replace("E   ModuleNotFoundError: No module named 'xgboost'", "E   ValueError: bad")
    run.results[1] = ComponentTestResult(failed, "core", "failed", 3.1, other)
    (tmp_path / "image_tests.txt").write_text(format_summary(run, root))
    (failure,) = image_test_failures(tmp_path / "image_tests.txt")
    assert failure.message == ("in the core environment: FAILED src/t/methods/needs_xgb/config.vsh.yaml::component[needs_xgb]"
                               " - ComponentTestError: needs_xgb failed")
    assert failure.fix.startswith("`bash scripts/test_images.sh src/t/methods/needs_xgb`")
