"""Component tests in image environments: does each component run with what its image declares?

One component's test is ``<env>/bin/python -m pytest <component folder> -p openpert.testing.plugin -p no:cacheprovider -q``
run from the project root: the project's pytest plugin runs the component on its test resources
and validates its outputs, all inside the environment of the image the component names, so a
component that imports something its image lacks fails there. Up to :data:`BATCH` components of
one environment run in one such session (their folders on one command line), each judged by the
reports of its own tests.

What could hide a missing package is kept out: the caller's ``PYTHONPATH``, user site-packages and
pytest options are dropped, and the embedding cache is a new empty folder for each test (a cached
embedding would spare the component from loading the text model).

A component's folder may hold test files of its own, which pytest runs: code from a pull request,
in an environment that every component of its image shares. Where bubblewrap works (and unless
``$OPENPERT_SANDBOX`` is ``off``; ``on`` requires it), the whole test runs in a sandbox like a
job's (:func:`sandboxed_command`): the image environment, the folders its path files name, the
project and the public data read-only; a private ``/tmp`` and home, removed when the test ends;
no network beyond the sandbox's own loopback; only the variables a test needs. The component's
job inside it then runs without a sandbox of its own (the test's is the boundary).

:func:`test_components` builds each environment needed once (components of one base image share
it; a component that adds packages gets an overlay), runs the tests, and reports the time of
every build and test.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from openpert.config.project import shared_data_dir
from openpert.config.viash import ComponentConfig, ConfigError
from openpert.config.viash_schema import ensure_schemas, schema_dir
from openpert.data.store import default_store_dir
from openpert.files import shown_path
from openpert.images.components import component_configs
from openpert.images.environments import (
    ImageEnv,
    Log,
    component_env,
    component_env_request,
    harness_source,
    log_to_stderr,
)
from openpert.run import sandbox as sandboxing

#: The pytest plugin that turns a component's config into its test.
PLUGIN = "openpert.testing.plugin"
#: The most components of one environment whose tests run in one pytest session.
BATCH = 10

#: Variables of the caller that would let a test see packages its environment lacks, or change pytest.
_DROPPED = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTEST_ADDOPTS", "PYTEST_PLUGINS",
            "PYTEST_XDIST_AUTO_NUM_WORKERS", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")


@dataclasses.dataclass
class ComponentTestResult:
    """The outcome of one component's test in its image environment.

    ``status`` is ``passed``, ``failed``, ``skipped`` or ``error`` (no environment could be made, or
    pytest collected nothing).
    """

    folder: Path
    env: str
    status: str
    seconds: float
    output: str
    command: list[str] = dataclasses.field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status in ("passed", "skipped")


def test_environment(env: ImageEnv, embed_cache: Path) -> dict[str, str]:
    """The process environment of a component test in ``env``."""
    variables = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    variables["VIRTUAL_ENV"] = str(env.path)
    variables["PATH"] = f"{env.path / 'bin'}{os.pathsep}{variables.get('PATH', '')}"
    variables["PYTHONNOUSERSITE"] = "1"
    # Only the project's plugin (named on the command line) is loaded: another package's plugin
    # (zarr registers one) could change how a test runs, and it costs seconds in a sandbox, where the
    # modules of a plugin's package are assertion-rewritten on every start (a read-only checkout
    # cannot cache them).
    variables["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    variables["OPENPERT_EMBED_CACHE"] = str(embed_cache)
    # As the text image sets them: the model ships in a package, nothing is fetched.
    variables["HF_HUB_OFFLINE"] = "1"
    variables["TRANSFORMERS_OFFLINE"] = "1"
    return variables


# Not a test of this module: pytest must not collect it from here.
test_environment.__test__ = False  # type: ignore[attr-defined]

#: Variables of :func:`test_environment` that pass into a sandboxed test (no credentials, no host paths of the caller's).
SANDBOX_VARIABLES = ("PATH", "VIRTUAL_ENV", "PYTHONNOUSERSITE", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "LANG", "LC_ALL",
                     "OPENPERT_SHARED_DATA", "OPENPERT_DATA", *sandboxing.THREAD_VARIABLES)


def _path_file_folders(env: ImageEnv) -> list[Path]:
    """Existing folders outside ``env`` that its ``.pth`` files put on ``sys.path`` (editable installs)."""
    found: list[Path] = []
    for pth in sorted(env.path.glob("lib/python*/site-packages/*.pth")):
        try:
            lines = pth.read_text(errors="replace").splitlines()
        except OSError:
            continue  # unreadable: Python skips it too
        for line in lines:
            line = line.strip()
            if not line or line.startswith(("#", "import ")) or not os.path.isabs(line):
                continue
            folder = Path(line).resolve()
            if folder.is_dir() and not folder.is_relative_to(env.path.resolve()) and folder not in found:
                found.append(folder)
    return found


def _base_interpreter(env: ImageEnv) -> list[Path]:
    """The folders of the interpreter the environment's ``python`` links to (``pyvenv.cfg`` names it)."""
    folders: list[Path] = []
    real = Path(os.path.realpath(env.python))
    folders.append(real.parent.parent if real.parent.name == "bin" else real.parent)
    try:
        cfg = (env.path / "pyvenv.cfg").read_text(errors="replace")
    except OSError:
        cfg = ""
    for line in cfg.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            home = Path(value.strip())
            folders.append(home.parent if home.name == "bin" else home)
    return folders


def sandboxed_command(command: Sequence[str], env: ImageEnv, root: Path, scratch: Path,
                      variables: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The ``bwrap`` command line and environment that run a component test in a sandbox.

    Parameters
    ----------
    command
        The test's command (its interpreter is the environment's).
    env
        The image environment: bound read-only at its own path, with its base interpreter and the
        folders its ``.pth`` files name (the checkout of an editable install).
    root
        The project: bound read-only at its own path, as are the harness's checkout and the
        public data folders (shared data, data store) where they exist.
    scratch
        A new folder of the caller's, the sandbox's work folder: its ``.tmp`` and ``.home`` become
        the test's ``/tmp`` and home.
    variables
        The test's environment (:func:`test_environment`); only :data:`SANDBOX_VARIABLES` pass.

    Returns
    -------
    command, environment
        Run the command with that environment as its whole environment.
    """
    read_only: list[Path] = []
    # The Viash schemas the test validates its config with, wherever the host keeps them (the
    # sandbox has no network to download them, nor the host's ../shared or cache).
    schemas = schema_dir(root)
    for folder in [env.path, *_base_interpreter(env), *_path_file_folders(env), root, harness_source(),
                   shared_data_dir(root), default_store_dir(), schemas]:
        folder = Path(folder)
        if folder.is_dir() and not any(folder == seen or seen in folder.parents for seen in read_only):
            read_only.append(folder)
    # The test runs in the image environment (bound with the rest, at its own path), not the runner's.
    box = sandboxing.Sandbox(scratch, shared=read_only, chdir=PurePosixPath(root), bind_python=False)
    (box.tmp / "embeddings").mkdir(parents=True, exist_ok=True)
    cmd = box.command(list(command))
    inside = {k: v for k, v in variables.items() if k in SANDBOX_VARIABLES}
    inside.update({
        "HOME": str(sandboxing.HOME_DIR),
        "TMPDIR": str(sandboxing.TMP_DIR),
        "LANG": inside.get("LANG", "C.UTF-8"),
        "PYTHONDONTWRITEBYTECODE": "1",  # the project is read-only: no __pycache__ to write
        "OPENPERT_EMBED_CACHE": str(sandboxing.TMP_DIR / "embeddings"),
        # This sandbox is the boundary: the component's job inside runs without one of its own.
        sandboxing.ENV_SANDBOX: "off",
    })
    if schemas.is_dir():
        inside["OPENPERT_VIASH_SCHEMAS"] = str(schemas.parent)
    return cmd, inside


def _use_sandbox(sandbox: bool | None) -> bool:
    """Whether a component test runs sandboxed: ``sandbox`` or ``$OPENPERT_SANDBOX``, ``auto`` where bubblewrap works.

    Raises
    ------
    ConfigError
        The sandbox is required where bubblewrap cannot run (the reason says why), or the
        variable holds no setting.
    """
    if sandbox is None:
        sandbox = sandboxing.SANDBOX_SETTINGS[sandboxing.sandbox_setting()]
    if sandbox is False:
        return False
    if sandboxing.available():
        return True
    if sandbox:
        raise ConfigError(f"a sandbox was required for component tests but bubblewrap cannot be used here: "
                          f"{sandboxing.unavailable_reason()}")
    return False


def component_test_command(env: ImageEnv, folders: Sequence[Path]) -> list[str]:
    """The pytest command that runs the tests of the components in ``folders`` in ``env``."""
    return [str(env.python), "-m", "pytest", *map(str, folders), "-p", PLUGIN, "-p", "no:cacheprovider", "-q"]


def _outcomes(records: list[dict], folders: Sequence[Path], root: Path) -> dict[Path, list[dict]]:
    """The test reports of a session (see :data:`openpert.testing.plugin.ENV_OUTCOMES`), by component folder."""
    by_folder: dict[Path, list[dict]] = {folder: [] for folder in folders}
    for record in records:
        where = (root / str(record.get("nodeid", "")).split("::", 1)[0]).resolve()
        owner = max((f for f in folders if where.is_relative_to(f)), key=lambda f: len(f.parts), default=None)
        if owner is not None:
            by_folder[owner].append(record)
    return by_folder


def _component_result(folder: Path, env: ImageEnv, records: list[dict], session: subprocess.CompletedProcess | None,
                      session_output: str, root: Path) -> ComponentTestResult:
    """One component's result from its share of a session's test reports."""
    command = component_test_command(env, [folder])
    seconds = sum(float(r.get("seconds") or 0.0) for r in records)
    tests: dict[str, str] = {}
    for record in records:
        outcome, nodeid = record.get("outcome"), record.get("nodeid", "")
        if outcome == "failed" or (outcome == "skipped" and tests.get(nodeid) != "failed"):
            tests[nodeid] = outcome
        elif record.get("when") == "call":
            tests.setdefault(nodeid, outcome)
    counts = {s: sum(v == s for v in tests.values()) for s in ("failed", "passed", "skipped")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    if not tests:
        ended = "it ended before reaching them" if session is None or session.returncode not in (0, 5) else "it collected none"
        return ComponentTestResult(folder, env.label, "error", seconds,
                                   f"{session_output[-3000:]}\npytest ran no test in {folder} ({ended}; is it a component "
                                   f"of the project at {root}?)", command)
    texts = [f"_____ {r['nodeid']} ({r['when']}) _____\n{r['text']}" for r in records if r.get("text") and r.get("outcome") == "failed"]
    status = "failed" if counts["failed"] else "skipped" if not counts["passed"] else "passed"
    return ComponentTestResult(folder, env.label, status, seconds, "\n".join([*texts, summary]), command)


def run_component_tests(folders: Sequence[str | Path], env: ImageEnv, root: str | Path, timeout: float | None = None,
                        sandbox: bool | None = None) -> list[ComponentTestResult]:
    """Run the tests of several components of one environment in one pytest session (see the module docstring).

    One session instead of one per component spares each component the start of pytest, the
    harness and its imports; the outcome of each is told apart by the test reports the project's
    plugin records (:data:`openpert.testing.plugin.ENV_OUTCOMES`). Never raises for a failing test.

    Parameters
    ----------
    folders, env, root
        The components' folders, their image environment and the project.
    timeout
        Seconds each component's test may take (the session may take that many times the number of components).
    sandbox
        ``None``: ``$OPENPERT_SANDBOX`` (default ``auto``: sandboxed where bubblewrap works);
        ``True``: required (results with status ``error`` where it cannot run); ``False``: none.

    Returns
    -------
    One result per folder, in their order.
    """
    from openpert.testing.plugin import ENV_OUTCOMES

    folders = [Path(folder).resolve() for folder in folders]
    root = Path(root).resolve()
    command = component_test_command(env, folders)
    try:
        sandboxed = _use_sandbox(sandbox)
    except ConfigError as err:
        return [ComponentTestResult(folder, env.label, "error", 0.0, str(err), component_test_command(env, [folder]))
                for folder in folders]
    limit = timeout * len(folders) if timeout else None
    # Everything the session writes (its temporary folders, the embedding cache, its reports) lives here and goes with it.
    with tempfile.TemporaryDirectory(prefix="openpert-component-test-") as scratch:
        variables = test_environment(env, Path(scratch) / "embeddings")
        run = command
        if sandboxed:
            run, variables = sandboxed_command(command, env, root, Path(scratch), variables)
            reports = sandboxing.Sandbox(Path(scratch)).tmp / "outcomes.jsonl"
            variables[ENV_OUTCOMES] = str(sandboxing.TMP_DIR / reports.name)
        else:
            (Path(scratch) / "embeddings").mkdir()
            (Path(scratch) / "tmp").mkdir()
            variables["TMPDIR"] = str(Path(scratch) / "tmp")
            reports = Path(scratch) / "tmp" / "outcomes.jsonl"
            variables[ENV_OUTCOMES] = str(reports)
        session: subprocess.CompletedProcess | None = None
        try:
            session = subprocess.run(run, cwd=root, env=variables, capture_output=True, text=True, timeout=limit,
                                     stdin=subprocess.DEVNULL)
            output = session.stdout + session.stderr
        except subprocess.TimeoutExpired as err:
            output = f"{err.stdout if isinstance(err.stdout, str) else ''}\ntimed out after {limit} s"
        records = []
        if reports.is_file():
            for line in reports.read_text(errors="replace").splitlines():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a line cut short by a killed session: its test counts as not reported
    by_folder = _outcomes(records, folders, root)
    return [_component_result(folder, env, by_folder[folder], session, output, root) for folder in folders]


def run_component_test(folder: str | Path, env: ImageEnv, root: str | Path, timeout: float | None = None,
                       sandbox: bool | None = None) -> ComponentTestResult:
    """Run one component's test in ``env`` (:func:`run_component_tests` of one folder)."""
    return run_component_tests([folder], env, root, timeout=timeout, sandbox=sandbox)[0]


# Not a test of this module: pytest must not collect it from here.
run_component_test.__test__ = False  # type: ignore[attr-defined]


@dataclasses.dataclass
class EnvBuild:
    """An environment a run needed: its label, folder, and build time (``None`` when cached)."""

    label: str
    path: Path
    seconds: float | None
    components: int


@dataclasses.dataclass
class TestRun:
    """Everything :func:`test_components` did."""

    envs: list[EnvBuild]
    results: list[ComponentTestResult]
    seconds: float

    __test__ = False

    @property
    def failed(self) -> list[ComponentTestResult]:
        return [r for r in self.results if not r.passed]


def test_components(root: str | Path, paths: Sequence[str | Path] | None = None, exclude: Sequence[str | Path] = (),
                    cache_dir: str | Path | None = None, jobs: int = 1, python: str | Path | None = None,
                    timeout: float | None = None, log: Log = log_to_stderr, sandbox: bool | None = None) -> TestRun:
    """Run the test of every component at or below ``paths`` (default ``src/``) in its image environment.

    Parameters
    ----------
    root
        The project root.
    paths
        Component folders (or folders above them); relative to ``root``.
    exclude
        Folders whose components are left out.
    cache_dir
        Where environments are kept (default ``<root>/.cache/images``).
    jobs
        Test sessions run at once (beside them, environments are built one at a time).
    python
        Interpreter to build environments with.
    timeout
        Seconds one component's test may take (default: no limit beyond its resource labels).
    log
        Receives progress lines.
    sandbox
        Run each test in a sandbox (see :func:`run_component_test`).
    """
    root = Path(root).resolve()
    started = time.monotonic()
    # The Viash schemas, fetched into the data store here if missing: a sandboxed test has no network. A failure is
    # the tests' to report (each names the command that fetches them).
    try:
        ensure_schemas(root)
    except ConfigError as err:
        log(str(err))
    excluded = [(Path(e) if Path(e).is_absolute() else root / e).resolve() for e in exclude]
    configs = [c for c in component_configs(root, list(paths) if paths else None)
               if not any(c.path.is_relative_to(folder) for folder in excluded)]
    # Environments are built one at a time (a build links the files it shares with the finished
    # ones), in the order the components first need them, while the tests of those already built run:
    # a test waits for its own environment only, and the tests run in the order their environments
    # are ready.
    builder = ThreadPoolExecutor(max_workers=1)
    builds: dict[tuple, Future[ImageEnv]] = {}
    planned: list[tuple[ComponentConfig, Future[ImageEnv] | None, str]] = []
    for config in configs:
        try:
            request = component_env_request(config)
        except ConfigError as err:
            planned.append((config, None, str(err)))
            continue
        if request not in builds:
            builds[request] = builder.submit(component_env, config, cache_dir=cache_dir, python=python, log=log)
        planned.append((config, builds[request], ""))
    # The components of one environment run in sessions of up to BATCH (one pytest start for each
    # session, not each component), in the order their environments are ready.
    ready_order = list(builds.values())
    batches: list[list[int]] = [[at] for at, (_, build, _) in enumerate(planned) if build is None]
    for build in ready_order:
        members = [at for at, (_, b, _) in enumerate(planned) if b is build]
        size = math.ceil(len(members) / math.ceil(len(members) / BATCH))  # as even as sessions of at most BATCH allow
        batches += [members[i:i + size] for i in range(0, len(members), size)]

    def run(batch: list[int]) -> list[ComponentTestResult]:
        _, build, error = planned[batch[0]]
        folders = [planned[at][0].path.parent for at in batch]
        try:
            env = build.result() if build is not None else None
        except ConfigError as err:
            env, error = None, str(err)
        if env is None:
            return [ComponentTestResult(folder, "-", "error", 0.0, error) for folder in folders]
        results = run_component_tests(folders, env, root, timeout=timeout, sandbox=sandbox)
        for result in results:
            log(f"{result.status:7s} {result.seconds:6.1f} s  [{env.label}] {shown_path(result.folder, root)}")
        return results

    with builder, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        outcomes = {at: result for batch, results in zip(batches, pool.map(run, batches)) for at, result in zip(batch, results)}
    results = [outcomes[at] for at in range(len(planned))]
    envs: dict[Path, EnvBuild] = {}
    for build in (build for _, build, _ in planned if build is not None and build.exception() is None):
        env = build.result()
        envs.setdefault(env.path, EnvBuild(env.label, env.path, env.built_seconds, 0)).components += 1
    return TestRun(envs=list(envs.values()), results=results, seconds=time.monotonic() - started)


# Not a test of this module: pytest must not collect it from here.
test_components.__test__ = False  # type: ignore[attr-defined]


def format_summary(run: TestRun, root: str | Path, verbose_failures: bool = True) -> str:
    """A readable summary: environments (built or cached, with times), per-status counts, failures."""
    root = Path(root).resolve()
    lines = ["", "image environments:"]
    for env in run.envs:
        built = f"built in {env.seconds:.0f} s" if env.seconds is not None else "cached"
        lines.append(f"  {env.label:28s} {built:16s} {env.components:3d} component(s)  {shown_path(env.path, root)}")
    by_env: dict[str, list[ComponentTestResult]] = {}
    for result in run.results:
        by_env.setdefault(result.env, []).append(result)
    lines.append("component tests:")
    for label, results in by_env.items():
        counts = {s: sum(r.status == s for r in results) for s in ("passed", "skipped", "failed", "error")}
        seconds = sum(r.seconds for r in results)
        lines.append(f"  {label:28s} " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + f" ({seconds:.0f} s of tests)")
    if verbose_failures:
        for result in run.failed:
            lines += ["", f"--- {result.status}: {shown_path(result.folder, root)} [{result.env}]",
                      *result.output.strip().splitlines()[-40:]]
    total = {s: sum(r.status == s for r in run.results) for s in ("passed", "failed", "skipped", "error")}
    lines += ["", f"{total['passed']} passed, {total['failed'] + total['error']} failed"
              + (f", {total['skipped']} skipped" if total["skipped"] else "")
              + f" in {run.seconds:.0f} s ({len(run.results)} components, {len(run.envs)} environments)"]
    return "\n".join(lines)
