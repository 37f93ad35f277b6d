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


# --- process and disk limits ---------------------------------------------------------------------------
#: Doubles the processes ten times (1,024 if nothing stops it), each then sleeping; from a bare
#: interpreter (-S), so that its processes' summed resident size stays far below any memory limit.
FORK_BOMB = "import os\nfor _ in range(10):\n    os.fork()\nos.execv('/bin/sleep', ['sleep', '30'])\n"


def _survivors(marker: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]


def test_a_fork_bomb_is_stopped_at_its_process_limit(tmp_path):
    marker = f"fork-bomb-{os.getpid()}-{time.monotonic_ns()}"
    start = time.perf_counter()
    code, reason, duration, _ = process.execute([sys.executable, "-S", "-c", FORK_BOMB, marker], cwd=tmp_path,
                                                log=tmp_path / "log", limits=process.Limits(processes=32, time_s=60))
    assert code == process.EXIT_PROCESSES == 150
    assert reason.startswith("process limit 32 exceeded (")
    assert duration < 20 and time.perf_counter() - start < 25  # not its time limit, nor its sleep
    assert not _survivors(marker)


def test_a_job_under_its_process_limit_runs(tmp_path):
    pool = ("import multiprocessing as mp\nif __name__ == '__main__':\n"
            "    with mp.get_context('fork').Pool(4) as pool:\n        print(sum(pool.map(abs, range(-9, 9))))\n")
    (tmp_path / "pool.py").write_text(pool)
    code, reason, _, _ = process.execute([sys.executable, "pool.py"], cwd=tmp_path, log=tmp_path / "log",
                                         limits=process.Limits(processes=8, disk_mb=10))
    assert (code, reason) == (0, "")
    assert (tmp_path / "log").read_text().strip() == "81"


#: Writes ``count`` files of 4 MB into the folder it is given, then sleeps (so that the walk, not
#: the end of the job, finds it).
MANY_FILES = ("import os, sys, time\nfolder = sys.argv[1]\nos.makedirs(folder, exist_ok=True)\n"
              "for i in range(int(sys.argv[2])):\n"
              "    with open(os.path.join(folder, f'part{i}'), 'wb') as fh:\n        fh.write(os.urandom(4 << 20))\n"
              "time.sleep(30)\n")


def test_a_job_writing_past_its_disk_limit_is_stopped(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    code, reason, duration, _ = process.execute([sys.executable, "-c", MANY_FILES, str(work / ".tmp" / "junk"), "25"],
                                                cwd=work, log=tmp_path / "log", limits=process.Limits(disk_mb=20, time_s=60))
    assert code == process.EXIT_DISK == 153
    assert reason.startswith("disk limit 20 MB exceeded (") and "written" in reason
    assert duration < 20
    written = sum(f.stat().st_size for f in (work / ".tmp" / "junk").iterdir())
    assert 16 * 2**20 <= written < 100 * 2**20  # stopped near its limit, long before its 100 MB


def test_one_file_is_capped_at_the_disk_limit(tmp_path):
    """RLIMIT_FSIZE: a single file stops at the limit however fast it grows; the job is recorded as over it."""
    writer = "import os\nwith open('big', 'wb') as fh:\n    for _ in range(64):\n        fh.write(bytes(1 << 20))\n"
    code, reason, _, _ = process.execute([sys.executable, "-c", writer], cwd=tmp_path, log=tmp_path / "log",
                                         limits=process.Limits(disk_mb=8))
    assert code == process.EXIT_DISK
    # the walk or the write that failed ("File too large") tells it first; the file stops at the limit either way
    assert reason.startswith("disk limit 8 MB exceeded ("), reason
    assert (tmp_path / "big").stat().st_size == 8 * 2**20


def test_the_disk_meter_counts_allocated_blocks_once_per_file(tmp_path):
    (tmp_path / "data").write_bytes(os.urandom(1 << 20))
    os.link(tmp_path / "data", tmp_path / "same")  # one file, two names
    with open(tmp_path / "sparse", "wb") as fh:
        fh.truncate(1 << 30)  # a gigabyte that takes no disk
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "staged").write_bytes(os.urandom(1 << 20))
    meter = process.DiskMeter(tmp_path, exclude=[tmp_path / "input"])
    assert 1 << 20 <= meter.used_bytes() < 1.5 * (1 << 20)
    assert process.DiskMeter(tmp_path).used_bytes() >= 2 << 20


def test_without_prlimit_the_per_file_cap_is_missing_and_said_once(monkeypatch, caplog):
    import logging

    assert process.size_limit_wrapper(None) == []
    if process.shutil.which("prlimit"):
        assert process.size_limit_wrapper(2.5)[1:] == ["--fsize=2621440", "--"]
    monkeypatch.setattr(process.shutil, "which", lambda name: None)
    monkeypatch.setattr(process, "_warned_no_prlimit", False)
    with caplog.at_level(logging.WARNING, logger="openpert.run.process"):
        assert process.size_limit_wrapper(10) == [] and process.size_limit_wrapper(10) == []
    assert [r.getMessage() for r in caplog.records].count(caplog.records[0].getMessage()) == 1
    assert "prlimit (util-linux) is not installed" in caplog.records[0].getMessage()
