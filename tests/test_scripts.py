"""The shell scripts users source or run: they set themselves up and leave the caller's shell alone."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from importlib.util import cache_from_source
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from project_paths import ROOT

VENV = Path(sys.prefix)
LOCK = ROOT / "requirements" / "dev-lock.txt"


def _venv_is_current() -> bool:
    stamp = VENV / ".openpert-installed"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + LOCK.read_bytes()).hexdigest()
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


def _set_up_with_stub_python(tmp_path: Path, torch_index: str) -> tuple[list[str], str]:
    """Run setup_env.sh on a fresh environment whose python records pip calls instead of installing.

    The stub hands everything but ``-m pip`` to the real interpreter, so the reachability probe runs
    for real. Returns the recorded pip calls and what the script said on stderr.
    """
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    calls = tmp_path / "pip_calls"
    stub = venv / "bin" / "python"
    stub.write_text(f"""#!/bin/bash
if [ "$1" = -m ] && [ "$2" = pip ]; then echo "${{*:3}}" >> {calls}; exit 0; fi
exec {sys.executable} "$@"
""")
    stub.chmod(0o755)
    (venv / "bin" / "activate").write_text("")
    script = f"OPENPERT_VENV={venv} OPENPERT_TORCH_INDEX={torch_index} source {ROOT}/scripts/setup_env.sh"
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return calls.read_text().splitlines(), proc.stderr


@pytest.mark.parametrize("answer", ["listing", "not found"])
def test_setup_takes_cpu_torch_from_the_cpu_index_when_it_answers(tmp_path, answer):
    import functools
    import http.server
    import threading

    # Any HTTP answer means the server is there (one may refuse the probe's HEAD yet serve pip).
    (tmp_path / "index" / ("torch" if answer == "listing" else "other")).mkdir(parents=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "index"))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    index = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        calls, _ = _set_up_with_stub_python(tmp_path, index)
    finally:
        server.shutdown()
    torch = [c for c in calls if "torch==2.13.0" in c]
    assert torch == [f"install --quiet --no-compile --index-url {index} torch==2.13.0"]
    # torch comes before the project, whose extras would otherwise pull PyPI's CUDA build
    assert calls.index(torch[0]) < next(i for i, c in enumerate(calls) if "-e" in c.split())


def test_setup_installs_the_project_under_the_lock(tmp_path):
    # A module installed without bytecode, and one of a package's test suite: setup compiles the first alone.
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "probe"
    (site / "tests").mkdir(parents=True)
    for module in (site / "mod.py", site / "tests" / "test_mod.py"):
        module.write_text("X = 1\n")
    calls, said = _set_up_with_stub_python(tmp_path, "http://127.0.0.1:9")
    assert [m.name for m in (site / "mod.py", site / "tests" / "test_mod.py") if Path(cache_from_source(str(m))).is_file()] == ["mod.py"]
    project = [c for c in calls if "-e" in c.split()]
    if _lock_python() == f"{sys.version_info[0]}.{sys.version_info[1]}":
        assert project == [f"install --quiet --no-compile -c {LOCK} -e {ROOT}[all]"]
    else:
        assert project == [f"install --quiet --no-compile -e {ROOT}[all]"]
        assert "installing within pyproject.toml's ranges" in said


def test_setup_falls_back_to_pips_indexes_when_the_cpu_index_is_unreachable(tmp_path):
    import socket

    with socket.socket() as sock:  # a port nothing listens on once the socket is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    calls, said = _set_up_with_stub_python(tmp_path, f"http://127.0.0.1:{port}")
    assert [c for c in calls if "torch" in c] == ["install --quiet --no-compile torch==2.13.0"]
    assert f"http://127.0.0.1:{port} not reachable" in said


# --- the lock: exact versions of the development and CI environment -----------------------------------
def _lock_python() -> str:
    return re.search(r"pip-compile with Python (\d+\.\d+)$", LOCK.read_text(), re.M).group(1)


def _locked() -> dict[str, str]:
    """Package name (normalised) -> the version the lock pins."""
    pins = {}
    for line in LOCK.read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            name, _, version = line.partition("==")
            assert version, f"{LOCK}: {line!r} is not an exact pin"
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _declared(extra: str = "all") -> list:
    """The requirements of openpert with ``extra`` (extras of extras expanded), from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo, seen = [extra], set()
    reqs = [Requirement(r) for r in project["dependencies"]]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for r in map(Requirement, project["optional-dependencies"][name]):
            if r.name == "openpert":
                todo.extend(r.extras)
            else:
                reqs.append(r)
    return reqs


def test_the_lock_pins_every_declared_dependency_within_its_range():
    pins = _locked()
    for req in _declared():
        name = canonicalize_name(req.name)
        if name == "torch":  # installed first by setup_env.sh (CPU build), never from the lock
            assert "torch" not in pins
            continue
        assert name in pins, f"{req.name} is declared in pyproject.toml but not pinned: run bash scripts/lock_dependencies.sh"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{LOCK.name} pins {req.name}=={pins[name]}, outside pyproject.toml's {req}: run bash scripts/lock_dependencies.sh")


@pytest.mark.skipif(not _venv_is_current(), reason="the running environment was not made by scripts/setup_env.sh")
def test_the_environment_is_the_lock():
    import importlib.metadata

    if _lock_python() != f"{sys.version_info[0]}.{sys.version_info[1]}":
        pytest.skip(f"the lock is for Python {_lock_python()}")
    differ = {name: (version, importlib.metadata.version(name)) for name, version in _locked().items()
              if importlib.metadata.version(name) != version}
    assert not differ, f"installed versions differ from {LOCK.name} (locked, installed): {differ}"


@pytest.mark.skipif(not _venv_is_current(), reason="the running environment was not made by scripts/setup_env.sh")
def test_the_test_command_runs_the_paths_it_is_given_instead_of_the_whole_suite():
    def collected(*args: str) -> set[str]:
        proc = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh"), *args, "--collect-only", "-q", "-n", "0"],
                              cwd=ROOT, capture_output=True, text=True, env={"OPENPERT_VENV": str(VENV), "PATH": "/usr/bin:/bin"})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return {line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line}

    assert collected("tests/test_scripts.py", "--durations=5") == {"tests/test_scripts.py"}
    assert collected("tests/test_scripts.py", "tests/harness/testing/test_changed_components.py") == {
        "tests/test_scripts.py", "tests/harness/testing/test_changed_components.py"}


def test_serve_llm_refuses_a_prompt_cache_that_is_not_megabytes(tmp_path):
    # Checked before anything starts: a server without its cache would only be slower, never an error.
    done = subprocess.run(["bash", str(ROOT / "scripts" / "serve_llm.sh"), "start", "--prompt-cache", "1GB"],
                          env={"PATH": "/usr/bin:/bin", "OPENPERT_LLM_STATE": str(tmp_path / "state"),
                               "OPENPERT_LLM_VENV": str(tmp_path / "no-venv")},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "--prompt-cache takes a whole number of megabytes" in done.stderr and "'1GB'" in done.stderr
    assert not (tmp_path / "state").exists()  # refused before its state folder was made
