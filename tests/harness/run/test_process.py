"""Running one process under limits: noticing its end without waiting for the next poll, listing its tree."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from openpert.run import process
from openpert.run.process import _PROC_CHILDREN, _descendant_pids, _ExitWaiter, _tree


def test_exit_waiter_returns_when_the_process_ends():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    start = time.perf_counter()
    with _ExitWaiter(proc.pid) as wait:
        wait(60.0)  # returns when the process exits, not after a minute
    assert time.perf_counter() - start < 30
    assert proc.wait(timeout=5) == 0


def test_exit_waiter_waits_its_timeout_while_the_process_runs():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        start = time.perf_counter()
        with _ExitWaiter(proc.pid) as wait:
            wait(0.3)
        assert time.perf_counter() - start >= 0.29
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(not _PROC_CHILDREN, reason="the kernel does not list children in /proc")
def test_descendants_are_listed_from_proc_as_psutil_lists_them(tmp_path, monkeypatch):
    """Children, a grandchild and a child started from a second thread of a process are all found."""
    script = tmp_path / "tree.py"
    script.write_text(
        "import subprocess, sys, threading, time\n"
        "sleep = [sys.executable, '-c', 'import time; time.sleep(30)']\n"
        "nested = [sys.executable, '-c', 'import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, \"-c\", \"import time; time.sleep(30)\"]); time.sleep(30)']\n"
        "subprocess.Popen(sleep); subprocess.Popen(nested)\n"
        "threading.Thread(target=lambda: subprocess.Popen(sleep)).start()\n"
        "time.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True)
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + 20
        while len(parent.children(recursive=True)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        expected = {p.pid for p in parent.children(recursive=True)}
        assert len(expected) == 4
        assert set(_descendant_pids(proc.pid)) == expected
        assert {p.pid for p in _tree(parent)} == expected | {proc.pid}
        # Where the kernel does not list children, psutil gives the same tree.
        monkeypatch.setattr(process, "_PROC_CHILDREN", False)
        assert {p.pid for p in _tree(parent)} == expected | {proc.pid}
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert _descendant_pids(proc.pid) == []


def test_the_last_line_of_a_huge_log_is_read_from_its_end(tmp_path):
    """A job's log of 8 GB (a sparse hole, then a line): its last line, without reading the rest."""
    log = tmp_path / "output.log"
    with open(log, "wb") as fh:
        fh.write(b"first line\n")
        fh.truncate(8 * 2**30)
        fh.seek(0, os.SEEK_END)
        fh.write(b"\nValueError: the last line\n\n")
    start = time.perf_counter()
    assert process._last_error_line(log) == "ValueError: the last line"
    assert time.perf_counter() - start < 1.0
