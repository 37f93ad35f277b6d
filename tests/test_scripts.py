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
    assert torch == [f"install --quiet --index-url {index} torch==2.13.0"]
    # torch comes before the project, whose extras would otherwise pull PyPI's CUDA build
    assert calls.index(torch[0]) < next(i for i, c in enumerate(calls) if "-e" in c.split())


def test_setup_falls_back_to_pips_indexes_when_the_cpu_index_is_unreachable(tmp_path):
    import socket

    with socket.socket() as sock:  # a port nothing listens on once the socket is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    calls, said = _set_up_with_stub_python(tmp_path, f"http://127.0.0.1:{port}")
    assert [c for c in calls if "torch" in c] == ["install --quiet torch==2.13.0"]
    assert f"http://127.0.0.1:{port} not reachable" in said
