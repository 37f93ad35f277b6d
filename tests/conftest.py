"""Shared fixtures: a copy of the fixture project (tests/fixtures/project) with its test resources."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from openpert.config.task import Task
from openpert.config.viash import ConfigError, read_config
from openpert.config.viash_schema import ensure_schemas
from openpert.run.component import run_component
from openpert.testing.once_per_run import once_per_test_run, workers_lock

FIXTURE_PROJECT = Path(__file__).parent / "fixtures" / "project"

# The suite's workers share the machine's cores. An OpenMP thread (torch's, in the MiniLM and MLP
# tests that run in a worker) that has finished its part of an operation spins before it sleeps:
# between the hundreds of small operations of a forward pass, the second thread kept spinning, which
# cost the two-thread MiniLM comparisons 2 to 10 times the CPU of the one-thread ones (not a bit of
# their results changed). A passive thread sleeps at once. OpenMP reads it as it loads, before any
# test module imports torch; jobs are not affected (their environment is the sandbox's own).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Copies of the fixture project live in temporary folders with no ../shared and no manifest of the
# project beside them: they read the Viash schemas the repository's data store holds (fetched here
# once, from ../shared when it exists). Where they cannot be had, the tests that validate configs
# fail with the reason (tests/harness/config/test_viash_schema.py skips, naming the folder).
if not os.environ.get("OPENPERT_VIASH_SCHEMAS"):
    try:
        os.environ["OPENPERT_VIASH_SCHEMAS"] = str(ensure_schemas(FIXTURE_PROJECT.parents[2]).parent)
    except ConfigError as err:
        sys.stderr.write(f"conftest: {err}\n")

GOOD = ["group_mean", "shrunk_mean"]
FAILING = ["fail_raise", "fail_timeout", "fail_memory", "fail_invalid", "reads_solution"]


def make_test_resources(root: Path) -> Path:
    """Generate resources_test/tiny/syn/ of a fixture project copy with its own components."""
    out = root / "resources_test" / "tiny" / "syn"
    out.mkdir(parents=True)
    generator = read_config(root / "src/tiny/datasets/synthetic/config.vsh.yaml")
    result = run_component(generator, {"output_train": out / "train.h5ad", "output_test": out / "test.h5ad",
                                       "output_solution": out / "solution.h5ad", "dataset_id": "syn", "seed": 7},
                           work_dir=root / "_work" / "gen")
    assert result.succeeded, result.reason
    truth = read_config(root / "src/tiny/control_methods/truth/config.vsh.yaml")
    result = run_component(truth, {"input_train": out / "train.h5ad", "input_test": out / "test.h5ad",
                                   "input_solution": out / "solution.h5ad", "output": out / "prediction.h5ad"},
                           work_dir=root / "_work" / "truth")
    assert result.succeeded, result.reason
    shutil.rmtree(root / "_work")
    return out


@pytest.fixture(scope="session")
def tiny_project(tmp_path_factory) -> Path:
    """A fresh copy of the fixture project, with resources_test/tiny/syn/ generated."""
    root = tmp_path_factory.mktemp("fixture") / "project"
    shutil.copytree(FIXTURE_PROJECT, root)
    make_test_resources(root)
    return root


@pytest.fixture(scope="session")
def tiny_task(tiny_project) -> Task:
    return Task(tiny_project / "src" / "tiny")


@pytest.fixture()
def project_copy(tmp_path, tiny_project) -> Path:
    """A private copy of the fixture project (with test resources) that a test may modify."""
    root = tmp_path / "project"
    shutil.copytree(tiny_project, root)
    return root


@pytest.fixture(scope="session")
def fixture_runs(tiny_project, tmp_path_factory):
    """The fixture benchmark with the good methods only, and with the failing methods added (once per test run).

    Returns ``(clean results, mixed results, mixed results folder, clean results folder)``.
    """
    from openpert.engines.benchmark import run_benchmark

    def both_runs(folder: Path) -> tuple[dict, dict, Path, Path]:
        task = Task(tiny_project / "src" / "tiny")
        inputs = tiny_project / "resources_test" / "tiny"
        clean_out, out = folder / "clean", folder / "mixed"
        clean = run_benchmark(task, clean_out, input_dir=inputs, methods=GOOD, jobs=2, progress=False)
        mixed = run_benchmark(task, out, input_dir=inputs, methods=GOOD + FAILING, jobs=2, progress=False)
        return clean, mixed, out, clean_out

    return once_per_test_run(tmp_path_factory, "fixture_runs", both_runs)


@dataclass(frozen=True)
class BenchmarkRun:
    """A finished benchmark of the fixture task: its task folder, its input datasets, its results folder and results."""

    task_dir: Path
    inputs: Path
    out: Path
    results: dict
    methods: tuple[str, ...]
    metrics: tuple[str, ...]

    @property
    def task(self) -> Task:
        return Task(self.task_dir)

    def resume(self, **kwargs) -> dict:
        """The same benchmark again into the same results folder with ``resume=True`` (``kwargs`` override)."""
        from openpert.engines.benchmark import run_benchmark

        return run_benchmark(self.task, self.out, input_dir=self.inputs, resume=True,
                             **{"methods": list(self.methods), "metrics": list(self.metrics), **kwargs})


@pytest.fixture(scope="session")
def group_mean_run(tiny_project, tmp_path_factory) -> BenchmarkRun:
    """The fixture benchmark of group_mean, every control and the metric ``errors`` (8 jobs), once per test run.

    Tests read its results; a test that edits its results folder takes it as ``resumable_run``.
    """
    from openpert.engines.benchmark import run_benchmark

    def run(folder: Path) -> BenchmarkRun:
        task_dir, inputs, out = tiny_project / "src" / "tiny", tiny_project / "resources_test" / "tiny", folder / "out"
        methods, metrics = ("group_mean",), ("errors",)
        results = run_benchmark(Task(task_dir), out, input_dir=inputs, methods=list(methods), metrics=list(metrics),
                                jobs=2, progress=False)
        assert not results["failures"], results["failures"]
        return BenchmarkRun(task_dir, inputs, out, results, methods, metrics)

    return once_per_test_run(tmp_path_factory, "group_mean_run", run)


@pytest.fixture()
def resumable_run(group_mean_run, tmp_path_factory) -> Iterator[BenchmarkRun]:
    """``group_mean_run`` for a test that damages or edits its cache or outputs and resumes it.

    The test has the run to itself (a lock, across pytest-xdist workers), and finds it finished
    and whole: a resume first puts back whatever the test before it left, and publishes every
    output again in this process (which then knows them as copies of the cache).
    """
    with workers_lock(tmp_path_factory, "group_mean_run.edit"):
        restored = group_mean_run.resume(progress=False)
        assert not restored["failures"], f"the shared run could not be restored: {restored['failures']}"
        yield group_mean_run


@pytest.fixture()
def required_sandbox_unavailable():
    """Fails the test: ``$OPENPERT_SANDBOX=on`` requires the sandbox, and bubblewrap cannot run here."""
    from openpert.run import sandbox as sandboxing

    pytest.fail(f"$OPENPERT_SANDBOX=on requires the job sandbox, but it cannot run here: {sandboxing.unavailable_reason()}",
                pytrace=False)
