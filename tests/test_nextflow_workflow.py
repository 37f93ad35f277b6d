"""The Nextflow workflow of pull requests: a pinned, verified Nextflow; both profiles; the comparison and resume checks."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from project_paths import ROOT
from tooling import nextflow_ci

from openpert.config.task import discover_tasks

FLOW = ROOT / ".github" / "workflows" / "nextflow.yml"


@pytest.fixture(scope="module")
def flow() -> dict:
    return yaml.safe_load(FLOW.read_text())


def _runs(job: dict) -> list[str]:
    return [step.get("run", "") for step in job["steps"]]


def _index(runs: list[str], *needles: str) -> int:
    """The first step whose script holds every needle (fails naming them when there is none)."""
    found = [i for i, run in enumerate(runs) if all(n in run for n in needles)]
    assert found, f"no step runs {needles}"
    return found[0]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_runs_on_pull_requests_with_read_only_rights(flow):
    assert set(flow[True]["pull_request"]["branches"]) == {"main"}  # YAML 1.1 reads `on` as True
    assert flow["permissions"] == {"contents": "read"}
    assert set(flow["jobs"]) == {"local", "docker"}


def test_nextflow_is_a_pinned_release_whose_checksum_is_verified(flow):
    env = flow["env"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", env["NEXTFLOW_VERSION"]), "a release, not 'latest' or an edge"
    assert re.fullmatch(r"[0-9a-f]{64}", env["NEXTFLOW_SHA256"])
    # the release satisfies what nextflow.config's manifest asks for
    minimum = re.search(r"nextflowVersion = '>=([\d.]+)'", (ROOT / "nextflow.config").read_text()).group(1)
    assert _version(env["NEXTFLOW_VERSION"]) >= _version(minimum)
    for job in flow["jobs"].values():
        java = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/setup-java"))
        assert int(java["with"]["java-version"]) >= 17  # Nextflow 24.11 and later need Java 17
        runs = _runs(job)
        install = _index(runs, "releases/download/v${NEXTFLOW_VERSION}/nextflow-${NEXTFLOW_VERSION}-dist")
        script = runs[install]
        assert 'echo "${NEXTFLOW_SHA256}  nextflow" | sha256sum --check --strict' in script
        # verified before it is made executable or put on PATH
        assert script.index("sha256sum --check") < script.index("chmod +x") < script.index("/usr/local/bin")
        assert "get.nextflow.io" not in "\n".join(runs), "the self-installer fetches whatever is newest"
        first_run = _index(runs, "--engine nextflow")
        assert install < first_run


@pytest.mark.parametrize(("job_id", "profile", "local_run", "nextflow_dir"), [
    ("local", "local", "--task all --input resources_test -o results-local", "results-nf-local"),
    ("docker", "docker", '--task "${tasks[@]}" --input resources_test -o results-local', "results-nf-docker"),
])  # fmt: skip
def test_each_profile_is_scored_against_the_local_engine(flow, job_id, profile, local_run, nextflow_dir):
    runs = _runs(flow["jobs"][job_id])
    local = _index(runs, f"openpert benchmark {local_run}")
    nextflow = _index(runs, "--engine nextflow", f"--profile {profile}", f"-o {nextflow_dir}")
    assert "--input resources_test" in runs[nextflow]  # the bundled benchmark, as the local engine runs it
    compare = _index(runs, f"python benchmarks/compare_results.py results-local {nextflow_dir} --json")
    figures = re.search(r"--json (\S+)", runs[compare]).group(1)
    assert f"python tests/tooling/nextflow_ci.py scores {figures}" in runs[compare]
    assert max(local, nextflow) < compare
    # no tolerance: 0 rows changed (a documented last-digit effect would name its tolerance here)
    assert "--tolerance" not in runs[compare]


def test_the_docker_profile_runs_images_built_from_the_pull_request(flow):
    job = flow["jobs"]["docker"]
    runs = _runs(job)
    checkout = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0  # `openpert changed` compares with the base branch
    tasks = _index(runs, 'openpert changed --base "origin/$BASE_REF"', 'nextflow_ci.py tasks', '--always "$FIXED_TASK"')
    build = _index(runs, 'tag="$(openpert images tag)"', "openpert images build-order --format json --tag \"$tag\"",
                   "nextflow_ci.py images", "docker build --file")
    assert "docker push" not in runs[build]
    steps = job["steps"]
    nextflow = _index(runs, "--profile docker")
    assert tasks < build < nextflow
    # the run uses exactly the tag the images were built with
    assert steps[build]["id"] == "images" and 'echo "tag=$tag" >> "$GITHUB_OUTPUT"' in runs[build]
    assert steps[nextflow]["env"]["IMAGE_TAG"] == "${{ steps.images.outputs.tag }}"
    assert '--nextflow-args="--image_tag $IMAGE_TAG"' in runs[nextflow]


def test_resume_is_checked_from_the_traces(flow):
    env = flow["env"]
    assert env["FIXED_TASK"] in {t.name for t in discover_tasks(ROOT)}
    component = ROOT / env["RESUME_COMPONENT"]
    assert (component / "config.vsh.yaml").is_file() and (component / "script.py").is_file()
    assert component.is_relative_to(ROOT / "src" / env["FIXED_TASK"])
    runs = _runs(flow["jobs"]["local"])
    first = _index(runs, "--task all", "--engine nextflow")
    resumed = _index(runs, "--resume", "nextflow_ci.py resumed trace-first.tsv trace-resumed.tsv")
    edited = _index(runs, 'echo "# edited', '>> "$RESUME_COMPONENT/script.py"', "--resume",
                    'nextflow_ci.py rerun --plan "results-nf-local/$FIXED_TASK/plan.json"', '--component "$RESUME_COMPONENT"')
    assert first < resumed < edited
    script = runs[resumed]
    assert script.index("trace-first.tsv") < script.index("--resume") < script.index("trace-resumed.tsv")
    script = runs[edited]
    # the edit is undone before anything else reads the checkout
    assert script.index("--resume") < script.index('git checkout -- "$RESUME_COMPONENT/script.py"')


def test_real_nextflow_tests_run_and_their_failures_reach_the_summary(flow):
    # the variable the real-Nextflow tests read to fail instead of skipping
    tests_text = (ROOT / "tests" / "harness" / "engines" / "test_nextflow.py").read_text()
    required = re.search(r'^REQUIRE_NEXTFLOW = "(\w+)"$', tests_text, re.MULTILINE).group(1)
    assert flow["env"][required] == "1"
    runs = _runs(flow["jobs"]["local"])
    tests = _index(runs, "python -m pytest tests/harness/engines/test_nextflow.py -m nextflow")
    assert flow["jobs"]["local"]["steps"][tests]["if"] == "${{ !cancelled() }}"  # also after a failed benchmark step
    basetemp = re.search(r'--basetemp "([^"]+)"', runs[tests]).group(1)
    for job_id, roots in (("local", f'results-nf-local "{basetemp}"'), ("docker", "results-nf-docker")):
        job = flow["jobs"][job_id]
        summary = _index(_runs(job), f"python tests/tooling/nextflow_ci.py failed-logs {roots}", '>> "$GITHUB_STEP_SUMMARY"')
        assert job["steps"][summary]["if"] == "always()"


def test_every_check_the_workflow_calls_exists():
    used = set(re.findall(r"python tests/tooling/nextflow_ci\.py (\S+)", FLOW.read_text()))
    assert used == {"tasks", "images", "scores", "resumed", "rerun", "failed-logs"}
    for command in used:
        with pytest.raises(SystemExit) as done:  # argparse's --help exits 0; an unknown command exits 2
            nextflow_ci.main([command, "--help"])
        assert done.value.code == 0, command
    assert nextflow_ci.__doc__ and all(f"``{c}``" in nextflow_ci.__doc__ for c in used)


@pytest.mark.skipif(shutil.which("actionlint", path=str(Path(sys.executable).parent)) is None and shutil.which("actionlint") is None,
                    reason="actionlint is not installed (pip install -e .[test])")
def test_actionlint_passes_on_the_workflow():
    actionlint = shutil.which("actionlint", path=str(Path(sys.executable).parent)) or shutil.which("actionlint")
    done = subprocess.run([actionlint, str(FLOW)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
