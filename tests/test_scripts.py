"""The shell scripts users source or run: they set themselves up and leave the caller's shell alone."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from project_paths import ROOT

VENV = Path(sys.prefix)


def _venv_is_current() -> bool:
    stamp = VENV / ".openpert-installed"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    return stamp.is_file() and stamp.read_text().strip() == want


@pytest.mark.skipif(not _venv_is_current(), reason="the running environment was not made by scripts/setup_env.sh")
def test_sourcing_setup_env_keeps_the_callers_shell_options():
    script = f"""
    set +euo pipefail
    before="$(set +o)"
    OPENPERT_VENV={VENV} source {ROOT}/scripts/setup_env.sh
    after="$(set +o)"
    [ "$before" = "$after" ] && echo same-options
    command -v python
    false; echo still-running
    """
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["same-options", str(VENV / "bin" / "python"), "still-running"]
