"""Running Groovy from the tests: the strict-syntax checker, and Groovy cut out of main.nf.

Groovy comes from the Debian package ``groovy`` (scripts/install_system_deps.sh installs it); the
tests that need it skip, saying so, where it is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
GROOVY = shutil.which("groovy")

needs_groovy = pytest.mark.skipif(
    GROOVY is None, reason="groovy is not on PATH (Debian: apt-get install groovy; scripts/install_system_deps.sh)"
)


#: JVM options for the short runs of the tests: the quick compiler only and one garbage-collector
#: thread. A run here is mostly the JVM's start and Groovy compiling a script, which the optimising
#: compiler's threads would only add CPU time to (about 40% of a strict-syntax check).
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def groovy_env() -> dict[str, str]:
    """The environment for ``groovy``: JAVA_HOME from the ``java`` on PATH when it is not set.

    Debian's launcher looks for /usr/lib/jvm/default-java, which a JDK installed on its own lacks.
    The JVM options of one's own (``JAVA_OPTS``) come after :data:`QUICK_JVM`, and so win.
    """
    env = dict(os.environ)
    home = env.get("JAVA_HOME")
    if not home or not Path(home, "bin", "java").exists():
        java = shutil.which("java")
        if java is not None:
            env["JAVA_HOME"] = str(Path(os.path.realpath(java)).parent.parent)
    env["JAVA_OPTS"] = " ".join(filter(None, [QUICK_JVM, env.get("JAVA_OPTS")]))
    return env


def run_groovy(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([GROOVY, *map(str, args)], capture_output=True, text=True, env=groovy_env(), timeout=timeout)


class StrictOutcome:
    """What ``strict_syntax.groovy`` found in one file of :func:`strict_check_all`."""

    def __init__(self, path: Path, code: int, lines: list[str]):
        self.path, self.code, self.lines = path, code, lines

    def problems(self) -> tuple[int, list[str]]:
        """Exit code (0, or 1 when there are problems) and problems; an AssertionError when the file does not parse."""
        if self.code not in (0, 1):
            raise AssertionError(f"strict_syntax.groovy failed on {self.path}: {chr(10).join(self.lines)}")
        return self.code, self.lines


def strict_check_all(checks: Sequence[tuple[str, Path]]) -> list[StrictOutcome]:
    """``strict_syntax.groovy`` on several files (each ``(kind, path)``) in one Groovy run.

    Starting the JVM and compiling the checker is most of a check's time: one run serves them all.
    """
    assert len(checks) >= 2, "the checker prints a JSON list for two files or more"
    done = run_groovy(HERE / "strict_syntax.groovy", *(word for kind, path in checks for word in (kind, path)))
    if done.returncode != 0:
        raise AssertionError(f"strict_syntax.groovy failed: {done.stderr}")
    found = json.loads(done.stdout)
    assert [item["file"] for item in found] == [str(path) for _, path in checks], found
    return [StrictOutcome(path, item["code"], item["lines"]) for (_, path), item in zip(checks, found)]
