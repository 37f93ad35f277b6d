"""Jobs forked from a fork server: in their sandbox (or none), with nothing of the server, as a fresh interpreter would run."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from adversarial.hostile import METHOD_CONFIG
from sandbox_marks import needs_sandbox

from openpert.config.viash import read_config
from openpert.engines.plan import label_resources, limits_for
from openpert.run import forkserver
from openpert.run.component import run_component

needs_bwrap = needs_sandbox()

#: The probe reports before it imports anything of its own.
SCRIPT = """\
import json
import os
import sys

## VIASH START
par = {{"input_train": "train.h5ad", "input_test": "test.h5ad", "output": "prediction.h5ad"}}
meta = {{"name": "probe"}}
## VIASH END

report = {{"modules": sorted(name for name in ("anndata", "pandas", "numpy") if name in sys.modules)}}
{body}
print("REPORT " + json.dumps(report, default=str), flush=True)
import numpy as np
from tiny_lib import h5ad_files
test = h5ad_files.read(par["input_test"])
h5ad_files.write(par["output"], obs_names=test.obs_names, var_names=test.var_names,
                 layers={{"prediction": np.zeros(test.shape)}},
                 uns={{"dataset_id": test.uns["dataset_id"], "method_id": meta["name"]}})
"""

#: What a process holds and may do: capabilities, descriptors, its place among the processes.
HOLDINGS = """
import ctypes, subprocess
with open("/proc/self/status") as fh:
    report["status"] = {line.split(":")[0]: line.split()[1] for line in fh if line.startswith(("Cap", "NoNewPrivs"))}
report["fds"] = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
report["pid"], report["ppid"] = os.getpid(), os.getppid()
report["root"] = sorted(os.listdir("/"))
libc = ctypes.CDLL(None, use_errno=True)
report["new_user_namespace"] = libc.unshare(0x10000000) == 0  # CLONE_NEWUSER
child = subprocess.run([sys.executable, "-c", "print(open('/proc/self/status').read())"], capture_output=True, text=True)
report["child_status"] = {line.split(":")[0]: line.split()[1] for line in child.stdout.splitlines() if line.startswith("Cap")}
report["environ"] = sorted(os.environ)
report["sys_path"] = sys.path
"""


def add_probe(project: Path, body: str) -> Path:
    name = f"probe_{uuid.uuid4().hex[:8]}"
    folder = project / "src" / "tiny" / "methods" / name
    folder.mkdir(parents=True)
    (folder / "config.vsh.yaml").write_text(METHOD_CONFIG.format(name=name, labels="lowmem, lowcpu, lowtime"))
    (folder / "script.py").write_text(SCRIPT.format(body=textwrap.dedent(body).strip()))
    return folder / "config.vsh.yaml"


def run(project: Path, config_path: Path, work: Path, sandbox: bool = True, **limits):
    config = read_config(config_path)
    data = project / "resources_test" / "tiny" / "syn"
    args = {"input_train": data / "train.h5ad", "input_test": data / "test.h5ad",
            "output": work.parent / f"{work.name}_out" / "prediction.h5ad"}
    labelled = limits_for(config.labels, label_resources(project), where=config.name)
    return run_component(config, args, work_dir=work, limits=dataclasses.replace(labelled, **limits), sandbox=sandbox)


def report_of(result) -> dict:
    for line in result.log.read_text(errors="replace").splitlines():
        if line.startswith("REPORT "):
            return json.loads(line[len("REPORT "):])
    raise AssertionError(f"no report in the log ({result.reason}):\n{result.log.read_text(errors='replace')[-3000:]}")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _ends(pid: int, within_s: float = 5.0) -> bool:
    """Whether process ``pid`` has ended, or does within ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.fixture(scope="module", autouse=True)
def own_servers():
    """The module's jobs start from servers of its own, whatever ran before in the worker; they end with it.

    Its tests share them: a job forked after others holds nothing of them either.
    """
    forkserver.close_all()
    yield
    forkserver.close_all()


@pytest.fixture(autouse=True)
def servers_on(monkeypatch):
    """Jobs start through a fork server, whatever the environment of the test run says."""
    monkeypatch.delenv(forkserver.ENV_FORKSERVER, raising=False)


@pytest.fixture()
def retiring():
    """A test that retires its server: the tests after it get new ones."""
    yield
    forkserver.close_all()


@needs_bwrap
def test_a_forked_job_holds_no_capability_and_nothing_of_the_server(project_copy, tmp_path):
    """Joined to bubblewrap's namespaces with every capability dropped, its own descriptors only."""
    result = run(project_copy, add_probe(project_copy, HOLDINGS), tmp_path / "w")
    assert result.succeeded, result.reason
    seen = report_of(result)
    # Forked: the scientific stack was there before the script imported anything, and its parent
    # (the server's middle process) lies outside its PID namespace, where bubblewrap's anchor is PID 1.
    assert seen["modules"] == ["anndata", "numpy", "pandas"]
    assert seen["ppid"] == 0 and seen["pid"] == 2
    assert all(int(value, 16) == 0 for key, value in seen["status"].items() if key.startswith("Cap")), seen["status"]
    assert seen["status"]["NoNewPrivs"] == "1"
    assert all(int(value, 16) == 0 for value in seen["child_status"].values()), seen["child_status"]
    assert not seen["new_user_namespace"]
    # stdin, the log twice, the peak-memory pipe, and the descriptor the listing itself opened
    assert seen["fds"] == [0, 1, 2, 3, 4]
    assert "oldroot" not in seen["root"] and "newroot" not in seen["root"]
    assert seen["sys_path"][0] == "/job/.resources"


@needs_bwrap
def test_jobs_get_fresh_random_state_and_the_exit_a_fresh_interpreter_gives(project_copy, tmp_path):
    """Unseeded numpy draws differ between jobs; sys.exit's code and an exception's traceback are the script's."""
    draw = add_probe(project_copy, "import numpy as np\nreport['draw'] = np.random.rand()")
    first, second = (run(project_copy, draw, tmp_path / name) for name in ("a", "b"))
    assert first.succeeded and second.succeeded, (first.reason, second.reason)
    assert report_of(first)["draw"] != report_of(second)["draw"]

    exits = run(project_copy, add_probe(project_copy, "sys.exit(3)"), tmp_path / "exit")
    assert exits.exit_code == 3
    raises = run(project_copy, add_probe(project_copy, "raise ValueError('on purpose')"), tmp_path / "raise")
    assert raises.exit_code == 1 and raises.reason.endswith("ValueError: on purpose"), raises.reason
    log = raises.log.read_text()
    assert 'script.py", line 11, in <module>' in log
    assert "in middle" not in log and "in job" not in log  # the server's own frames are not shown


@needs_bwrap
def test_the_fork_server_can_be_turned_off_and_a_forked_job_imports_from_where_a_fresh_one_does(
        project_copy, tmp_path, monkeypatch):
    body = """
    report['ppid'] = os.getppid()
    report['path'] = [folder for folder in sys.path if os.path.isdir(folder)]
    report['prefix'], report['executable'] = sys.prefix, sys.executable
    report['environ'] = dict(os.environ)
    """
    config = add_probe(project_copy, body)
    forked = run(project_copy, config, tmp_path / "forked")
    monkeypatch.setenv(forkserver.ENV_FORKSERVER, "off")
    fresh = run(project_copy, config, tmp_path / "fresh")
    assert forked.succeeded and fresh.succeeded, (forked.reason, fresh.reason)
    seen_fresh, seen_forked = report_of(fresh), report_of(forked)
    assert seen_fresh["modules"] == [] and seen_fresh["ppid"] == 1 and seen_forked["ppid"] == 0
    assert seen_forked["path"] == seen_fresh["path"]
    assert seen_forked["path"][:2] == ["/job/.resources", "/opt/openpert/lib"]  # the script's folder, PYTHONPATH
    assert (seen_forked["prefix"], seen_forked["executable"]) == (seen_fresh["prefix"], seen_fresh["executable"])
    assert seen_forked["environ"] == seen_fresh["environ"]  # the job's own, nothing of the server's


@needs_bwrap
def test_a_job_sees_no_process_of_the_server(project_copy, tmp_path):
    """The server and its middle process are outside the job's namespace: the job sees the anchor and itself."""
    body = """
    report["processes"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    report["cmdlines"] = [open(f"/proc/{p}/cmdline", "rb").read().decode().split("\\0")[:3] for p in report["processes"]]
    """
    result = run(project_copy, add_probe(project_copy, body), tmp_path / "w")
    assert result.succeeded, result.reason
    seen = report_of(result)
    assert seen["processes"] == [1, 2]  # the anchor and the job
    assert seen["cmdlines"][0][1:3] == ["-I", "-S"]  # PID 1 is bubblewrap's anchor, not bubblewrap or the server


@needs_bwrap
def test_a_server_that_fails_leaves_the_job_to_a_fresh_interpreter(retiring, project_copy, tmp_path, monkeypatch, caplog):
    """No job is lost to the server: it runs fresh, with one warning, and so do the jobs after it."""

    def broken(self, **kwargs):
        raise forkserver.ForkServerError("the fork server has ended (exit 1: on purpose)")

    monkeypatch.setattr(forkserver.ForkServer, "start", broken)
    config = add_probe(project_copy, "report['ppid'] = os.getppid()")
    with caplog.at_level(logging.WARNING, logger="openpert.run.component"):
        first = run(project_copy, config, tmp_path / "a")
        second = run(project_copy, config, tmp_path / "b")
    assert first.succeeded and second.succeeded, (first.reason, second.reason)
    assert report_of(first)["ppid"] == report_of(second)["ppid"] == 1  # bubblewrap's own PID 1
    assert [r.getMessage() for r in caplog.records if "fork server" in r.getMessage()] == [
        "openpert: the fork server has ended (exit 1: on purpose); jobs start a fresh interpreter from now on"]


def test_jobs_of_another_environment_get_a_server_of_their_own():
    """The thread count and the BLAS kernel are read as numpy is imported: a server serves one of each."""
    from openpert.run.component import FAST_EXIT_LAUNCHER
    from openpert.run.sandbox import job_environment

    one = job_environment(cpus=1, llm=False, llm_cache=False, host_env={})
    two = job_environment(cpus=2, llm=False, llm_cache=False, host_env={})
    haswell = job_environment(cpus=1, llm=False, llm_cache=False, host_env={"OPENBLAS_CORETYPE": "Haswell"})
    servers = [forkserver.server_for(env, FAST_EXIT_LAUNCHER) for env in (one, two, haswell, dict(one))]
    assert None not in servers
    assert len({id(server) for server in servers[:3]}) == 3 and servers[3] is servers[0]


#: What a job without a sandbox shows of where it runs, to compare with a fresh interpreter's.
UNSANDBOXED = """
import tempfile
report['path'] = [folder for folder in sys.path if os.path.isdir(folder)]
report['prefix'], report['executable'] = sys.prefix, sys.executable
report['environ'] = dict(os.environ)
report['tempdir'], report['cwd'] = tempfile.gettempdir(), os.getcwd()
with open("/proc/self/status") as fh:
    report["caps"] = {line.split(":")[0]: line.split()[1] for line in fh if line.startswith("Cap")}
report["fds"] = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
report["session"] = os.getsid(0) == os.getpid()
"""


def test_a_job_without_a_sandbox_is_forked_and_runs_where_and_as_a_fresh_interpreter_would(
        project_copy, tmp_path, monkeypatch):
    """Its environment, import path, temporary folder, working folder and privileges are a fresh interpreter's."""
    config = add_probe(project_copy, UNSANDBOXED)
    forked = run(project_copy, config, tmp_path / "forked", sandbox=False)
    monkeypatch.setenv(forkserver.ENV_FORKSERVER, "off")
    fresh = run(project_copy, config, tmp_path / "fresh", sandbox=False)
    assert forked.succeeded and fresh.succeeded, (forked.reason, fresh.reason)
    seen_forked, seen_fresh = report_of(forked), report_of(fresh)
    assert seen_forked["modules"] == ["anndata", "numpy", "pandas"] and seen_fresh["modules"] == []
    for key in ("prefix", "executable", "caps", "session"):
        assert seen_forked[key] == seen_fresh[key], key
    # stdin, the log twice, the peak-memory pipe and the listing's own: nothing of the server's
    assert len(seen_forked["fds"]) == len(seen_fresh["fds"]) == 5
    assert seen_forked["session"]  # a session of its own, as Popen(start_new_session=True) gives a fresh one
    assert seen_forked["path"][1:] == seen_fresh["path"][1:]
    # Each job's own folders (its script's first on the import path), not the server's nor another job's.
    for seen, work in ((seen_forked, tmp_path / "forked"), (seen_fresh, tmp_path / "fresh")):
        assert all(Path(seen[key]).is_relative_to(work) for key in ("tempdir", "cwd")), seen
        assert seen["path"][0] == str(work / ".resources")
        assert seen["environ"]["TMPDIR"] == seen["tempdir"]
    differing = {name for name in {*seen_forked["environ"], *seen_fresh["environ"]}
                 if seen_forked["environ"].get(name) != seen_fresh["environ"].get(name)}
    assert differing == {"TMPDIR", "VIASH_TEMP", forkserver.ENV_FORKSERVER}  # the last: set above for the fresh job


def test_jobs_without_a_sandbox_share_a_server_whatever_test_runs_them(project_copy, tmp_path, monkeypatch):
    """pytest names the running test in the harness's environment: that does not start a server per job."""
    body = """
    with open(f"/proc/{os.getppid()}/stat") as fh:
        report['server'] = int(fh.read().rsplit(")", 1)[1].split()[1])  # the parent of the middle process
    """
    config = add_probe(project_copy, body)
    servers = []
    for test in ("first", "second"):
        monkeypatch.setenv("PYTEST_CURRENT_TEST", f"test.py::{test} (call)")
        result = run(project_copy, config, tmp_path / test, sandbox=False)
        assert result.succeeded, result.reason
        assert report_of(result)["modules"] == ["anndata", "numpy", "pandas"]
        servers.append(report_of(result)["server"])
    assert servers[0] == servers[1] != os.getpid()


def test_a_job_without_a_sandbox_is_stopped_at_its_time_limit_with_what_it_started(project_copy, tmp_path):
    """SIGTERM reaches the job (its own session, not the anchor's), and nothing it started outlives it."""
    body = """
    import signal, subprocess, time
    child = subprocess.Popen(["sleep", "600"])
    open("child.pid", "w").write(str(child.pid))
    signal.signal(signal.SIGTERM, lambda *_: (open("terminated", "w").close(), sys.exit(143)))
    time.sleep(600)
    """
    result = run(project_copy, add_probe(project_copy, body), tmp_path / "w", sandbox=False, time_s=3)
    assert result.exit_code == 143 and result.reason.startswith("time limit exceeded"), result.reason
    found = {path.name: path for path in (tmp_path / "w").rglob("*") if path.name in ("child.pid", "terminated")}
    assert "terminated" in found, "the job's SIGTERM handler did not run"
    child = int(found["child.pid"].read_text())
    assert _ends(child), "a process the job started outlived it"


def test_nothing_a_job_without_a_sandbox_starts_as_it_ends_outlives_it(project_copy, tmp_path):
    """A process started just before the job exits (too late for any sample of its tree) is killed with its session."""
    body = """
    import subprocess
    child = subprocess.Popen(["sleep", "600"])
    open("child.pid", "w").write(str(child.pid))
    os._exit(0)
    """
    run(project_copy, add_probe(project_copy, body), tmp_path / "w", sandbox=False)
    child = int(next((tmp_path / "w").rglob("child.pid")).read_text())
    assert _ends(child), "a process the job started outlived it"


def test_an_interrupted_run_kills_a_job_without_a_sandbox_itself(project_copy, tmp_path):
    """kill_active_jobs (a run stopped by Ctrl-C or an error) reaches the job's own session, not only its anchor's."""
    import threading

    from openpert.run import process

    body = """
    import time
    open("job.pid", "w").write(str(os.getpid()))
    time.sleep(600)
    """
    config = add_probe(project_copy, body)
    results = []
    runner = threading.Thread(target=lambda: results.append(run(project_copy, config, tmp_path / "w", sandbox=False)))
    runner.start()
    deadline = time.monotonic() + 30
    while not list((tmp_path / "w").rglob("job.pid")) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        job = int(next((tmp_path / "w").rglob("job.pid")).read_text())
        assert job in process._ACTIVE
    finally:
        process.kill_active_jobs()
        runner.join(timeout=30)
    assert results and results[0].exit_code == 137, results
    assert _ends(job)


def test_a_server_whose_harness_is_killed_removes_its_folder(tmp_path):
    """A harness killed mid-run (SIGKILL: no clean-up of its own) leaves no folder of its server behind."""
    import signal
    import subprocess
    import sys

    harness = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from openpert.run import forkserver\n"
         "from openpert.run.component import FAST_EXIT_LAUNCHER\n"
         "server = forkserver.ForkServer({'PATH': '/usr/bin:/bin'}, FAST_EXIT_LAUNCHER)\n"
         "print(server._folder.name, flush=True)\n"
         "time.sleep(600)\n"], stdout=subprocess.PIPE, text=True)
    try:
        folder = Path(harness.stdout.readline().strip())
        assert folder.is_dir()
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
    deadline = time.monotonic() + 30  # the server may still be importing the scientific stack
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not folder.exists()
