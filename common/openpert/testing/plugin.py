"""Component tests: a pytest plugin that gives every component its own test.

Every ``config.vsh.yaml`` below the project's ``src/`` becomes a test item (``pytest src/``,
``openpert test src/<task>/methods/<name>``). The test runs the component on the task's test
resources (the first dataset below ``resources_test/<task>/``; metrics also read its example
prediction) with the parameters of ``info.test_default``, validates every output against the API,
and checks what the component type promises (a metric writes exactly the metric ids it declares,
with finite values; a prediction names its method). The config must also pass ``openpert lint``, but for the scaffold's placeholder text, which lint alone reports.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from openpert.config.viash import (
    ComponentConfig,
    ConfigError,
    find_project_root,
    read_config,
)

# The job runner (numpy and the rest) is imported when a component test runs: pytest loads this plugin
# in every session of the environment, most of which run none.
if TYPE_CHECKING:
    from openpert.run.component import RunResult


class ComponentTestError(AssertionError):
    """A component test failed; the message says why and shows the end of the log."""


def test_inputs(config: ComponentConfig) -> tuple[dict[str, Path], dict[str, Path]]:
    """The test inputs of a component: (argument -> file, format id -> file of the test dataset).

    Raises
    ------
    ConfigError
        When the task has no test dataset or it lacks a file the component reads.
    """
    from openpert.config.task import Task, task_of

    task = task_of(config)
    if task is None or config.type == "dataset":
        return {}, {}
    folder = config.root / "resources_test" / task.dir.name
    datasets = Task(task.dir).find_datasets(folder) if folder.is_dir() else []
    if not datasets:
        raise ConfigError(f"{folder}: no test dataset for task {task.name}; run scripts/create_test_resources.sh")
    files = dict(datasets[0].files)
    prediction = datasets[0].dir / task.format_filename(task.prediction_format)
    if prediction.is_file():
        files[task.prediction_format] = prediction
    args = {}
    for arg in config.file_inputs:
        if arg.format_id in files:
            args[arg.name] = files[arg.format_id]
        elif arg.required and arg.default is None:
            raise ConfigError(f"{config.path}: --{arg.name} ({arg.format_id}) has no file in {datasets[0].dir}")
    return args, files


def _load_responder(config: ComponentConfig):
    """The ``info.test_llm.responder`` function of a component (``file.py:function``)."""
    import importlib.util

    spec_text = (config.info.get("test_llm") or {}).get("responder")
    if not isinstance(spec_text, str) or ":" not in spec_text:
        raise ConfigError(f"{config.path}: info.test_llm.responder must be '<file>.py:<function>'")
    filename, func = spec_text.rsplit(":", 1)
    # as resource paths: '/' is the project root, anything else is next to the config
    path = config.root / filename.lstrip("/") if filename.startswith("/") else config.path.parent / filename
    if not path.is_file():
        raise ConfigError(f"{config.path}: info.test_llm.responder: {path} not found")
    if config.task_dir is not None and str(config.task_dir) not in sys.path:
        # A responder may use its task's library (src/<task>/<task>_lib), as the components do.
        sys.path.insert(0, str(config.task_dir))
    spec = importlib.util.spec_from_file_location(f"openpert_test_responder_{config.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, func):
        raise ConfigError(f"{config.path}: info.test_llm.responder: {path} has no function {func!r}")
    return getattr(module, func)


def run_component_test(config: ComponentConfig, work_dir: Path, run_folders: pytest.TempPathFactory | None = None) -> RunResult:
    """Run one component's test in ``work_dir``; raise :class:`ComponentTestError` when it fails.

    ``run_folders``: the test run's temporary folders (pytest's ``tmp_path_factory``), where the test
    of a component that makes builds (``info.builds``) runs once for the whole run and keeps its
    outputs, for its own test and for the tests of the datasets cut from them (a build takes seconds
    to minutes). ``None``: each test runs the build itself, in ``work_dir``.
    """
    if run_folders is not None and config.build_entries:
        return _shared_build_test(config, run_folders)
    if config.info.get("test_llm"):
        from openpert.testing.llm_server import OpenAIStubServer

        with OpenAIStubServer(_load_responder(config)) as server:
            extra = {"llm_base_url": server.base_url, "llm_model": "stub-model", "llm_cache_dir": "none"}
            known = {a.name for a in config.arguments}
            return _run_component_test(config, work_dir, {k: v for k, v in extra.items() if k in known}, run_folders)
    return _run_component_test(config, work_dir, {}, run_folders)


def _shared_build_test(build: ComponentConfig, run_folders: pytest.TempPathFactory) -> RunResult:
    """The test of a build component, run once per test run (:func:`once_per_test_run`) by the first
    test that needs it: the component's own, or that of a dataset cut from its build."""
    from openpert.testing.once_per_run import once_per_test_run

    name = f"openpert-build-{build.task_dir.name if build.task_dir else 'project'}-{build.name}"
    return once_per_test_run(run_folders, name, lambda folder: run_component_test(build, folder))


def _built_inputs(config: ComponentConfig, work_dir: Path, run_folders: pytest.TempPathFactory | None) -> dict[str, Path]:
    """The inputs of a dataset component cut from builds: the outputs of the build of its first
    ``info.datasets`` entry that names one, made by that build component's own test (in ``work_dir``,
    or once per test run: see :func:`run_component_test`)."""
    from openpert.config.task import task_of
    from openpert.engines.plan import build_entries

    build_id = next(e["build"] for e in config.dataset_entries if "build" in e)
    builds = build_entries(task_of(config))
    if build_id not in builds:
        raise ConfigError(f"{config.path}: info.datasets: build {build_id!r} is no info.builds id of the task")
    build = builds[build_id][0]
    made = {build.argument(arg).format_id: Path(path) for arg, path in run_component_test(build, work_dir, run_folders).outputs.items()}
    return {a.name: made[a.format_id] for a in config.file_inputs if a.format_id in made}


def _run_component_test(config: ComponentConfig, work_dir: Path, extra_args: dict,
                        run_folders: pytest.TempPathFactory | None) -> RunResult:
    from openpert.config.formats import compared_attribute
    from openpert.config.lint import PLACEHOLDER, lint_config
    from openpert.config.task import task_of
    from openpert.engines.plan import label_resources, limits_for
    from openpert.files import read_tail
    from openpert.results.collect import read_score
    from openpert.run.component import run_component

    # The scaffold's placeholder text is lint's to report: a new component's code is tested as written.
    problems = [p for p in lint_config(config) if not p.endswith(PLACEHOLDER)]
    if problems:
        raise ComponentTestError("config problems:\n  " + "\n  ".join(problems))
    from openpert.config.project import shared_data_input

    inputs, context = test_inputs(config)
    if config.type == "dataset" and any("build" in e for e in config.dataset_entries):
        inputs = _built_inputs(config, work_dir / "build", run_folders)
    args: dict = {name: str(path) for name, path in {**shared_data_input(config, config.root), **inputs}.items()}
    outputs = {a.name: work_dir / "out" / (Path(str(a.example)).name if a.example else f"{a.name}.out") for a in config.file_outputs}
    args.update({k: str(v) for k, v in outputs.items()})
    for name, value in config.test_defaults().items():
        # File paths in test defaults are relative to the project root, wherever pytest runs from.
        if config.argument(name).is_file and isinstance(value, str) and not Path(value).is_absolute():
            value = str(config.root / value)
        args[name] = value
    args.update(extra_args)
    task = task_of(config)
    limits = limits_for(config.labels, label_resources(config.root), where=str(config.path))
    allowed = task.method_formats if task is not None and config.type == "method" else None
    from openpert.run.sandbox import SANDBOX_SETTINGS, sandbox_setting

    result = run_component(config, args, work_dir=work_dir / "run", limits=limits, context=context,
                           allowed_input_formats=allowed, sandbox=SANDBOX_SETTINGS[sandbox_setting()])
    if not result.succeeded:
        tail = read_tail(result.log, 3000).decode(errors="replace") if result.log.exists() else ""
        raise ComponentTestError(f"{config.name} failed: {result.reason}\n--- log (end) ---\n{tail}")
    if config.type == "metric":
        declared = [m["name"] for m in config.metrics]
        for path in result.outputs.values():
            raw, _, _ = read_score(path)
            if sorted(raw) != sorted(declared):
                raise ComponentTestError(f"{path}: metric ids {sorted(raw)} differ from info.metrics {sorted(declared)}")
            bad = [k for k, v in raw.items() if v != v or v in (float("inf"), float("-inf"))]
            if bad:
                raise ComponentTestError(f"{path}: non-finite values for {bad}")
    if config.type in ("method", "control_method") and task is not None:
        for path in result.outputs.values():
            if str(path).endswith(".h5ad"):
                # The one entry compared, not the whole of an output.
                try:
                    method_id = compared_attribute(path, "uns:method_id")
                except KeyError:
                    method_id = None
                if method_id != config.name:
                    raise ComponentTestError(f"{path}: uns['method_id'] is {method_id!r}, expected {config.name!r}")
    return result


class ComponentFile(pytest.File):
    def collect(self):
        yield ComponentItem.from_parent(self, name=f"component[{self.path.parent.name}]")


class ComponentItem(pytest.Item):
    def runtest(self) -> None:
        from openpert.config.project import data_folder, shared_data_dir

        config = read_config(self.path)
        if config.info.get("test_requires_shared_data") and data_folder(config.root) is None:
            pytest.skip(f"needs the public data: the shared data folder {shared_data_dir(config.root)} "
                        "(or OPENPERT_SHARED_DATA), or a store filled by `openpert data fetch`")
        # Removed when the test ends, passed or failed: a suite run would otherwise leave one per component.
        with tempfile.TemporaryDirectory(prefix=f"openpert-test-{config.name}-") as work:
            run_component_test(config, Path(work), self.config._tmp_path_factory)  # the tmp_path_factory fixture's

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, (ComponentTestError, ConfigError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"component test: {self.path.parent.relative_to(self.path.parents[3]) if len(self.path.parents) > 3 else self.path.parent}"


def pytest_collect_file(parent, file_path: Path):
    """Collect ``config.vsh.yaml`` files of the project's ``src/`` (not fixture projects, not api files)."""
    if file_path.name != "config.vsh.yaml":
        return None
    try:
        root = find_project_root(file_path)
    except ConfigError:
        return None
    try:
        project = find_project_root(Path(str(parent.config.rootpath)))
    except ConfigError:
        project = Path(str(parent.config.invocation_params.dir)).resolve()
    # Only the project pytest runs in: fixture projects inside tests/ hold components that fail on purpose.
    if root != project or not file_path.resolve().is_relative_to(root / "src"):
        return None
    return ComponentFile.from_parent(parent, path=file_path)


#: A file to which the session appends one JSON line per test report (its node id, phase, outcome,
#: duration and failure text): how the image tests, which run many components in one session, tell
#: each component's outcome apart.
ENV_OUTCOMES = "OPENPERT_TEST_OUTCOMES"


def _record_outcome(report) -> None:
    path = os.environ.get(ENV_OUTCOMES)
    if not path:
        return
    line = {"nodeid": report.nodeid, "when": getattr(report, "when", "collect"), "outcome": report.outcome,
            "seconds": getattr(report, "duration", 0.0), "text": report.longreprtext if report.failed or report.skipped else ""}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def pytest_runtest_logreport(report) -> None:
    """Record each phase of each test (see :data:`ENV_OUTCOMES`)."""
    _record_outcome(report)


def pytest_collectreport(report) -> None:
    """Record a file that failed to collect (see :data:`ENV_OUTCOMES`): its component's test failed."""
    if report.failed:
        _record_outcome(report)
