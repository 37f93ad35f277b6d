"""Component tests in image environments: openpert.images.component_tests.

The proof that matters: a component importing a package its image lacks fails its test in the
image's environment, and passes once its config declares the package. It runs in the repository's
real ``core`` environment (cached in ``.cache/images``, shared with scripts/test_images.sh).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from project_paths import ROOT
from sandbox_marks import needs_sandbox, reset_sandbox_probe

from openpert.config.viash import read_config
from openpert.config.viash_schema import VIASH_SCHEMA_VERSION
from openpert.images.component_tests import (
    format_summary,
    run_component_test,
    run_component_tests,
    sandboxed_command,
    test_components,
    test_environment,
)
from openpert.images.environments import ImageEnv, component_env, default_cache_dir

pytestmark = pytest.mark.slow

#: The real environments: the same key as the repository's, so built once for both.
CACHE = default_cache_dir(ROOT)


def _needs_six(project: Path, declared: bool) -> Path:
    """A method of the fixture project that imports six (not in core), declaring it or not."""
    folder = project / "src" / "tiny" / "methods" / "needs_six"
    if not folder.exists():
        shutil.copytree(project / "src" / "tiny" / "methods" / "group_mean", folder)
        script = folder / "script.py"
        script.write_text("import six  # noqa: F401 - what the image must provide\n" + script.read_text())
    config = folder / "config.vsh.yaml"
    text = config.read_text().replace("name: group_mean", "name: needs_six")
    text = text.replace("    tag: 0.0.1\n    setup: [{type: python, packages: [six==1.17.0]}]\n", "    tag: 0.0.1\n")
    if declared:
        text = text.replace("    tag: 0.0.1\n", "    tag: 0.0.1\n    setup: [{type: python, packages: [six==1.17.0]}]\n")
    config.write_text(text)
    return folder


def test_a_component_importing_what_its_image_lacks_fails_and_passes_once_declared_and_components_share_their_environment(
        fixture_with_images, monkeypatch):
    """One run of both components shows the failure, the shared environment and the summary; then the declared package.

    Both run in one pytest session, and each is judged by its own test."""
    from openpert.images import component_tests

    folder = _needs_six(fixture_with_images, declared=False)
    env = component_env(read_config(folder / "config.vsh.yaml"), cache_dir=CACHE)
    assert env.base == "core" and not env.packages
    sessions: list[list[str]] = []
    real_session = component_tests.run_component_tests

    def session(folders, *args, **kwargs):
        sessions.append([f.name for f in folders])
        return real_session(folders, *args, **kwargs)

    monkeypatch.setattr(component_tests, "run_component_tests", session)
    lines: list[str] = []
    run = test_components(fixture_with_images, ["src/tiny/methods/group_mean", "src/tiny/methods/needs_six"],
                          cache_dir=CACHE, jobs=2, log=lines.append)
    assert sessions == [["group_mean", "needs_six"]]
    assert {r.folder.name: r.status for r in run.results} == {"group_mean": "passed", "needs_six": "failed"}
    assert "No module named 'six'" not in next(r.output for r in run.results if r.folder.name == "group_mean")
    assert len(run.envs) == 1 and run.envs[0].label == "core" and run.envs[0].components == 2
    (result,) = [r for r in run.results if r.folder.name == "needs_six"]
    assert result.status == "failed", result.output[-2000:]
    assert "No module named 'six'" in result.output
    assert result.command[1:] == ["-m", "pytest", str(folder.resolve()), "-p", "openpert.testing.plugin", "-p", "no:cacheprovider",
                                  "-q"]
    summary = format_summary(run, fixture_with_images)
    assert "--- failed: src/tiny/methods/needs_six [core]" in summary
    assert summary.rstrip().splitlines()[-1].startswith("1 passed, 1 failed in ")
    assert any(line.startswith("passed") and "src/tiny/methods/group_mean" in line for line in lines)

    _needs_six(fixture_with_images, declared=True)
    overlay = component_env(read_config(folder / "config.vsh.yaml"), cache_dir=CACHE)
    assert overlay.packages == ("six==1.17.0",)
    result = run_component_test(folder, overlay, fixture_with_images)
    assert result.status == "passed", result.output[-3000:]


def test_excluded_folders_are_left_out_and_a_public_image_is_an_error(fixture_with_images):
    config = fixture_with_images / "src" / "tiny" / "methods" / "group_mean" / "config.vsh.yaml"
    config.write_text(config.read_text().replace("    image: core\n    tag: 0.0.1\n", "    image: python:3.11\n"))
    run = test_components(fixture_with_images, ["src/tiny/methods"], exclude=["src/tiny/methods/fail_invalid",
                                                                              "src/tiny/methods/fail_memory",
                                                                              "src/tiny/methods/fail_raise",
                                                                              "src/tiny/methods/fail_timeout",
                                                                              "src/tiny/methods/llm_constant",
                                                                              "src/tiny/methods/reads_solution",
                                                                              "src/tiny/methods/shrunk_mean",
                                                                              "src/tiny/methods/spy_workdir"],
                          cache_dir=CACHE, log=lambda m: None)
    assert [(r.folder.name, r.status) for r in run.results] == [("group_mean", "error")]
    assert "not a base image of docker/" in run.results[0].output
    assert not run.envs


def test_the_test_process_sees_only_its_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    monkeypatch.setenv("PYTEST_ADDOPTS", "-x")
    env = ImageEnv(path=tmp_path / "env", base="core", key="k")
    variables = test_environment(env, tmp_path / "embed")
    assert "PYTHONPATH" not in variables and "PYTEST_ADDOPTS" not in variables
    assert variables["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1", "only the plugin the command names is loaded"
    assert variables["PYTHONNOUSERSITE"] == "1"
    assert variables["PATH"].startswith(str(tmp_path / "env" / "bin"))
    assert variables["OPENPERT_EMBED_CACHE"] == str(tmp_path / "embed"), "no cached embedding can stand in for the model"


# --- component tests in the sandbox ------------------------------------------------------------------------
#: A test file a pull request could put beside its component: it tries to plant code in the image
#: environment every component of the image shares, and in the project; it fails on purpose, so
#: that what it obtained shows in the output.
HOSTILE_TEST = """\
import os
import sys
import sysconfig


def test_plant():
    targets = [os.path.join(sys.prefix, "planted.txt"), os.path.join(sysconfig.get_paths()["purelib"], "sitecustomize.py"),
               os.path.join(os.getcwd(), "planted.txt")]
    results = []
    for target in targets:
        try:
            with open(target, "w") as fh:
                fh.write("print('planted')\\n")
            results.append(f"wrote:{target}")
        except OSError as err:
            results.append(f"refused:{target}:{err.strerror}")
    raise AssertionError("\\n".join(results))
"""


def _small_env(tmp_path: Path) -> ImageEnv:
    """A virtual environment of this interpreter that sees this one's packages and the harness (through a .pth)."""
    import site
    import subprocess
    import sys

    from openpert.images.environments import harness_source

    path = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    packages = next(path.glob("lib/python*/site-packages"))
    (packages / "shared.pth").write_text("\n".join([*site.getsitepackages(), str(harness_source() / "common")]) + "\n")
    return ImageEnv(path=path, base="core", key="test")


@needs_sandbox()
def test_a_hostile_component_test_cannot_write_into_its_image_environment(project_copy, tmp_path, monkeypatch):
    import tempfile

    host_tmp = tmp_path / "host-tmp"
    host_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(host_tmp))
    env = _small_env(tmp_path)
    folder = project_copy / "src" / "tiny" / "methods" / "group_mean"
    (folder / "test_hostile.py").write_text(HOSTILE_TEST)
    before = sorted(str(p) for p in env.path.rglob("*"))
    result = run_component_test(folder, env, project_copy, sandbox=True, timeout=600)
    assert result.status == "failed" and "1 failed, 1 passed" in result.output, result.output[-3000:]
    assert "wrote:/" not in result.output
    assert result.output.count("Read-only file system") >= 3, result.output[-3000:]
    assert sorted(str(p) for p in env.path.rglob("*")) == before
    assert not (project_copy / "planted.txt").exists()
    assert not list(host_tmp.iterdir()), "the test's temporary folders outlived it"


#: A pytest plugin that another package of an image registers (as zarr does): it fails every test it sees.
FOREIGN_PLUGIN = """\
def pytest_runtest_call(item):
    raise AssertionError("a plugin the component test did not ask for ran")
"""


@pytest.fixture(scope="module")
def judged_session(tiny_project, tmp_path_factory) -> tuple[Path, ImageEnv, list]:
    """One sandboxed session of group_mean, shrunk_mean with a failing test file of its own, and a folder with no
    component, in an environment where another package registers a pytest plugin that fails every test it sees.

    The tests below read its results: a session's start (pytest, the harness and the job) is most of its cost.

    Returns
    -------
    The project, the environment and the session's results (in the folders' order).
    """
    where = tmp_path_factory.mktemp("judged_session")
    project = where / "project"
    shutil.copytree(tiny_project, project)
    env = _small_env(where)
    packages = next(env.path.glob("lib/python*/site-packages"))
    (packages / "foreign_plugin.py").write_text(FOREIGN_PLUGIN)
    info = packages / "foreign_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: foreign-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nforeign = foreign_plugin\n")
    methods = project / "src" / "tiny" / "methods"
    (methods / "shrunk_mean" / "test_own.py").write_text("def test_own():\n    assert 1 == 2, 'its own test'\n")
    empty = project / "src" / "tiny" / "no_component"
    empty.mkdir()
    results = run_component_tests([methods / "group_mean", methods / "shrunk_mean", empty], env, project, sandbox=True,
                                  timeout=600)
    return project, env, results


@needs_sandbox()
def test_only_the_project_plugin_runs_in_a_component_test(judged_session):
    """Another package's pytest plugin is not loaded: it could change how the test runs (and costs seconds)."""
    _, _, results = judged_session
    result = results[0]
    assert result.folder.name == "group_mean", result
    assert result.status == "passed" and result.output == "1 passed", result.output[-3000:]
    assert not any("a plugin the component test did not ask for ran" in r.output for r in results), [r.output for r in results]


def test_a_required_sandbox_that_cannot_run_is_an_error_of_the_component_test(project_copy, tmp_path, monkeypatch):

    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    reset_sandbox_probe()
    try:
        env = ImageEnv(path=tmp_path / "env", base="core", key="k")
        result = run_component_test(project_copy / "src" / "tiny" / "methods" / "group_mean", env, project_copy, sandbox=True)
        assert result.status == "error"
        assert "a sandbox was required for component tests" in result.output and "bwrap is not installed" in result.output
    finally:
        monkeypatch.undo()
        reset_sandbox_probe()


def test_a_sandboxed_test_gets_no_credentials_and_its_own_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENPERT_LLM_API_KEY", "secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    env = ImageEnv(path=tmp_path / "env", base="core", key="k")
    (tmp_path / "env").mkdir()
    cmd, variables = sandboxed_command(["python", "-m", "pytest"], env, ROOT, tmp_path / "scratch",
                                       test_environment(env, tmp_path / "embed"))
    assert "secret" not in variables.values()
    assert variables["TMPDIR"] == "/tmp" and variables["OPENPERT_SANDBOX"] == "off"
    assert cmd[cmd.index(str(tmp_path / "scratch" / ".tmp")) - 1] == "--bind"
    # The job sandbox's own isolation and read-only root, starting in the project.
    assert {"--unshare-all", "--disable-userns", "--die-with-parent"} <= set(cmd)
    assert cmd[cmd.index("--chdir") + 1] == str(ROOT) and cmd[cmd.index("--chdir") - 2:cmd.index("--chdir")] == ["--remount-ro", "/"]
    # The image environment runs the test, not the runner's interpreter.
    assert sys.prefix not in cmd
    assert ["--ro-bind", str(tmp_path / "env"), str(tmp_path / "env")] == cmd[cmd.index(str(tmp_path / "env")) - 1:][:3]
    assert ["--ro-bind", str(ROOT), str(ROOT)] == cmd[cmd.index(str(ROOT)) - 1:][:3]


def test_a_sandboxed_test_reads_the_viash_schemas_the_host_keeps(tmp_path, monkeypatch):
    """The test validates its config against the schemas: the sandbox has neither network nor ../shared."""
    schemas = tmp_path / "schemas"
    (schemas / VIASH_SCHEMA_VERSION).mkdir(parents=True)
    monkeypatch.setenv("OPENPERT_VIASH_SCHEMAS", str(schemas))
    env = ImageEnv(path=tmp_path / "env", base="core", key="k")
    (tmp_path / "env").mkdir()
    cmd, variables = sandboxed_command(["python", "-m", "pytest"], env, ROOT, tmp_path / "scratch",
                                       test_environment(env, tmp_path / "embed"))
    folder = schemas / VIASH_SCHEMA_VERSION
    assert ["--ro-bind", str(folder), str(folder)] == cmd[cmd.index(str(folder)) - 1:][:3]
    assert variables["OPENPERT_VIASH_SCHEMAS"] == str(schemas)


def test_tests_start_while_later_environments_build_and_results_keep_the_components_order(fixture_with_images, monkeypatch,
                                                                                        tmp_path):
    """The overlay of needs_six builds while group_mean's test runs; each test waits for its own environment only."""
    import threading

    from openpert.images import component_tests

    _needs_six(fixture_with_images, declared=True)
    overlay_building = threading.Event()
    group_mean_tested = threading.Event()

    def component_env(config, **kwargs):
        if config.name == "needs_six":
            overlay_building.set()
            # The overlay is done only once the base's test has run: built one after the other, this never ends.
            assert group_mean_tested.wait(timeout=30), "the base environment's test waited for the overlay's build"
            return ImageEnv(path=tmp_path / "overlay", base="core", key="o", packages=("six==1.17.0",), built_seconds=1.0)
        return ImageEnv(path=tmp_path / "core", base="core", key="c", built_seconds=None)

    def run_component_tests(folders, env, root, **kwargs):
        (folder,) = folders  # one component per environment here
        if folder.name == "group_mean":
            assert overlay_building.wait(timeout=30)
            group_mean_tested.set()
        return [component_tests.ComponentTestResult(folder, env.label, "passed", 0.1, "")]

    monkeypatch.setattr(component_tests, "component_env", component_env)
    monkeypatch.setattr(component_tests, "run_component_tests", run_component_tests)
    run = test_components(fixture_with_images, ["src/tiny/methods/needs_six", "src/tiny/methods/group_mean"],
                          cache_dir=tmp_path, jobs=2, log=lambda m: None)
    assert [r.folder.name for r in run.results] == ["group_mean", "needs_six"]  # the components' order, as found
    assert all(r.status == "passed" for r in run.results)
    assert sorted((e.path.name, e.components, e.seconds) for e in run.envs) == [("core", 1, None), ("overlay", 1, 1.0)]


@needs_sandbox()
def test_a_session_judges_each_component_by_its_own_tests_and_names_one_it_ran_none_of(judged_session):
    """A failing test file beside one component fails that component only; a folder with no test is an error."""
    project, env, results = judged_session
    methods = project / "src" / "tiny" / "methods"
    empty = project / "src" / "tiny" / "no_component"
    assert [(r.folder.name, r.status) for r in results] == [("group_mean", "passed"), ("shrunk_mean", "failed"),
                                                            ("no_component", "error")], [r.output for r in results]
    assert results[0].output == "1 passed" and "its own test" not in results[0].output
    assert "its own test" in results[1].output and results[1].output.endswith("1 failed, 1 passed")
    assert f"pytest ran no test in {empty.resolve()}" in results[2].output
    assert results[1].command == [str(env.python), "-m", "pytest", str((methods / "shrunk_mean").resolve()),
                                  "-p", "openpert.testing.plugin", "-p", "no:cacheprovider", "-q"]
