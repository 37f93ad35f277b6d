"""A change's leaderboard before it is merged: its tasks' bundled benchmark beside its base's, compared and rendered.

``openpert preview`` finds the tasks a change touches (:mod:`openpert.testing.changed_components`), runs
their bundled benchmark (``openpert benchmark --input resources_test``) on the working tree and on the
change's base (the merge-base with ``--base``), compares the two (:func:`openpert.results.compare.compare_runs`)
and renders the website with the base's run archived, so that each task page's "What changed" shows every
rank that moved.

The base runs with its own harness, in a detached ``git worktree`` of the base commit removed afterwards:
the comparison sets the change beside what the base gives today. Its results are kept by commit
(``$OPENPERT_CACHE/preview/<commit>/<task>/``, default ``~/.cache/openpert/preview/``), so a second preview
of the same base runs the change only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openpert.config.viash import ConfigError
from openpert.results.archive import add_record, read_run
from openpert.results.compare import compare_runs
from openpert.testing.changed_components import changed_files, git, touched_components

#: The environment variable naming the cache folder (its ``preview/`` sub-folder holds the base runs).
CACHE_ENV = "OPENPERT_CACHE"
#: Where the tasks' bundled test resources are, relative to a project root.
BUNDLED_INPUT = "resources_test"


@dataclass(frozen=True)
class Preview:
    """What a preview did and found."""

    base_commit: str
    tasks: list[str]
    base_ran: list[str]
    base_results: Path
    comparison: dict[str, Any]
    site: Path | None


def cache_dir() -> Path:
    """The base runs' cache: ``$OPENPERT_CACHE/preview``, else ``$XDG_CACHE_HOME/openpert/preview``, else ``~/.cache/...``."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given) / "preview"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "openpert" / "preview"


def default_base(root: Path) -> str:
    """``origin/main`` where the checkout knows it, else ``main``."""
    known = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "origin/main^{commit}"], cwd=root,
                           capture_output=True, text=True)
    return "origin/main" if known.returncode == 0 else "main"


def touched_tasks(root: Path, base: str) -> list[str]:
    """Names of the tasks with a component the change (against ``base``) touches, sorted."""
    src = (root / "src").resolve()
    return sorted({folder.relative_to(src).parts[0] for folder in touched_components(root, changed_files(root, base))})


def run_bundled(root: Path, tasks: list[str], output: Path, *, harness: Path | None = None, jobs: int = 1) -> int:
    """Run ``openpert benchmark`` of ``tasks`` on the bundled test resources of ``root``, in a subprocess.

    Parameters
    ----------
    root
        The project (the working directory of the run).
    tasks
        Task names.
    output
        The results folder (one sub-folder per task).
    harness
        A ``common`` folder whose ``openpert`` is imported in place of the installed one (a base's own harness).
    jobs
        Jobs run at once.

    Returns
    -------
    int
        The benchmark's exit status (non-zero when jobs failed; the results are written all the same).
    """
    env = dict(os.environ)
    if harness is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(harness), env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", "openpert.cli", "benchmark", "--task", *tasks, "--input", BUNDLED_INPUT,
               "-o", str(output), "-j", str(jobs), "--quiet"]
    status = subprocess.run(command, cwd=root, env=env).returncode
    if status != 0:
        # Failed jobs are part of the results (a failing method has no score); the run is compared as it is.
        print(f"openpert: warning: the benchmark of {', '.join(tasks)} in {root} reported problems (exit status "
              f"{status}; its log is above)", file=sys.stderr)
    return status


def base_run(root: Path, commit: str, tasks: list[str], *, jobs: int = 1) -> tuple[Path, list[str]]:
    """The base's results of ``tasks``: from the cache, or run in a worktree of ``commit`` and cached.

    Tasks the base does not have are left out. Returns the cached results folder and the tasks run now.
    """
    cached = cache_dir() / commit
    missing = [t for t in tasks if not (cached / t / "results.json").is_file()]
    if not missing:
        return cached, []
    worktree = Path(tempfile.mkdtemp(prefix=f"openpert-base-{commit[:7]}-"))
    worktree.rmdir()  # git makes the folder itself
    git(root, "worktree", "add", "--detach", "--quiet", str(worktree), commit)
    try:
        to_run = [t for t in missing if (worktree / "src" / t / "api").is_dir()]
        if not to_run:
            return cached, []
        # The base's own harness when it has one; a project without one (a fixture) runs with this one.
        harness = worktree / "common" if (worktree / "common" / "openpert" / "cli.py").is_file() else None
        cached.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".run-", dir=cached))
        try:
            status = run_bundled(worktree, to_run, staging, harness=harness, jobs=jobs)
            for task in to_run:
                if not (staging / task / "results.json").is_file():
                    raise ConfigError(f"{worktree}: the base's benchmark of {task} (commit {commit[:10]}) wrote no "
                                      f"results.json (exit status {status}; its log is above)")
            # Only whole task runs enter the cache: a run cut short leaves it as it was.
            for task in to_run:
                shutil.rmtree(cached / task, ignore_errors=True)
                (staging / task).rename(cached / task)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return cached, to_run
    finally:
        git(root, "worktree", "remove", "--force", str(worktree))


def preview(root: Path, output: Path, *, base: str | None = None, jobs: int = 1, site: bool = True) -> Preview | None:
    """Preview a change: the bundled benchmark of the tasks it touches, beside its base's, compared and rendered.

    Parameters
    ----------
    root
        The project checkout (its working tree is the change).
    output
        Where ``branch/`` (the change's results), ``archive/`` (the base's run as a record),
        ``comparison.md`` and ``site/`` go.
    base
        The git ref the change is compared with; its merge-base with ``HEAD`` is run. Default :func:`default_base`.
    jobs
        Jobs run at once in each benchmark.
    site
        Whether to render the website.

    Returns
    -------
    Preview or None
        ``None`` when the change touches no task's component.

    Raises
    ------
    ConfigError
        When git cannot find the base, or a run writes no results.
    """
    from openpert.report import render_site
    from openpert.results.compare import format_markdown
    from openpert.results.reproduction import report_amendment

    root = Path(root).resolve()
    base = base or default_base(root)
    tasks = touched_tasks(root, base)
    if not tasks:
        return None
    commit = git(root, "merge-base", base, "HEAD")
    base_results, base_ran = base_run(root, commit, tasks, jobs=jobs)
    output = Path(output).resolve()
    branch = output / "branch"
    shutil.rmtree(branch, ignore_errors=True)
    status = run_bundled(root, tasks, branch, jobs=jobs)
    missing = [t for t in tasks if not (branch / t / "results.json").is_file()]
    if missing:
        raise ConfigError(f"{root}: the benchmark of {', '.join(missing)} wrote no results.json (exit status {status})")
    old = {t: run for t, run in read_run(base_results).items() if t in tasks} if base_results.is_dir() else {}
    new = read_run(branch)
    comparison = compare_runs(old, new, old_label=f"base {commit[:10]}", new_label="this change", focus="changed")
    (output / "comparison.md").write_text(format_markdown(comparison), encoding="utf-8")
    index = None
    if site:
        archive = output / "archive"
        shutil.rmtree(archive, ignore_errors=True)
        for task in old:
            add_record(base_results / task, archive)
        index = render_site([branch / t for t in tasks], output / "site", amend=report_amendment(root),
                            archive=archive if old else None)
    return Preview(commit, tasks, base_ran, base_results, comparison, index)
