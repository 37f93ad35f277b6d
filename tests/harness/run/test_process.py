"""Running one process under limits: noticing its end without waiting for the next poll."""

from __future__ import annotations

import subprocess
import sys
import time

from openpert.run.process import _ExitWaiter


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

