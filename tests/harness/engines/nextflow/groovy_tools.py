"""Running Groovy from the tests: the strict-syntax checker and main.nf's helper functions (lib/).

Groovy comes from the Debian package ``groovy`` (scripts/install_system_deps.sh installs it); the
tests that need it skip, saying so, where it is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
LIB = ROOT / "lib"
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


def groovy_literal(value: Any) -> str:
    """``value`` as Groovy source: maps keep their order (Groovy 2.4's JSON parsers do not)."""
    if isinstance(value, dict):
        if not value:
            return "[:]"
        return "[" + ", ".join(f"{groovy_literal(str(k))}: {groovy_literal(v)}" for k, v in value.items()) + "]"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(groovy_literal(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return f"{value}L" if abs(value) > 2**31 - 1 else str(value)
    if isinstance(value, float):
        # as a JSON params file gives it to Nextflow: a BigDecimal of the number's text
        return f"new BigDecimal('{json.dumps(value)}')"
    text = str(value).replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    # non-ASCII as \\u escapes: the JVM may read the file in the locale's (ASCII) encoding
    text = "".join(c if ord(c) < 128 else "".join(f"\\u{u:04x}" for u in _utf16(c)) for c in text)
    return f"'{text}'"


def _utf16(char: str) -> list[int]:
    data = char.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def call_jobs(calls: list[tuple[str, list]], tmp_path: Path) -> list[dict[str, Any]]:
    """Call functions of lib/OpenpertJobs.groovy; ``{"value": ...}`` or ``{"error": ...}`` per call.

    The arguments are written as Groovy literals, one method per call (a JVM method holds at
    most 64 KB of code), which call_jobs.groovy evaluates.
    """
    request = tmp_path / f"calls-{len(list(tmp_path.glob('calls-*.groovy')))}.groovy"
    methods = [f"def args{i}() {{\n    return {groovy_literal(args)}\n}}\n" for i, (_, args) in enumerate(calls)]
    listing = ", ".join(f"[fn: {groovy_literal(fn)}, args: args{i}()]" for i, (fn, _) in enumerate(calls))
    request.write_text("".join(methods) + f"return [{listing}]\n")
    done = run_groovy("-cp", LIB, HERE / "call_jobs.groovy", request)
    if done.returncode != 0:
        raise AssertionError(f"call_jobs.groovy failed: {done.stderr}")
    return json.loads(done.stdout)
