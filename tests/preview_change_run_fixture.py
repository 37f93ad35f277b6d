"""One preview of the fixture's change (group_mean falls below shrunk_mean), made once per test run and shared.

``tests/harness/testing/test_preview.py`` checks what this first preview ran and showed, and
``tests/test_workflow_archive_steps.py`` runs the pull request's workflow steps in a copy of its checkout
with a copy of its cache of the base's run (as the workflow's "Cache of main's bundled run" step gives
them): each preview is two benchmarks, so the base is run once for both files.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from preview_fixture import change_checkout

from openpert.testing.once_per_run import once_per_test_run
from openpert.testing.preview import Preview, preview


@dataclass(frozen=True)
class ChangePreview:
    """The checkout (:func:`preview_fixture.change_checkout`), its base runs' cache, the output folder and the preview."""

    checkout: Path
    cache: Path
    out: Path
    result: Preview


def shared_change_preview(tiny_project: Path, tmp_path_factory: pytest.TempPathFactory) -> ChangePreview:
    """The first preview of a fresh checkout, with an empty cache: it runs the base and the branch (once per test run).

    Readers must not change what its folders hold: copy the checkout or the cache to change them.
    """

    def make(folder: Path) -> ChangePreview:
        root = change_checkout(shutil.copytree(tiny_project, folder / "project"))
        cache = folder / "cache"
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("OPENPERT_CACHE", str(cache))
            mp.chdir(root)
            result = preview(root, folder / "out", base="main", jobs=1)
        return ChangePreview(root, cache, folder / "out", result)

    return once_per_test_run(tmp_path_factory, "change_preview", make)
