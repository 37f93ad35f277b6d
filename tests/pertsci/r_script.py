"""R for the shared-science tests: run R code, and write R data files with R's own ``save()``."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

needs_r = pytest.mark.skipif(shutil.which("Rscript") is None,
                             reason="Rscript not on PATH (apt-get install r-base-core; scripts/install_system_deps.sh does)")


def run_r(code: str, cwd: Path) -> None:
    """Run R code in ``cwd``; its error output is the failure's message."""
    done = subprocess.run(["Rscript", "-e", code], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def save_rda(folder: Path, objects: str, files: Mapping[str, str]) -> None:
    """Write the objects into each of ``files`` (name -> extra arguments of ``save()``), from one R process.

    ``objects`` is R code whose last value is a named list of the objects (lines before it may
    build them).
    """
    saves = "; ".join(f'save(list = names(objects), envir = list2env(objects), file = "{name}"{", " + args if args else ""})'
                      for name, args in files.items())
    run_r(f"objects <- local({{\n{objects}\n}}); {saves}", folder)
