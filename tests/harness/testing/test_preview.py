"""A change's preview on a git checkout of the fixture project: ranks that moved, whom they displaced, the base cached."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from preview_change_run_fixture import ChangePreview, shared_change_preview
from preview_fixture import change_checkout
from preview_fixture import git as _git

from openpert.cli import main
from openpert.testing import preview as preview_module
from openpert.testing.preview import preview


@pytest.fixture(scope="module")
def change_repository(tiny_project, tmp_path_factory) -> Path:
    """A checkout of the change (made once: the tests that use it run no benchmark, and leave its files as they are)."""
    return change_checkout(shutil.copytree(tiny_project, tmp_path_factory.mktemp("change") / "project"))


@pytest.fixture
def change(change_repository, tmp_path, monkeypatch) -> Path:
    """A checkout whose branch makes group_mean fall below shrunk_mean, on that branch, with a private cache."""
    _git(change_repository, "checkout", "-q", "change")
    monkeypatch.setenv("OPENPERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(change_repository)
    return change_repository


def _methods(result) -> dict[str, dict]:
    (task,) = result.comparison["tasks"]
    return {m["method_id"]: m for m in task["methods"]}


@pytest.fixture(scope="module")
def first_preview(tiny_project, tmp_path_factory) -> ChangePreview:
    """The first preview of a fresh checkout of the change, with an empty cache (shared with the workflow's test)."""
    return shared_change_preview(tiny_project, tmp_path_factory)


def test_preview_shows_the_move_and_whom_it_displaced_then_reuses_the_base(first_preview, tmp_path, monkeypatch):
    change, first, out = first_preview.checkout, first_preview.result, first_preview.out
    assert first.tasks == ["tiny"] and first.base_ran == ["tiny"]
    assert first.base_commit == _git(change, "rev-parse", "main").strip()
    assert first.site is not None and first.site.is_file()
    methods = _methods(first)
    group, shrunk = methods["group_mean"], methods["shrunk_mean"]
    assert group["digest_changed"] and group["rank_move"] < 0 and not group["displaced"]
    assert shrunk["displaced"] and shrunk["rank_move"] > 0 and not shrunk["digest_changed"]
    summary = (out / "comparison.md").read_text()
    assert "`shrunk_mean`" in next(line for line in summary.splitlines() if line.startswith("- Methods displaced"))
    page = (out / "site").rglob("*.html")
    task_page = next(p for p in page if "What changed" in p.read_text() and "what-changed-ranks" in p.read_text())
    assert "displaced" in task_page.read_text()
    assert _git(change, "worktree", "list").count("\n") == 1  # the base's worktree is gone

    # The second preview in copies of the checkout and of the cache: the test of the workflow's steps copies
    # them too, perhaps at the same time (git may rewrite its index in the checkout it runs in).
    assert first.base_results.is_relative_to(first_preview.cache)
    copies = {"checkout": tmp_path / "checkout", "cache": tmp_path / "cache"}
    for name, copy in copies.items():
        shutil.copytree(getattr(first_preview, name), copy, symlinks=True)
    change = copies["checkout"]
    cached = copies["cache"] / first.base_results.relative_to(first_preview.cache) / "tiny" / "results.json"
    stamp = cached.stat().st_mtime_ns
    monkeypatch.setenv("OPENPERT_CACHE", str(copies["cache"]))
    monkeypatch.chdir(change)
    # The second preview's benchmark of the branch (the same code again) hands back the first one's results
    # instead of running its 8 jobs again: what is checked here is the base, which goes through the real
    # run_bundled, so a base run again would still show in base_ran and the cache's stamp.
    branch = tmp_path / "out" / "branch"
    real_run_bundled = preview_module.run_bundled

    def run_bundled(root, tasks, output, **kwargs):
        if Path(output).resolve() != branch.resolve():
            return real_run_bundled(root, tasks, output, **kwargs)
        shutil.copytree(out / "branch", output)
        return 0

    monkeypatch.setattr(preview_module, "run_bundled", run_bundled)
    second = preview(change, tmp_path / "out", base="main", jobs=1, site=False)
    assert second.base_ran == [] and cached.stat().st_mtime_ns == stamp and second.site is None
    assert second.base_results / "tiny" / "results.json" == cached
    assert _methods(second)["shrunk_mean"]["displaced"]


def test_no_touched_task_is_said_and_nothing_runs(change, tmp_path, capsys, monkeypatch):
    _git(change, "checkout", "-q", "main")
    assert main(["preview", "--base", "main", "-o", str(tmp_path / "out")]) == 0
    assert "touches no component of a task" in capsys.readouterr().out
    assert not (tmp_path / "cache").exists()


def test_an_unknown_base_is_one_error_naming_git(change, tmp_path, capsys):
    assert main(["preview", "--base", "nope", "-o", str(tmp_path / "out")]) == 2
    assert "git merge-base nope HEAD failed" in capsys.readouterr().err
