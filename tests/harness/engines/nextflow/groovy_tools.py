"""Running Groovy from the tests: the strict-syntax checker, and Groovy cut out of main.nf.

Groovy comes from the Debian package ``groovy`` (scripts/install_system_deps.sh installs it); the
tests that need it skip, saying so, where it is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
GROOVY = shutil.which("groovy")

needs_groovy = pytest.mark.skipif(
    GROOVY is None, reason="groovy is not on PATH (Debian: apt-get install groovy; scripts/install_system_deps.sh)"
)


def groovy_env() -> dict[str, str]:
    """The environment for ``groovy``: JAVA_HOME from the ``java`` on PATH when it is not set.

    Debian's launcher looks for /usr/lib/jvm/default-java, which a JDK installed on its own lacks.
    """
    env = dict(os.environ)
    home = env.get("JAVA_HOME")
    if not home or not Path(home, "bin", "java").exists():
        java = shutil.which("java")
        if java is not None:
            env["JAVA_HOME"] = str(Path(os.path.realpath(java)).parent.parent)
    return env


def run_groovy(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([GROOVY, *map(str, args)], capture_output=True, text=True, env=groovy_env(), timeout=timeout)


def strict_problems(kind: str, path: Path) -> tuple[int, list[str]]:
    """Exit code and problems of ``strict_syntax.groovy`` on a script (``kind="script"``) or config."""
    done = run_groovy(HERE / "strict_syntax.groovy", kind, path)
    if done.returncode not in (0, 1):
        raise AssertionError(f"strict_syntax.groovy failed on {path}: {done.stderr}")
    return done.returncode, done.stdout.splitlines()
