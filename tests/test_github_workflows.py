"""The GitHub workflows: valid for actionlint, the sandbox enabled and required wherever jobs or tests
run, schemas fetched wherever configs are validated, failures summarised, and the schema fetcher."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from project_paths import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
#: A step that runs component jobs or tests: the sandbox must be on before it.
RUNS_JOBS_OR_TESTS = re.compile(r"(?m)(?:^|[;&|(]\s*)openpert (?:benchmark|preview)\b|scripts/run_benchmark\.sh|scripts/test\.sh|scripts/test_images\.sh|"
                                r"\bpytest\b|openpert test\b|openpert images test")
#: A step that validates configs against Viash's schemas (openpert lint, and every component test).
VALIDATES_CONFIGS = re.compile(r"openpert lint|scripts/test\.sh|scripts/test_images\.sh|\bpytest\b|openpert test\b")
LIFT_USERNS = "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
#: A step whose jobs run in containers (Nextflow's container profiles), and one that also runs jobs on the runner.
IN_CONTAINERS = re.compile(r"--profile[ =]\S*\b(docker|podman|singularity|apptainer)\b")
RUNS_ON_RUNNER = re.compile(r"scripts/test\.sh|scripts/test_images\.sh|\bpytest\b|openpert test\b|--engine local|"
                            r"openpert benchmark(?![^\n]*--engine nextflow)|openpert preview\b")


def _jobs() -> dict[str, tuple[dict, dict]]:
    """``<file>:<job>`` -> (workflow, job) of every workflow."""
    jobs = {}
    for path in sorted(WORKFLOWS.glob("*.yml")):
        flow = yaml.safe_load(path.read_text())
        for name, job in flow["jobs"].items():
            jobs[f"{path.name}:{name}"] = (flow, job)
    return jobs


def _first(job: dict, pattern: re.Pattern) -> int | None:
    return next((i for i, step in enumerate(job.get("steps", [])) if pattern.search(step.get("run", ""))), None)


def _sandbox_setting(flow: dict, job: dict, step: dict) -> str | None:
    """``OPENPERT_SANDBOX`` as a step sees it (the step's env over the job's over the workflow's)."""
    return {**flow.get("env", {}), **job.get("env", {}), **step.get("env", {})}.get("OPENPERT_SANDBOX")


def test_every_step_that_runs_jobs_or_tests_requires_the_sandbox_after_lifting_the_userns_restriction():
    """On the runner the sandbox is required; in a container profile the container is the boundary."""
    checked = []
    for where, (flow, job) in _jobs().items():
        steps = job.get("steps", [])
        running = [i for i, step in enumerate(steps) if RUNS_JOBS_OR_TESTS.search(step.get("run", ""))]
        if not running:
            continue
        checked.append(where)
        assert job["runs-on"] == "ubuntu-24.04", where
        on_runner = []
        for i in running:
            setting = _sandbox_setting(flow, job, steps[i])
            if IN_CONTAINERS.search(steps[i]["run"]) and not RUNS_ON_RUNNER.search(steps[i]["run"]):
                assert setting == "off", f"{where} step {i}: tasks in containers run without bubblewrap (refused when 'on')"
            else:
                assert setting == "on", f"{where} step {i}: a runner without a sandbox must fail the job, not skip"
                on_runner.append(i)
        if on_runner:
            lift = _first(job, re.compile(re.escape(LIFT_USERNS)))
            assert lift is not None and lift < on_runner[0], f"{where}: lift the user-namespace restriction before step {on_runner[0]}"
            assert steps[lift].get("if") in (None, steps[on_runner[0]].get("if")), f"{where}: the lift runs whenever the jobs do"
    assert set(checked) >= {"pull_request.yml:tests", "pull_request.yml:changed-components", "benchmark.yml:benchmark",
                            "nextflow.yml:local", "nextflow.yml:docker", "pull_request.yml:leaderboard-changes"}


def test_every_job_that_validates_configs_fetches_the_viash_schemas_first():
    checked = []
    for where, (_, job) in _jobs().items():
        first = _first(job, VALIDATES_CONFIGS)
        if first is None:
            continue
        checked.append(where)
        fetch = _first(job, re.compile(r"openpert data fetch --project"))
        assert fetch is not None and fetch < first, f"{where}: fetch the Viash schemas before step {first}"
    assert set(checked) >= {"pull_request.yml:lint", "pull_request.yml:tests", "pull_request.yml:changed-components"}


def test_pull_request_failures_reach_the_job_summary_with_their_fixes():
    jobs = yaml.safe_load((WORKFLOWS / "pull_request.yml").read_text())["jobs"]
    for name, inputs in (("lint", ("--ruff ruff.txt", "--lint lint.txt", "--actionlint actionlint.txt")),
                         ("tests", ("--junit junit.xml", "--results results")),
                         ("changed-components", ("--image-tests image_tests.txt",))):
        steps = jobs[name]["steps"]
        summary = next(i for i, step in enumerate(steps) if "python tests/tooling/ci_summary.py" in step.get("run", ""))
        assert "always()" in steps[summary]["if"] and '-o "$GITHUB_STEP_SUMMARY"' in steps[summary]["run"]
        earlier = "\n".join(step.get("run", "") for step in steps[:summary])
        for script in ("run_benchmark_with_llm.sh", "run_benchmark.sh"):
            if f"scripts/{script}" in earlier:  # the script the step runs (and the one it calls) writes results/
                earlier += "\n" + (ROOT / "scripts" / script).read_text()
        for option in inputs:
            assert option in steps[summary]["run"], (name, option)
            written = option.split()[1]
            assert re.search(rf"(tee |--junitxml=|-o ){re.escape(written)}(\s|$)", earlier), f"{name}: no step writes {written}"
    lint_steps = jobs["lint"]["steps"]
    # every check runs even after one failed, so that the summary has them all
    for command in ("openpert lint", "actionlint"):
        step = next(s for s in lint_steps if re.search(rf"^{command} .*\| tee ", s.get("run", ""), re.M))
        assert step["if"] == "${{ !cancelled() }}", command


def test_the_published_benchmark_can_pull_the_component_images():
    job = yaml.safe_load((WORKFLOWS / "benchmark.yml").read_text())["jobs"]["benchmark"]
    # contents: write pushes the run archive to its branch; nothing else is granted
    assert job["permissions"] == {"packages": "read", "contents": "write"}
    steps = job["steps"]
    login = next(i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("docker/login-action"))
    assert steps[login]["with"]["registry"] == "ghcr.io" and steps[login]["with"]["password"] == "${{ secrets.GITHUB_TOKEN }}"
    assert login < _first(job, re.compile("openpert benchmark"))


def _actionlint() -> str | None:
    return shutil.which("actionlint", path=str(Path(sys.executable).parent)) or shutil.which("actionlint")


@pytest.mark.skipif(_actionlint() is None, reason="actionlint is not installed (pip install -e .[test])")
def test_actionlint_passes():
    proc = subprocess.run([_actionlint()], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pull_requests_run_lint_tests_and_the_changed_components():
    flow = yaml.safe_load((WORKFLOWS / "pull_request.yml").read_text())
    assert set(flow[True]["pull_request"]["branches"]) == {"main"}  # YAML 1.1 reads `on` as True
    runs = "\n".join(step.get("run", "") for job in flow["jobs"].values() for step in job["steps"])
    for command in ("ruff check .", "openpert lint", "actionlint", "bash scripts/test.sh", "openpert changed --base",
                    "scripts/test_images.sh"):
        assert command in runs, command


def test_images_are_pushed_from_main_and_the_site_published_by_hand_or_weekly():
    images = yaml.safe_load((WORKFLOWS / "main.yml").read_text())
    assert images[True]["push"]["branches"] == ["main"] and images["permissions"]["packages"] == "write"
    site = yaml.safe_load((WORKFLOWS / "benchmark.yml").read_text())
    assert "workflow_dispatch" in site[True] and site[True]["schedule"]
    assert site["jobs"]["deploy"]["permissions"]["pages"] == "write"


def test_the_published_benchmark_fetches_its_public_data_itself():
    steps = yaml.safe_load((WORKFLOWS / "benchmark.yml").read_text())["jobs"]["benchmark"]["steps"]
    runs = [s.get("run", "") for s in steps]
    fetch = next(i for i, r in enumerate(runs) if "openpert data fetch" in r)
    bench = next(i for i, r in enumerate(runs) if "openpert benchmark" in r)
    assert fetch < bench, "the data is fetched (and its licences said) before any job"
    cache = next(s for s in steps if str(s.get("uses", "")).startswith("actions/cache"))
    assert cache["with"]["path"] == "~/.cache/openpert/data" and "data_manifest.yaml" in cache["with"]["key"]
    assert not any("shared" in r for r in runs), "no step may need the ../shared folder a runner does not have"


def test_no_workflow_step_installs_torch_from_pypi_alone():
    """torch from PyPI is the CUDA build on Linux: every step that can install it names the CPU index
    (or goes through setup_env.sh, which uses it where it answers)."""
    cpu_index = "https://download.pytorch.org/whl/cpu"
    installs_torch = re.compile(r"pip install .*(torch|\[[^\]]*\b(all|ml|text)\b[^\]]*\])|scripts/test_images\.sh|openpert images test")
    setup = (ROOT / "scripts" / "setup_env.sh").read_text()
    assert f'OPENPERT_TORCH_INDEX:-{cpu_index}' in setup and '--index-url "$torch_index" "torch==' in setup
    seen = 0
    for where, (flow, job) in _jobs().items():
        for step in job.get("steps", []):
            run = step.get("run", "")
            if installs_torch.search(run):
                seen += 1
                env = {**flow.get("env", {}), **job.get("env", {}), **step.get("env", {})}
                assert cpu_index in run or cpu_index in str(env.get("PIP_EXTRA_INDEX_URL", "")), f"{where}: {run}"
    assert seen, "the changed-components job builds the ml and text image environments"


def test_a_method_only_pull_request_runs_its_methods_and_tasks_tests_and_main_runs_the_whole_suite():
    flow = yaml.safe_load((WORKFLOWS / "pull_request.yml").read_text())
    assert flow[True]["push"]["branches"] == ["main"] and flow[True]["schedule"]  # main and nightly: the whole suite
    steps = flow["jobs"]["tests"]["steps"]
    scope = next(i for i, s in enumerate(steps) if s.get("id") == "scope")
    assert 'openpert changed --base "origin/$BASE_REF" --scope' in steps[scope]["run"]
    assert 'echo "scope=full"' in steps[scope]["run"]  # a push or a scheduled run has no base: the whole suite
    suite = [s for s in steps if re.search(r"bash scripts/test\.sh(?! \$METHODS)", s.get("run", ""))]
    assert [s["if"] for s in suite] == ["steps.scope.outputs.scope == 'full'"]
    short = next(s for s in steps if "bash scripts/test.sh $METHODS" in s.get("run", ""))
    assert short["if"] == "steps.scope.outputs.scope == 'methods'" and 'echo "tests/$t"' in short["run"]
    for i, step in enumerate(steps):
        if RUNS_JOBS_OR_TESTS.search(step.get("run", "")) and "scope" in step.get("if", ""):
            assert i > scope, step["name"]
    # the jobs that compare with a base run for pull requests only
    for name in ("rules", "changed-components", "leaderboard-changes"):
        assert flow["jobs"][name]["if"] == "github.event_name == 'pull_request'", name


def test_the_cached_llm_server_wheel_is_keyed_on_every_file_its_build_reads():
    # pip's cache keys a built wheel on the source alone: a change of pins or build flags that did
    # not change the workflow's key would restore the old wheel and never build the new one.
    flow = yaml.safe_load((WORKFLOWS / "pull_request.yml").read_text())
    keys = [step["with"]["key"] for job in flow["jobs"].values() for step in job.get("steps", [])
            if step.get("uses", "").startswith("actions/cache@") and "llm-server" in step["with"]["key"]]
    assert len(keys) == 1, keys
    hashed = set(re.findall(r"'([^']+)'", re.search(r"hashFiles\(([^)]*)\)", keys[0]).group(1)))
    install = (ROOT / "scripts" / "serve_llm.sh").read_text()
    read = set(re.findall(r'\$repo/(requirements/[\w.-]+)', install))
    assert read == {"requirements/llm-server-lock.txt", "requirements/llm-server-cmake-args.txt",
                    "requirements/llm-server-build.cmake"}
    assert hashed == read
