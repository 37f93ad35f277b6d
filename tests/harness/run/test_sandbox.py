"""The job sandbox: what a component can see, write, reach and leave behind, and the fallback without it."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import socket
import sys
import textwrap
import uuid
from pathlib import Path

import psutil
import pytest
from sandbox_marks import needs_sandbox, reset_sandbox_probe

from openpert.config.viash import ConfigError, read_config
from openpert.engines import local
from openpert.engines.local import LocalEngine
from openpert.engines.plan import Job, label_resources, limits_for
from openpert.run import component as component_module
from openpert.run import sandbox as sandboxing
from openpert.run.component import run_component
from openpert.run.llm_proxy import PLANNED_HEADER
from openpert.run.records import EXIT_MEMORY, EXIT_TIME
from openpert.testing.llm_server import OpenAIStubServer

REPO = Path(__file__).resolve().parents[3]

needs_bwrap = needs_sandbox()

CONFIG = """\
__merge__: ../../api/comp_method.yaml
name: {name}
label: Probe
summary: Probes its sandbox (test fixture).
description: A test fixture that reports what it can see and do.
references:
  doi: [10.1000/fixture]
{groups}resources:
  - type: python_script
    path: script.py
  - {{type: file, path: /src/tiny/tiny_lib/h5ad_files.py, dest: tiny_lib/h5ad_files.py}}
engines:
  - type: native
runners:
  - type: executable
  - type: nextflow
    directives:
      label: [{labels}]
"""

#: The probe writes its prediction with h5py alone (the tiny task's reader and writer): a job run
#: without the fork server, in a fresh interpreter, does not spend a second importing anndata.
SCRIPT = """\
import json
import os

import numpy as np
from tiny_lib import h5ad_files

## VIASH START
par = {{"input_train": "train.h5ad", "input_test": "test.h5ad", "output": "prediction.h5ad"}}
meta = {{"name": "probe"}}
## VIASH END

report = {{}}
{body}
print("REPORT " + json.dumps(report, default=str), flush=True)
test = h5ad_files.read(par["input_test"])
h5ad_files.write(par["output"], test.obs_names, test.var_names, layers={{"prediction": np.zeros(test.shape)}},
                 uns={{"dataset_id": test.uns["dataset_id"], "method_id": meta["name"]}})
"""


def probe(project: Path, body: str, *, llm: bool = False, labels: str = "lowmem, lowcpu, lowtime") -> Path:
    """Write a method component of the tiny task whose script runs ``body`` (which fills ``report``)."""
    name = f"probe_{uuid.uuid4().hex[:8]}"
    folder = project / "src" / "tiny" / "methods" / name
    folder.mkdir(parents=True)
    groups = "argument_groups:\n  - __merge__: /common/api/argument_group_llm.yaml\n" if llm else ""
    (folder / "config.vsh.yaml").write_text(CONFIG.format(name=name, groups=groups, labels=labels))
    (folder / "script.py").write_text(SCRIPT.format(body=textwrap.dedent(body).strip()))
    return folder / "config.vsh.yaml"


def data(project: Path, name: str) -> Path:
    return project / "resources_test" / "tiny" / "syn" / name


def run(project: Path, config_path: Path, work: Path, **kwargs):
    config = read_config(config_path)
    args = {"input_train": data(project, "train.h5ad"), "input_test": data(project, "test.h5ad"),
            "output": work.parent / f"{work.name}_out" / "prediction.h5ad", **kwargs.pop("args", {})}
    limits = limits_for(config.labels, label_resources(project), where=config.name)
    return run_component(config, args, work_dir=work, limits=limits, **kwargs)


def report_of(result) -> dict:
    """What the probe script reported (its ``REPORT {...}`` line in the log)."""
    for line in result.log.read_text(errors="replace").splitlines():
        if line.startswith("REPORT "):
            return json.loads(line[len("REPORT "):])
    raise AssertionError(f"no report in the log ({result.reason}):\n{result.log.read_text(errors='replace')[-3000:]}")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- what a job can see -------------------------------------------------------------------------------
@needs_bwrap
def test_job_cannot_read_files_outside_its_inputs(project_copy, tmp_path):
    beside = data(project_copy, f"secret-{uuid.uuid4().hex}.txt")
    beside.write_text("the answers")
    results = tmp_path / "results"
    (results / "outputs").mkdir(parents=True)
    in_results = results / "outputs" / f"score-{uuid.uuid4().hex}.yaml"
    in_results.write_text("score: 1")
    shared = tmp_path / "shared" / "data"
    shared.mkdir(parents=True)
    in_shared = shared / f"kg-{uuid.uuid4().hex}.tsv"
    in_shared.write_text("a\tb")
    targets = [beside, REPO / "README.md", in_results, in_shared, data(project_copy, "solution.h5ad"), project_copy / "_viash.yaml"]
    body = f"""
    targets = {[str(t) for t in targets]!r}
    report["read"] = []
    for target in targets:
        try:
            with open(target, "rb") as fh:
                fh.read(1)
            report["read"].append(target)
        except OSError:
            pass
    # Climbing: every file name reachable from the work folder's parents, the system and the
    # Python environment aside (they are the same for every job).
    names = []
    import sys
    skip = ("/proc", "/sys", "/dev", "/usr", "/opt", "/root", sys.prefix, sys.base_prefix)
    for folder, dirs, files in os.walk(os.path.abspath(os.path.join(os.getcwd(), "..", ".."))):
        if folder.startswith(skip):
            dirs[:] = []
            continue
        names += [os.path.join(folder, f) for f in files]
    report["names"] = names
    report["cwd"] = os.getcwd()
    report["par"] = par
    report["meta"] = meta
    """
    result = run(project_copy, probe(project_copy, body), tmp_path / "work")
    assert result.succeeded, result.reason
    assert result.sandbox == "bubblewrap"
    seen = report_of(result)
    assert seen["read"] == []
    found = {os.path.basename(n) for n in seen["names"]}
    for target in (beside, in_results, in_shared):
        assert target.name not in found
    assert "solution.h5ad" not in found and "README.md" not in found
    # par and meta carry sandbox paths, which reveal nothing of the host's layout
    assert seen["cwd"] == "/job/.start"
    assert seen["par"]["input_train"] == "/job/train.h5ad" and seen["par"]["output"] == "/job/prediction.h5ad"
    assert seen["meta"]["resources_dir"] == "/job/.resources" and seen["meta"]["temp_dir"] == "/tmp"
    text = json.dumps([seen["par"], seen["meta"]])
    assert str(tmp_path) not in text and str(project_copy) not in text and str(REPO) not in text


@needs_bwrap
def test_job_cannot_write_its_inputs(project_copy, tmp_path):
    source = data(project_copy, "train.h5ad")
    before = digest(source)
    body = """
    import h5py
    report["errors"] = {}
    for how in ("h5py", "open", "unlink", "chmod", "resources"):
        try:
            if how == "h5py":
                with h5py.File(par["input_train"], "r+") as fh:
                    fh.attrs["tampered"] = 1
            elif how == "open":
                with open(par["input_train"], "r+b") as fh:
                    fh.write(b"tampered")
            elif how == "unlink":
                os.unlink(par["input_train"])
            elif how == "chmod":
                os.chmod(par["input_train"], 0o777)
            else:
                with open(os.path.join(meta["resources_dir"], "script.py"), "a") as fh:
                    fh.write("# tampered")
            report["errors"][how] = None
        except OSError as err:
            report["errors"][how] = str(err)
    """
    work = tmp_path / "work"
    result = run(project_copy, probe(project_copy, body), work)
    assert result.succeeded, result.reason
    errors = report_of(result)["errors"]
    assert all(errors.values()), errors
    assert "Read-only file system" in errors["open"] and "Read-only file system" in errors["chmod"]
    assert digest(source) == before
    # the staged file really was a hard link of the dataset's: only the mount kept the writes out
    assert os.stat(work / "train.h5ad").st_ino == os.stat(source).st_ino


@needs_bwrap
def test_job_has_no_network_even_when_it_talks_to_a_model(project_copy, tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        body = f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
            report["connected"] = True
        except OSError as err:
            report["connected"] = False
            report["error"] = str(err)
        """
        plain = run(project_copy, probe(project_copy, body), tmp_path / "plain")
        llm = run(project_copy, probe(project_copy, body, llm=True), tmp_path / "llm", args={"llm_cache_dir": "none"})
    assert plain.succeeded and llm.succeeded, (plain.reason, llm.reason)
    assert report_of(plain)["connected"] is False
    assert report_of(llm)["connected"] is False


#: What an LLM probe does: asks its model through pertsci.llm, then tries the host's other port and a name.
LLM_PROBE = """
import socket
from pertsci.llm import SamplingParams, client_from_arguments
client = client_from_arguments(**{{k: v for k, v in par.items() if k.startswith("llm_")}})
report["base_url"] = par["llm_base_url"]
report["env_base_url"] = os.environ.get("OPENPERT_LLM_BASE_URL")
report["relay_variable"] = os.environ.get("OPENPERT_LLM_RELAY")
report["answers"] = client.generate(["name one gene", "name two genes please"], SamplingParams(n=2, seed=1, max_tokens=8))
report["stats"] = dict(client.stats)
try:
    socket.create_connection(("127.0.0.1", {other_port}), timeout=3).close()
    report["other_port"] = "connected"
except OSError as err:
    report["other_port"] = f"refused: {{err}}"
try:
    report["lookup"] = str(socket.getaddrinfo("pypi.org", 443))
except OSError as err:
    report["lookup"] = f"failed: {{err}}"
"""


@needs_bwrap
def test_llm_job_reaches_its_model_through_the_proxy_and_nothing_else(project_copy, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENPERT_LLM_BASE_URL", raising=False)
    with OpenAIStubServer() as model, socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(8)
        config = probe(project_copy, LLM_PROBE.format(other_port=other.getsockname()[1]), llm=True)
        proxies = []
        result = run(project_copy, config, tmp_path / "w" / ("deep" * 30),  # a socket path beyond sun_path's 107 bytes
                     args={"llm_base_url": model.base_url, "llm_model": "stub-model", "llm_cache_dir": "none"},
                     on_llm_proxy=proxies.append)
        served = list(model.requests)
        served_headers = [{name.lower() for name in headers} for headers in model.headers]
    assert result.succeeded, result.reason
    seen = report_of(result)
    assert seen["answers"] == [["echo: name one gene"] * 2, ["echo: name two genes please"] * 2]
    assert seen["base_url"] == "http://127.0.0.1:8765/v1" and seen["relay_variable"] is None
    assert seen["other_port"].startswith("refused"), seen["other_port"]
    assert seen["lookup"].startswith("failed"), seen["lookup"]
    assert len(served) == 2
    # The harness's count is the server's usage (the stub counts words), and agrees with the client's own.
    expected = {"requests": 2, "prompt_tokens": 3 + 4, "completion_tokens": 2 * (4 + 5), "unmetered": 0}
    assert result.llm_usage_counted == expected
    assert {k: seen["stats"][k] for k in expected} == expected
    # The client said it planned two requests; the proxy kept it for the progress output, not for the server.
    assert len(proxies) == 1 and (proxies[0].progress.answered, proxies[0].progress.planned) == (2, 2)
    assert all(PLANNED_HEADER.lower() not in headers for headers in served_headers)


@needs_bwrap
def test_the_local_engine_shows_a_running_llm_jobs_answers_and_speed(project_copy, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENPERT_LLM_BASE_URL", raising=False)
    monkeypatch.setattr(local, "PROGRESS_TICK_S", 0.05)
    monkeypatch.setattr(local, "LLM_LINE_INTERVAL_S", 0.0)
    body = """
    import time
    from pertsci.llm import SamplingParams, client_from_arguments
    client = client_from_arguments(**{k: v for k, v in par.items() if k.startswith("llm_")})
    client.generate(["name one gene", "name two genes please", "and three"], SamplingParams(n=2, max_tokens=8))
    time.sleep(1)  # the engine shows the answers while the job still runs
    """
    config = read_config(probe(project_copy, body, llm=True))
    engine = LocalEngine(tmp_path / "out", progress="lines", sandbox=True)
    with OpenAIStubServer() as model:
        job = Job(job_id="syn/probe", stage="method", config=config, dataset_id="syn", method_id="probe",
                  inputs={"input_train": data(project_copy, "train.h5ad"), "input_test": data(project_copy, "test.h5ad")},
                  outputs={"output": "prediction.h5ad"},
                  params={"llm_base_url": model.base_url, "llm_model": "stub-model", "llm_cache_dir": "none"},
                  limits=limits_for(config.labels, label_resources(project_copy), where=config.name), context={},
                  allowed=None, publish_dir=tmp_path / "out" / "outputs" / "syn" / "probe")
        [record] = engine.run([job])
    assert record.succeeded, record.reason
    lines = capsys.readouterr().err.splitlines()
    progress = [line for line in lines if line.startswith("llm ")]
    # 3 prompts, 2 samples each, of 4 + 5 + 3 words: the stub's completion tokens
    assert record.llm_usage_counted["completion_tokens"] == 2 * (4 + 5 + 3)
    assert progress and all(re.fullmatch(r"llm      syn/probe [0-3]/3 answers(, [\d,.]+ tokens/s)?", line) for line in progress)
    assert re.fullmatch(r"llm      syn/probe 3/3 answers, [\d,.]+ tokens/s", progress[-1])
    assert lines[-1].startswith("end      syn/probe succeeded")
    assert engine._llm_progress() == {}  # the job's end ends its display


@needs_bwrap
def test_llm_job_configured_by_the_environment_gets_the_proxy_too(project_copy, tmp_path, monkeypatch):
    body = """
    import urllib.request
    with urllib.request.urlopen(os.environ["OPENPERT_LLM_BASE_URL"] + "/models", timeout=10) as response:
        report["models"] = json.loads(response.read())["data"][0]["id"]
    report["env_base_url"] = os.environ["OPENPERT_LLM_BASE_URL"]
    """
    body += """
    report["key_seen"] = [v for v in [*os.environ.values(), *map(str, par.values())] if "sk-secret" in v]
    """
    with OpenAIStubServer(model="env-model") as model:
        monkeypatch.setenv("OPENPERT_LLM_BASE_URL", model.base_url)
        monkeypatch.setenv("OPENPERT_LLM_API_KEY", "sk-secret-1")
        result = run(project_copy, probe(project_copy, body, llm=True), tmp_path / "w", args={"llm_cache_dir": "none"})
        given = run(project_copy, probe(project_copy, LLM_PROBE.format(other_port=9), llm=True), tmp_path / "given",
                    args={"llm_cache_dir": "none", "llm_api_key": "sk-secret-2", "llm_model": "env-model"})
        keys = [h.get("Authorization") for h in model.headers]
    assert result.succeeded and given.succeeded, (result.reason, given.reason)
    assert report_of(result) == {"models": "env-model", "env_base_url": "http://127.0.0.1:8765/v1", "key_seen": []}
    # the key reaches the server from the proxy, never the job (not in its environment, par or script)
    assert keys == ["Bearer sk-secret-2", "Bearer sk-secret-2"]
    assert "sk-secret" not in json.dumps(report_of(given))
    assert "sk-secret" not in given.log.read_text()
    assert "sk-secret" not in (tmp_path / "given" / ".resources" / "script.py").read_text()
    assert result.llm_usage_counted == {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "unmetered": 0}


def test_job_sees_only_its_own_processes(project_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENPERT_TEST_SECRET", "hunter2")
    body = """
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    report["pids"] = pids
    report["cmdlines"] = [open(f"/proc/{p}/cmdline", "rb").read().decode(errors="replace") for p in pids]
    environ = []
    for p in pids:
        try:
            environ.append(open(f"/proc/{p}/environ", "rb").read().decode(errors="replace"))
        except OSError as err:
            environ.append(str(err))
    report["environ"] = environ
    """
    result = run(project_copy, probe(project_copy, body), tmp_path / "work")
    assert result.succeeded, result.reason
    seen = report_of(result)
    assert len(seen["pids"]) <= 3, seen  # bubblewrap's PID 1 and the script
    assert not any("pytest" in c and "bwrap" not in c for c in seen["cmdlines"]), seen["cmdlines"]
    # bubblewrap's own environment (its PID 1's, readable from inside) is the job's scrubbed one
    assert not any("hunter2" in e or "OPENPERT_TEST_SECRET" in e for e in seen["environ"])


@needs_bwrap
def test_no_process_outlives_its_job(project_copy, tmp_path):
    token = f"{900 + uuid.uuid4().int % 1000 / 1000:.3f}"  # a sleep length no other process uses
    body = f"""
    import time
    child = os.fork()
    if child == 0:
        os.setsid()  # its own session: out of the job's process group
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", "{token}"])
        os._exit(0)
    os.waitpid(child, 0)
    time.sleep(0.2)
    report["sleeper_running"] = any(
        open(f"/proc/{{p}}/cmdline", "rb").read().split(b"\\0")[:2] == [b"sleep", b"{token}"]
        for p in os.listdir("/proc") if p.isdigit()
    )
    """
    result = run(project_copy, probe(project_copy, body), tmp_path / "work")
    assert result.succeeded, result.reason
    assert report_of(result)["sleeper_running"] is True
    left = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["cmdline"] == ["sleep", token] and proc.info["status"] != psutil.STATUS_ZOMBIE:
            left.append(proc.pid)
    assert not left, f"the job's sleeper outlived it: {left}"


@needs_bwrap
def test_sandbox_dies_with_the_runner(tmp_path):
    """A runner killed outright (SIGKILL: no clean-up) takes its sandboxed jobs with it."""
    import signal
    import subprocess
    import sys
    import time

    token = f"{800 + uuid.uuid4().int % 1000 / 1000:.3f}"
    runner = textwrap.dedent(f"""
        import subprocess, sys, time
        from pathlib import Path
        from openpert.run import sandbox
        box = sandbox.Sandbox(Path({str(tmp_path / "work")!r}), env=sandbox.job_environment(cpus=1, llm=False, llm_cache=False))
        box.work_dir.mkdir()
        subprocess.Popen(box.command(["/bin/sleep", "{token}"]), env=box.env, start_new_session=True)
        print("started", flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", runner], stdout=subprocess.PIPE, text=True)

    def sleepers() -> list[int]:
        return [p.pid for p in psutil.process_iter(["cmdline", "status"])
                if p.info["cmdline"] == ["/bin/sleep", token] and p.info["status"] != psutil.STATUS_ZOMBIE]

    try:
        assert proc.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 10
        while not sleepers() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sleepers(), "the sandboxed job never started"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 5
    while sleepers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not sleepers(), "a sandboxed job outlived the runner that started it"


@needs_bwrap
def test_job_sees_a_scrubbed_environment(project_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENPERT_TEST_SECRET", "hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter3")
    monkeypatch.setenv("OPENPERT_SHARED_DATA", str(tmp_path / "shared"))
    monkeypatch.setenv("OPENPERT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    body = """report["env"] = dict(os.environ)"""
    plain = run(project_copy, probe(project_copy, body), tmp_path / "plain")
    llm = run(project_copy, probe(project_copy, body, llm=True), tmp_path / "llm", args={"llm_cache_dir": "none"})
    assert plain.succeeded and llm.succeeded, (plain.reason, llm.reason)
    for result in (plain, llm):
        env = report_of(result)["env"]
        assert "OPENPERT_TEST_SECRET" not in env and "AWS_SECRET_ACCESS_KEY" not in env and "OPENPERT_SHARED_DATA" not in env
        # The Python environment's bin folder is the one host path it names (bound at its own path).
        assert env["PATH"] == f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin"
        text = json.dumps({name: value for name, value in env.items() if name != "PATH"})
        assert "hunter" not in text
        assert str(tmp_path) not in text and str(REPO) not in text and str(project_copy) not in text
        assert env["HOME"] == "/home/job" and env["TMPDIR"] == "/tmp"
        assert env["HF_HUB_OFFLINE"] == "1" and env["TRANSFORMERS_OFFLINE"] == "1"
        assert env["OMP_NUM_THREADS"]
    assert "OPENPERT_LLM_BASE_URL" not in report_of(plain)["env"]
    # the model is reached through the job's own loopback relay (same path), not at the host's address
    assert report_of(llm)["env"]["OPENPERT_LLM_BASE_URL"] == "http://127.0.0.1:8765/v1"
    assert "OPENPERT_LLM_RELAY" not in report_of(llm)["env"]  # the launcher takes it before the script runs


@needs_bwrap
def test_llm_cache_is_the_component_s_own(project_copy, tmp_path, monkeypatch):
    cache = tmp_path / "llm-cache"
    monkeypatch.setenv("OPENPERT_LLM_CACHE", str(cache))
    body = """
    report["env_cache"] = os.environ.get("OPENPERT_LLM_CACHE")
    report["par_cache"] = par.get("llm_cache_dir")
    folder = report["par_cache"] or report["env_cache"]
    if folder:
        with open(os.path.join(folder, "entry.json"), "w") as fh:
            fh.write("{}")
    report["sees_cache"] = os.path.exists("/cache/llm")
    """
    default = probe(project_copy, body, llm=True)
    result = run(project_copy, default, tmp_path / "default")
    assert result.succeeded, result.reason
    assert report_of(result)["env_cache"] == "/cache/llm"
    assert (cache / "tiny" / read_config(default).name / "entry.json").is_file()
    given = tmp_path / "given-cache"
    result = run(project_copy, probe(project_copy, body, llm=True), tmp_path / "given", args={"llm_cache_dir": str(given)})
    assert result.succeeded, result.reason
    assert report_of(result)["par_cache"] == "/cache/llm" and (given / "entry.json").is_file()
    plain = run(project_copy, probe(project_copy, body), tmp_path / "plain")
    assert plain.succeeded, plain.reason
    assert report_of(plain)["sees_cache"] is False and report_of(plain)["env_cache"] is None


# --- limits ---------------------------------------------------------------------------------------------
@needs_bwrap
@pytest.mark.parametrize(("method", "code"), [("fail_timeout", EXIT_TIME), ("fail_memory", EXIT_MEMORY)])
def test_limits_hold_in_the_sandbox(tiny_project, tmp_path, method, code):
    config = tiny_project / f"src/tiny/methods/{method}/config.vsh.yaml"
    result = run(tiny_project, config, tmp_path / "work", sandbox=True)
    assert result.sandbox == "bubblewrap"
    assert result.exit_code == code, result.reason
    if method == "fail_memory":
        assert result.peak_memory_mb > 300  # measured on the tree under bubblewrap, not on bwrap itself


@needs_bwrap
def test_peak_memory_is_measured_through_the_sandbox(project_copy, tmp_path):
    body = """
    block = np.ones(200 * 2**20 // 8)  # 200 MB resident
    report["sum"] = float(block.sum())
    """
    result = run(project_copy, probe(project_copy, body), tmp_path / "work", sandbox=True)
    assert result.succeeded, result.reason
    assert 200 < result.peak_memory_mb < 400, result.peak_memory_mb


# --- without bubblewrap --------------------------------------------------------------------------------
@pytest.fixture()
def no_bwrap(tmp_path, monkeypatch):
    """A PATH without bwrap, and the probe forgotten before and after."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(component_module, "_warned_unsandboxed", False)
    reset_sandbox_probe()
    yield
    monkeypatch.undo()
    reset_sandbox_probe()


def test_without_bubblewrap_jobs_run_unsandboxed_and_say_so(no_bwrap, project_copy, tmp_path, caplog):
    assert not sandboxing.available()
    assert "bwrap is not installed" in sandboxing.unavailable_reason()
    body = """report["cwd"] = os.getcwd()"""
    config = probe(project_copy, body)
    with caplog.at_level(logging.WARNING, logger="openpert.run.component"):
        first = run(project_copy, config, tmp_path / "first")
        second = run(project_copy, config, tmp_path / "second")
    assert first.succeeded and second.succeeded, (first.reason, second.reason)
    assert first.sandbox == second.sandbox == "none"
    assert report_of(first)["cwd"] == str(tmp_path / "first" / ".start")
    for result in (first, second):
        assert "WITHOUT a sandbox" in result.log.read_text()
    warnings = [r for r in caplog.records if "WITHOUT a sandbox" in r.getMessage()]
    assert len(warnings) == 1, "the process-wide warning is given once"
    with pytest.raises(ConfigError, match="sandbox was required but bubblewrap cannot be used here: bwrap is not installed"):
        run(project_copy, config, tmp_path / "required", sandbox=True)


def test_sandbox_off_runs_without_warning(project_copy, tmp_path, caplog):
    config = probe(project_copy, """report["cwd"] = os.getcwd()""")
    with caplog.at_level(logging.WARNING, logger="openpert.run.component"):
        result = run(project_copy, config, tmp_path / "work", sandbox=False)
    assert result.succeeded, result.reason
    assert result.sandbox == "none"
    assert "WITHOUT a sandbox" not in result.log.read_text()
    assert not [r for r in caplog.records if "WITHOUT a sandbox" in r.getMessage()]


def test_sandbox_paths_map_the_work_folder(tmp_path):
    box = sandboxing.Sandbox(tmp_path / "w")
    assert box.inside(tmp_path / "w") == "/job"
    assert box.inside(tmp_path / "w" / "x.h5ad") == "/job/x.h5ad"
    assert box.inside(tmp_path / "w" / ".tmp" / "a") == "/tmp/a"
    assert box.inside(tmp_path / "w" / ".home") == "/home/job"
    with pytest.raises(sandboxing.SandboxError, match="not inside the job's work folder"):
        box.inside(tmp_path / "elsewhere")


@pytest.mark.parametrize("sandbox", [pytest.param(True, marks=needs_bwrap), False], ids=["sandboxed", "unsandboxed"])
def test_a_jobs_threads_are_its_labels_and_its_blas_kernel_the_hosts(project_copy, tmp_path, monkeypatch, sandbox):
    # The host asks for 7 threads; the job's label (midcpu: 2) decides. OpenBLAS reads the kernel variable.
    for var in sandboxing.THREAD_VARIABLES:
        monkeypatch.setenv(var, "7")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Sandybridge")
    body = """
    from threadpoolctl import threadpool_info
    report["env"] = {k: v for k, v in os.environ.items() if "THREADS" in k or k.startswith("OPENBLAS_")}
    report["blas"] = [(i["num_threads"], i.get("architecture")) for i in threadpool_info() if i["user_api"] == "blas"]
    """
    config = probe(project_copy, body, labels="lowmem, midcpu, lowtime")
    result = run(project_copy, config, tmp_path / "job", sandbox=sandbox)
    assert result.succeeded, result.reason
    seen = report_of(result)
    assert {var: seen["env"][var] for var in sandboxing.THREAD_VARIABLES} == dict.fromkeys(sandboxing.THREAD_VARIABLES, "2")
    assert seen["env"]["OPENBLAS_CORETYPE"] == "Sandybridge"
    assert seen["blas"] and all(blas == [2, "Sandybridge"] for blas in seen["blas"]), seen["blas"]


def test_environment_keeps_only_what_a_job_needs(monkeypatch):
    host = {"OPENPERT_TEST_SECRET": "x", "OMP_NUM_THREADS": "3", "OPENPERT_LLM_MODEL": "m", "PATH": "/work/bin",
            "OPENBLAS_CORETYPE": "Haswell", "OPENPERT_LLM_MODEL_SHA256": "a" * 64, "OPENPERT_LLM_MAX_TOKENS": "64"}
    env = sandboxing.job_environment(cpus=2, llm=False, llm_cache=False, host_env=host)
    # The label's threads, not the host's; the host's BLAS kernel choice passes.
    assert {var: env[var] for var in sandboxing.THREAD_VARIABLES} == dict.fromkeys(sandboxing.THREAD_VARIABLES, "2")
    assert env["OPENBLAS_CORETYPE"] == "Haswell" and "OPENBLAS_L2_SIZE" not in env
    assert "OPENPERT_TEST_SECRET" not in env and "OPENPERT_LLM_MODEL" not in env and "/work/bin" not in env["PATH"]
    env = sandboxing.job_environment(cpus=None, llm=True, llm_cache=True, host_env=host)
    assert env["OPENPERT_LLM_MODEL"] == "m" and env["OPENPERT_LLM_CACHE"] == "/cache/llm"
    assert env["OPENPERT_LLM_MODEL_SHA256"] == "a" * 64  # the model's identity in the generation cache
    assert env["OPENPERT_LLM_MAX_TOKENS"] == "64"  # the cap of a path check on a small model
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert sandboxing.llm_cache_folder("none", "t/c", host_env={}) is None
    assert sandboxing.llm_cache_folder(None, "t/c", host_env={"OPENPERT_LLM_CACHE": "/c"}) == Path("/c/t/c")


def test_no_sandbox_shares_the_hosts_network(tmp_path):
    # A dataset loader's public files are fetched by the data store before its job, and a model is
    # reached through the harness's proxy (openpert.run.llm_proxy): every job gets its own network
    # namespace. The loader test below and the proxy tests show what that does to a job.
    command = sandboxing.Sandbox(tmp_path / "w").command(["python", "-c", "pass"])
    assert "--share-net" not in command and "--unshare-all" in command


@needs_bwrap
def test_a_dataset_loader_that_opens_a_socket_fails_in_the_sandbox(project_copy, tmp_path):
    """The tiny task's loader, made to connect to a server the host reaches: unsandboxed it does, sandboxed it fails."""
    original = project_copy / "src" / "tiny" / "datasets" / "synthetic"
    folder = original.parent / "downloader"
    shutil.copytree(original, folder)
    (folder / "config.vsh.yaml").write_text((original / "config.vsh.yaml").read_text().replace("name: synthetic", "name: downloader"))
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        reach = f"import socket\nsocket.create_connection(('127.0.0.1', {server.getsockname()[1]}), timeout=3).close()\n"
        (folder / "script.py").write_text(reach + (original / "script.py").read_text())
        config = read_config(folder / "config.vsh.yaml")
        results = {}
        for sandbox in (False, True):
            out = tmp_path / f"out_{sandbox}"
            results[sandbox] = run_component(config, {"output_train": out / "train.h5ad", "output_test": out / "test.h5ad",
                                                      "output_solution": out / "solution.h5ad"},
                                             work_dir=tmp_path / f"work_{sandbox}", sandbox=sandbox)
    assert results[False].succeeded, results[False].log.read_text()
    assert not results[True].succeeded
    log = results[True].log.read_text()
    assert re.search(r"(ConnectionRefusedError|Network is unreachable)", log), log[-2000:]
    assert "create_connection" in log, log[-2000:]


# --- a sandbox that cannot run, and one that is required --------------------------------------------------
UID_MAP_DENIED = "bwrap: setting up uid map: Permission denied"


@pytest.fixture()
def apparmor_bwrap(tmp_path, monkeypatch):
    """A ``bwrap`` on PATH that fails as Ubuntu 24.04's does under AppArmor's user-namespace restriction."""
    folder = tmp_path / "apparmor-bin"
    folder.mkdir()
    fake = folder / "bwrap"
    fake.write_text(f"#!/bin/sh\necho '{UID_MAP_DENIED}' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    monkeypatch.setattr(sandboxing, "APPARMOR_USERNS_SYSCTL", tmp_path / "no-such-switch")
    monkeypatch.setattr(component_module, "_warned_unsandboxed", False)
    reset_sandbox_probe()
    yield fake
    monkeypatch.undo()
    reset_sandbox_probe()


def _names_apparmor_and_both_fixes(text: str) -> bool:
    return ("AppArmor" in text and "Ubuntu 23.10" in text
            and "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in text
            and "AppArmor profile for /usr/bin/bwrap that allows `userns`" in text)


def test_the_uid_map_failure_is_explained_as_apparmor_with_both_fixes(apparmor_bwrap):
    assert not sandboxing.available()
    reason = sandboxing.unavailable_reason()
    assert UID_MAP_DENIED in reason
    assert _names_apparmor_and_both_fixes(reason), reason


def test_the_apparmor_switch_is_named_when_it_is_on(tmp_path, apparmor_bwrap, monkeypatch):
    """Another failure, on a machine whose switch reads 1: the switch is named as the likely cause."""
    apparmor_bwrap.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    switch = tmp_path / "apparmor_restrict_unprivileged_userns"
    switch.write_text("1\n")
    monkeypatch.setattr(sandboxing, "APPARMOR_USERNS_SYSCTL", switch)
    reset_sandbox_probe()
    assert sandboxing.apparmor_restricts_userns()
    reason = sandboxing.unavailable_reason()
    assert "No permissions to create new namespace" in reason and "may be the cause" in reason
    assert _names_apparmor_and_both_fixes(reason), reason
    switch.write_text("0\n")
    reset_sandbox_probe()
    assert not _names_apparmor_and_both_fixes(sandboxing.unavailable_reason())


def test_a_required_sandbox_fails_the_benchmark_with_the_apparmor_explanation(apparmor_bwrap, tiny_task, tmp_path):
    from openpert.engines.benchmark import run_benchmark

    with pytest.raises(ConfigError, match="a sandbox was required") as info:
        run_benchmark(tiny_task, tmp_path / "out", input_dir=tiny_task.root / "resources_test" / "tiny",
                      methods=["group_mean"], metrics=["errors"], progress=False, sandbox=True)
    assert _names_apparmor_and_both_fixes(str(info.value)), info.value
    assert not (tmp_path / "out" / "plan.json").exists()  # nothing was planned, nothing ran


@pytest.mark.parametrize(("value", "setting"), [(None, "auto"), ("", "auto"), ("on", "on"), (" OFF ", "off"), ("auto", "auto")])
def test_the_sandbox_setting_is_read_from_the_environment(value, setting):
    env = {} if value is None else {sandboxing.ENV_SANDBOX: value}
    assert sandboxing.sandbox_setting(env) == setting


def test_a_wrong_sandbox_setting_names_the_variable():
    with pytest.raises(ValueError, match=r"\$OPENPERT_SANDBOX is 'yes'; expected one of auto, on, off"):
        sandboxing.sandbox_setting({sandboxing.ENV_SANDBOX: "yes"})


def test_the_sandbox_tests_fail_instead_of_skipping_where_the_sandbox_is_required(apparmor_bwrap, monkeypatch):
    from sandbox_marks import REQUIRED_BUT_UNAVAILABLE, needs_sandbox

    monkeypatch.setenv(sandboxing.ENV_SANDBOX, "auto")
    assert needs_sandbox().name == "skip"
    monkeypatch.setenv(sandboxing.ENV_SANDBOX, "on")
    mark = needs_sandbox()
    assert (mark.name, mark.args) == ("usefixtures", (REQUIRED_BUT_UNAVAILABLE,))


# --- a read of an undeclared file --------------------------------------------------------------------------
@needs_bwrap
@pytest.mark.parametrize("reader", ["open({path!r}).read()", "import anndata as ad; ad.read_h5ad({path!r})"])
def test_reading_an_undeclared_file_says_where_the_allowed_inputs_are_listed(project_copy, tmp_path, reader):
    """The solution exists on the host but not in the sandbox: the reason names the path and the declarations."""
    solution = data(project_copy, "solution.h5ad")
    config = probe(project_copy, reader.format(path=str(solution)))
    result = run(project_copy, config, tmp_path / "work")
    assert not result.succeeded
    name = config.parent.name
    assert f"{solution} does not exist for the job: a component reads only its declared inputs" in result.reason, result.reason
    assert f"listed in src/tiny/methods/{name}/config.vsh.yaml and src/tiny/api/comp_method.yaml" in result.reason


def test_a_failure_that_is_no_missing_path_gets_no_hint(project_copy, tmp_path):
    config = probe(project_copy, "raise ValueError('a bug of the method')")
    result = run(project_copy, config, tmp_path / "work", sandbox=False)
    assert "a bug of the method" in result.reason and "declared inputs" not in result.reason
