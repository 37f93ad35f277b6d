"""The workflows' archive and comparison steps, run as written: the pull request's job summary, the archive branch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from preview_change_run_fixture import ChangePreview, shared_change_preview
from project_paths import ROOT
from run_pair_fixture import write_run

WORKFLOWS = ROOT / ".github" / "workflows"


def _step(workflow: str, job: str, name: str) -> str:
    steps = yaml.safe_load((WORKFLOWS / workflow).read_text())["jobs"][job]["steps"]
    (step,) = [s for s in steps if s.get("name") == name]
    return step["run"]


def _bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    # The harness's own `openpert` first on PATH, as `pip install -e .` puts it on a runner.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PATH": path, **env}, timeout=300)


@pytest.fixture(scope="module")
def change_preview(tiny_project, tmp_path_factory) -> ChangePreview:
    """A checkout of a fixture pull request on `tiny` and its cache of the base's run (shared with test_preview.py).

    group_mean's script changes on the branch so that it falls below shrunk_mean.
    """
    return shared_change_preview(tiny_project, tmp_path_factory)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_pull_request_preview_puts_the_moves_and_the_displaced_methods_in_the_summary(change_preview: ChangePreview,
                                                                                       tmp_path: Path) -> None:
    # Copies of the checkout and of the base's cached run, as the workflow's "Cache of main's bundled run" step
    # restores it: the step runs the branch's benchmark, and the base's comes from the cache (tests/harness/
    # testing/test_preview.py checks the base's run and its caching).
    project_copy, cache = tmp_path / "project", tmp_path / "cache"
    shutil.copytree(change_preview.checkout, project_copy, symlinks=True)
    shutil.copytree(change_preview.cache, cache, symlinks=True)
    summary = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(summary), "BASE_REF": "main", "OPENPERT_CACHE": str(cache)}
    for name in ("Scores and ranks beside main's", "Comparison in the job summary"):
        proc = _bash(_step("pull_request.yml", "leaderboard-changes", name), project_copy, **env)
        assert proc.returncode == 0, name + proc.stdout + proc.stderr
    text = summary.read_text()
    assert text.startswith("## What changed: `base ")
    rows = {r.split("|")[1].strip(): r for r in text.splitlines() if r.startswith("| ") and not r.startswith("| Method")}
    assert "code changed" in rows["Group mean"] and "(down " in rows["Group mean"]
    assert "displaced" in rows["Shrunk group mean"] and "(up " in rows["Shrunk group mean"]
    assert (project_copy / "preview/site/index.html").is_file()  # what the artifact step keeps


def test_pull_request_summary_says_when_the_preview_stopped_before_comparing(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    proc = _bash(_step("pull_request.yml", "leaderboard-changes", "Comparison in the job summary"), tmp_path,
                 GITHUB_STEP_SUMMARY=str(summary))
    assert proc.returncode == 0, proc.stderr
    assert "the preview stopped before it" in summary.read_text()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_benchmark_keeps_each_run_on_the_archive_branch(tmp_path: Path) -> None:
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    git = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GITHUB_SHA": "b" * 40}
    _bash(f"git init -q --bare {origin} && git clone -q {origin} {work} 2>/dev/null", tmp_path, **git)
    _bash("echo code > code.txt && git add code.txt && git commit -q -m code && git push -q origin HEAD:main", work, **git)
    steps = [_step("benchmark.yml", "benchmark", name) for name in
             ("The run archive (branch results-archive)", "Add this run to the archive", "Publish the archive")]
    render = _step("benchmark.yml", "benchmark", "Render the website")
    assert "--archive archive-branch/archive" in render
    for run in ("old", "new"):
        shutil.rmtree(work / "results", ignore_errors=True)
        write_run(work / "results", run)
        shutil.rmtree(work / "archive-branch", ignore_errors=True)
        _bash("git worktree prune", work)
        for script in steps:
            proc = _bash(script, work, **git)
            assert proc.returncode == 0, script + proc.stdout + proc.stderr
    listing = _bash("git ls-tree -r --name-only results-archive", origin).stdout.split()
    assert sorted(listing) == sorted(f"archive/{rid}/{f}" for rid in ("2026-11-20T0905Z-aaaaaaa", "2026-11-27T2212Z-bbbbbbb")
                                     for f in ("record.json", "toy/results.json", "toy/item_scores.csv.gz"))
    # The branch holds the archive only, not the code.
    assert "code.txt" not in listing
    # The same run again (a fresh runner: no worktree yet) adds nothing and pushes nothing.
    shutil.rmtree(work / "archive-branch")
    proc = _bash("git worktree prune\n" + steps[0] + "\n" + steps[1] + "\n" + steps[2], work, **git)
    assert proc.returncode == 0 and "this run was already archived" in proc.stdout, proc.stderr
