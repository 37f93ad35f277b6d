"""Hostile methods that try to exhaust the machine: too many processes, too much disk.

In one benchmark run (sandboxed where bubblewrap works, as a benchmark runs):

* ``fork_bomb`` doubles its processes ten times (1,024 if nothing stopped it, each then sleeping
  30 s): it is killed at its process limit (the default, 256), recorded as failed with that reason,
  and none of its processes survive the job;
* ``fill_disk`` (label ``tinydisk`` = 20 MB) writes 4 MB files into its ``$TMPDIR`` and its work
  folder, then sleeps: it is killed at its disk limit;
* ``one_huge_file`` (``tinydisk``) writes one file without end into its ``$TMPDIR``: the file stops
  at the limit (``RLIMIT_FSIZE``) and the job is recorded as over its disk limit.

(Not its home: without a sandbox, that is the runner's.)

Each failed job's cache folder then holds its log and nothing else.
"""

from __future__ import annotations

import psutil
import pytest
from adversarial.hostile import add_method, copy_project, failed_ids, run

from openpert.engines.resource_labels import DEFAULT_PROCESSES
from openpert.run.records import EXIT_DISK, EXIT_PROCESSES

MARKER = "openpert-limits-fork-bomb"
FORK_BOMB = f'''
# From a bare interpreter: forks of this one (the scientific stack loaded) would hit the memory
# limit first, their shared pages counted once per process.
bomb = "import os\\nfor _ in range(10):\\n    os.fork()\\nos.execv('/bin/sleep', ['sleep', '30'])\\n"
os.execv(sys.executable, [sys.executable, "-S", "-c", bomb, "{MARKER}"])
'''
FILL_DISK = '''
import time
for folder in (os.environ["TMPDIR"], os.getcwd()):
    for i in range(10):
        with open(os.path.join(folder, f"junk{i}"), "wb") as fh:
            fh.write(os.urandom(4 << 20))
time.sleep(30)
'''
ONE_HUGE_FILE = '''
with open(os.path.join(os.environ["TMPDIR"], "huge"), "wb") as fh:
    while True:
        fh.write(bytes(1 << 20))
'''
HOSTILE = {"fork_bomb": (FORK_BOMB, "lowmem, lowcpu, lowtime"), "fill_disk": (FILL_DISK, "lowmem, lowcpu, lowtime, tinydisk"),
           "one_huge_file": (ONE_HUGE_FILE, "lowmem, lowcpu, lowtime, tinydisk")}
#: Bytes a failed job's cache folder may keep: its log (the method's few lines of output).
KEPT_BYTES = 256 * 1024


@pytest.fixture(scope="module")
def limits_run(tiny_project, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("limits")
    root = copy_project(tiny_project, tmp / "project")
    for name, (body, labels) in HOSTILE.items():
        add_method(root, name, body, labels=labels)
    results = run(root, tmp / "out", methods=list(HOSTILE))
    return {"results": results, "out": tmp / "out"}


def test_a_fork_bomb_is_stopped_at_its_process_limit(limits_run):
    failure = failed_ids(limits_run["results"])["fork_bomb"]
    assert failure["exit_code"] == EXIT_PROCESSES
    assert failure["reason"].startswith(f"process limit {DEFAULT_PROCESSES} exceeded ("), failure["reason"]
    survivors = [p.pid for p in psutil.process_iter(["cmdline"]) if MARKER in " ".join(p.info["cmdline"] or [])]
    assert not survivors


@pytest.mark.parametrize("method", ["fill_disk", "one_huge_file"])
def test_a_job_writing_past_its_disk_limit_is_stopped(limits_run, method):
    failure = failed_ids(limits_run["results"])[method]
    assert failure["exit_code"] == EXIT_DISK
    assert failure["reason"].startswith("disk limit 20 MB exceeded ("), failure["reason"]


def test_the_failed_jobs_keep_their_logs_and_nothing_else(limits_run):
    """Every job that failed left only ``attempt-*/output.log`` in the cache, and little of it."""
    out = limits_run["out"]
    failed_folders = [d for d in (out / "work").glob("*/*") if not (d / "record.json").exists()]
    assert len(failed_folders) >= len(HOSTILE)
    for folder in failed_folders:
        files = [p for p in folder.rglob("*") if not p.is_dir()]
        assert {(p.parent.name.startswith("attempt-"), p.name) for p in files} == {(True, "output.log")}, files
        assert sum(p.stat().st_blocks * 512 for p in files) < KEPT_BYTES
    for method in HOSTILE:
        assert (out / failed_ids(limits_run["results"])[method]["log"]).is_file()
