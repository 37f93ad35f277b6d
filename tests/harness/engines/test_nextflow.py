"""Tests for the Nextflow engine: openpert.engines.nextflow, main.nf and nextflow.config.

Nextflow itself is only needed by the last test (skipped where ``nextflow`` is not on PATH, failed
there instead where ``OPENPERT_REQUIRE_NEXTFLOW`` is set, as in the Nextflow workflow of CI);
everything else checks the Python side and the pipeline files as text.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
from pathlib import Path

import pytest
import yaml
from nextflow_plans import example_jobs
from project_paths import FIXTURES, ROOT

from openpert.config.task import Task
from openpert.config.viash import ConfigError, read_config
from openpert.engines.benchmark import run_benchmark
from openpert.engines.cache_keys import component_digest
from openpert.engines.nextflow import (
    RUN_SETTINGS,
    TRACE_FILE_NAME,
    attach_bundles,
    config_profiles,
    llm_params,
    nextflow_command,
    nextflow_jobs,
    run_nextflow,
    runs_in_containers,
)
from openpert.engines.nextflow_trace import collect_job_records, parse_trace
from openpert.engines.plan import dataset_jobs, expand_jobs, label_resources, make_plan
from openpert.engines.resource_labels import parse_label_resources, parse_resource_directive
from openpert.images.naming import component_image_name

REPO = ROOT
MAIN_NF = REPO / "main.nf"
NEXTFLOW_CONFIG = REPO / "nextflow.config"
FIXTURE_TASK = FIXTURES / "nf_task"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _plan(outdir: Path) -> dict:
    """What the Nextflow engine hands ``main.nf``: the plan's jobs, as the tests' example has them."""
    return {"plan_version": 1, "task": "t", "outdir": str(outdir), "jobs": example_jobs(outdir)}


def _viash_yaml(tmp_path: Path, labels: str) -> Path:
    body = '  .runners[.type == "nextflow"].config.labels := { ' + labels + " }\n"
    return _write(tmp_path / "_viash.yaml", "name: x\nconfig_mods: |\n" + body)


# --------------------------------------------------------------------------------------------------
# nextflow.config and the command line


PROFILES = ["local", "docker", "singularity", "apptainer", "slurm", "awsbatch", "k8s"]


def test_repository_config_defines_the_documented_profiles():
    assert config_profiles(NEXTFLOW_CONFIG) == PROFILES
    guide = (REPO / "docs" / "nextflow.md").read_text()
    for profile in PROFILES:  # one worked example each
        assert f"--profile {profile}" in guide or f"--profile {profile}," in guide or f",{profile}" in guide, profile


def test_config_profiles_ignores_comments_strings_and_nested_blocks(tmp_path):
    config = _write(
        tmp_path / "nextflow.config",
        """
        // profiles { fake { } }
        params { note = 'profiles { alsofake { } }' }
        /* profiles { commented { } } */
        profiles {
            alpha {
                process { withLabel: big { memory = 4.GB } }
                docker.runOptions = "-v '{}':/x" // a } in a string and a comment {
            }
            'beta-2' { process.executor = 'slurm' }
            gamma_3 { }
        }
        """,
    )
    # a quoted profile name is not a bare identifier; only alpha and gamma_3 are found that way
    assert config_profiles(config) == ["alpha", "gamma_3"]


def test_config_profiles_errors_name_the_file(tmp_path):
    no_block = _write(tmp_path / "a.config", "process { executor = 'local' }\n")
    with pytest.raises(ValueError, match="no 'profiles") as info:
        config_profiles(no_block)
    assert str(no_block) in str(info.value)
    unbalanced = _write(tmp_path / "b.config", "profiles {\n  local {\n")
    with pytest.raises(ValueError, match="unbalanced braces") as info:
        config_profiles(unbalanced)
    assert str(unbalanced) in str(info.value)


def test_nextflow_command_line(tmp_path):
    cmd = nextflow_command(tmp_path / "plan.json", main_nf=MAIN_NF, work_dir=tmp_path / "work")
    assert cmd == [
        "nextflow",
        "run",
        str(MAIN_NF),
        "-params-file",
        str(tmp_path / "plan.json"),
        "-profile",
        "local",
        "-work-dir",
        str(tmp_path / "work"),
        "-ansi-log",
        "false",
    ]


def test_nextflow_command_resume_profiles_and_extra_args(tmp_path):
    cmd = nextflow_command(
        "plan.json",
        main_nf=MAIN_NF,
        profile="slurm, singularity",
        work_dir="w",
        resume=True,
        extra_args=["-with-report", Path("r.html"), "--slurm_queue", "short"],
    )
    assert cmd[cmd.index("-profile") + 1] == "slurm,singularity"
    assert cmd.index("-resume") < cmd.index("-ansi-log")
    assert cmd[-4:] == ["-with-report", "r.html", "--slurm_queue", "short"]
    assert "-resume" not in nextflow_command("p", main_nf=MAIN_NF, work_dir="w")


@pytest.mark.parametrize("profile", ["laptop", "local,gpu", "", "docker,"])
def test_nextflow_command_rejects_unknown_profiles(profile):
    with pytest.raises(ValueError, match="unknown Nextflow profile") as info:
        nextflow_command("plan.json", main_nf=MAIN_NF, profile=profile, work_dir="w")
    message = str(info.value)
    assert str(NEXTFLOW_CONFIG) in message
    assert ", ".join(PROFILES) in message


def test_nextflow_command_reads_profiles_from_the_given_config(tmp_path):
    config = _write(tmp_path / "custom.config", "profiles { mycluster { } }\n")
    cmd = nextflow_command("p.json", main_nf=MAIN_NF, profile="mycluster", work_dir="w", config_path=config)
    assert cmd[cmd.index("-profile") + 1] == "mycluster"
    with pytest.raises(ValueError, match="unknown Nextflow profile 'local'"):
        nextflow_command("p.json", main_nf=MAIN_NF, work_dir="w", config_path=config)


def test_config_leaves_resources_to_the_plan():
    """A withLabel/withName block would override main.nf's per-job cpus, memory and time for all jobs."""
    code = "\n".join(line.split("//")[0] for line in NEXTFLOW_CONFIG.read_text().splitlines())
    assert not re.search(r"with(Label|Name)\s*:", code)
    assert not re.search(r"^\s*(process\.)?(cpus|memory|time)\s*=", code, re.MULTILINE)
    # the labels' values reach the jobs through the plan, as _viash.yaml defines them
    assert parse_label_resources(REPO / "_viash.yaml")["midmem"] == parse_resource_directive("memory = 12.GB")


def test_config_retries_and_submits_sensibly():
    code = NEXTFLOW_CONFIG.read_text()
    assert "maxRetries = params.max_retries as Integer" in code
    assert re.search(r"^\s{4}max_retries = [1-9]$", code, re.MULTILINE)
    rates = re.findall(r"submitRateLimit = '(\d+)/1s'", code)
    assert rates and all(int(r) >= 5 for r in rates)  # 600 jobs in minutes, not an hour


def test_config_trace_matches_what_openpert_reads():
    text = NEXTFLOW_CONFIG.read_text()
    trace = _block(text, "trace {")
    assert re.search(r"enabled\s*=\s*true", trace)
    assert re.search(r"overwrite\s*=\s*true", trace)  # -resume rewrites the same file
    assert f'file = "${{params.outdir}}/{TRACE_FILE_NAME}"' in trace
    fields = re.search(r"fields\s*=\s*'([^']*)'", trace).group(1).split(",")
    assert fields == [
        "task_id", "hash", "native_id", "name", "tag", "status", "exit", "attempt", "submit",
        "duration", "realtime", "%cpu", "peak_rss", "peak_vmem", "workdir",
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------------
# main.nf


def _main_nf_code() -> str:
    """main.nf without its header comment and its whole-line comments."""
    text = MAIN_NF.read_text()
    text = re.sub(r"\A(#!.*\n)?\s*/\*.*?\*/", "", text, flags=re.DOTALL)
    return re.sub(r"(?m)^\s*//.*$", "", text)


def _block(code: str, header: str) -> str:
    start = code.index(header)
    depth, opening = 0, code.index("{", start)
    for pos in range(opening, len(code)):
        depth += {"{": 1, "}": -1}.get(code[pos], 0)
        if depth == 0:
            return code[start : pos + 1]
    raise AssertionError(f"unbalanced block {header!r}")


def _task_specific_names() -> set[str]:
    """Names a generic pipeline must not contain: tasks, components, arguments, formats, files."""
    names = {"perturbqa", "k562", "mlp", "auroc", "file_train", "file_prediction", "prediction.h5ad"}
    config_dirs = [REPO / "src", FIXTURES]
    for folder in config_dirs:
        for api in folder.rglob("api"):
            names.add(api.parent.name)
            names.update(p.stem for p in api.glob("file_*.yaml"))
        for config in folder.rglob("config.vsh.yaml"):
            data = yaml.safe_load(config.read_text()) or {}
            if data.get("name"):
                names.add(str(data["name"]))
        for comp in folder.rglob("comp_*.yaml"):
            for arg in (yaml.safe_load(comp.read_text()) or {}).get("arguments") or []:
                names.add(arg["name"].lstrip("-"))
    # words that are generic in any pipeline, even if a fixture happens to use them as a name
    return names - {"output", "mean", "task", "project"}


def test_main_nf_names_nothing_task_specific():
    code = _main_nf_code()
    words = set(re.findall(r"[A-Za-z_][\w.]*", code)) | set(re.findall(r"'([^']*)'", code))
    found = sorted(n for n in _task_specific_names() if n in words or f"'{n}'" in code or f'"{n}"' in code)
    assert found == []
    assert not re.search(r"\bfile_[a-z]", code), "main.nf must not name a file format"
    assert ".h5ad" not in code


PROCESSES = {"run_build": "openpert_build", "run_dataset": "openpert_dataset", "run_method": "openpert_method", "run_metric": "openpert_metric",
             "run_llm_method": "openpert_method", "run_llm_metric": "openpert_metric"}


def test_main_nf_processes_run_the_staged_component():
    code = _main_nf_code()
    assert set(re.findall(r"^process (\w+)", code, re.MULTILINE)) == set(PROCESSES)
    for name, stage_label in PROCESSES.items():
        process = _block(code, f"process {name} ")
        script = process[process.index("script:") :]
        # the staged inputs are the script's "$1", "$2", ...; the script is the plan's, for this attempt
        assert "set -- ${words(inputs)}" in script and "${attempt(job, task.attempt).script}" in script
        assert 'tag "${job.id}"' in process
        assert "label 'openpert'" in process and f"label '{stage_label}'" in process
        assert "container { job.container }" in process and "accelerator { job.gpus }" in process
        assert "errorStrategy { task.exitStatus in [137, 143] && task.attempt < job.attempts.size() ? 'retry' : 'ignore' }" in process
        assert 'publishDir "${job.publish_dir}"' in process
        for directive in ("cpus", "memory", "time", "disk"):
            assert f"{directive} {{ attempt(job, task.attempt).{directive} }}" in process
        # the digest is an input of its own, the component folder is staged, the inputs too
        assert ("tuple val(job), val(digest), path(component, stageAs: 'component'), path(inputs, stageAs: 'in*/*'), "
                "val(files)") in process
        assert ("secret 'OPENPERT_LLM_API_KEY'" in process) == ("llm" in name)
    # each process gets the job, its code digest (a `val`, hashed by -resume) and its component folder
    ready = _block(code, "def ready(")
    assert "[j, j.digest, file(j.bundle, checkIfExists: true), inputs, files]" in ready
    assert not re.search(r"seed|limits|format|\*\s*n\b", code), "main.nf derives no seed, limit or wiring"


def test_main_nf_wires_channels_as_documented():
    code = _main_nf_code()
    ready = _block(code, "def ready(")
    # a job waits for the job it follows, and takes its inputs from what that job handed on
    assert "handed.combine(waiting, by: 0)" in ready
    assert 'files["${s.job}:${s.output}".toString()]' in ready
    workflow = _block(code, "workflow {")
    # builds first; a dataset job cut from a build waits for what the build handed on
    assert "run_build(ready(jobs, 'build', channel.empty()))" in workflow
    assert "run_dataset(ready(jobs, 'dataset', built))" in workflow
    assert "ready(jobs, 'method', made)" in workflow and "ready(jobs, 'metric', predictions)" in workflow
    for call in ("run_method(methods.plain)", "run_llm_method(methods.llm)", "run_metric(metrics.plain)",
                 "run_llm_metric(metrics.llm)"):
        assert call in workflow


def test_main_nf_params_come_from_the_plan_or_the_config():
    plan_keys = {"plan_version", "task", "outdir", "jobs"}
    config_params = set(
        re.findall(r"^\s{4}(\w+)\s*=", _block(NEXTFLOW_CONFIG.read_text(), "params {"), re.MULTILINE)
    )
    used = set(re.findall(r"params\.(\w+)", _main_nf_code()))
    assert used, "main.nf reads its plan from params"
    assert used - plan_keys - config_params == set()


# user configs and work directories


def test_user_configs_go_before_run_and_may_define_profiles(tmp_path):
    mine = _write(tmp_path / "cluster.config", "params { slurm_queue = 'short' }\nprofiles { mycluster { } }\n")
    plain = _write(tmp_path / "plain.config", "process { queue = 'long' }\n")
    cmd = nextflow_command("p.json", main_nf=MAIN_NF, profile="mycluster,apptainer", work_dir="w", user_configs=[mine, plain])
    assert cmd[:6] == ["nextflow", "-c", str(mine.resolve()), "-c", str(plain.resolve()), "run"]
    assert cmd[cmd.index("-profile") + 1] == "mycluster,apptainer"
    with pytest.raises(ValueError, match="does not exist"):
        nextflow_command("p.json", main_nf=MAIN_NF, work_dir="w", user_configs=[tmp_path / "none.config"])


def test_run_nextflow_keeps_a_remote_work_dir(tmp_path):
    bin_dir = tmp_path / "bin"
    _fake_nextflow(bin_dir)
    env = {"PATH": str(bin_dir) + os.pathsep + "/usr/bin:/bin", "FAKE_NF_ARGS": str(tmp_path / "args"),
           "FAKE_NF_CWD": str(tmp_path / "cwd"), "FAKE_NF_PATH": str(tmp_path / "path")}  # fmt: skip
    run_nextflow(_plan(tmp_path / "o"), tmp_path / "p.json", log_path=tmp_path / "l", main_nf=MAIN_NF,
                 profile="awsbatch", work_dir="s3://bucket/work", env=env)  # fmt: skip
    args = (tmp_path / "args").read_text().splitlines()
    assert args[args.index("-work-dir") + 1] == "s3://bucket/work"


def test_llm_settings_travel_as_params_and_the_key_does_not():
    env = {"OPENPERT_LLM_BASE_URL": "http://vllm:8000/v1", "OPENPERT_LLM_API_KEY": "sk-secret", "OPENPERT_LLM_MODEL": ""}
    assert llm_params(env) == {"llm_base_url": "http://vllm:8000/v1"}
    env["OPENPERT_LLM_MODEL_SHA256"] = "a" * 64  # the model's identity in the generation cache
    assert llm_params(env) == {"llm_base_url": "http://vllm:8000/v1", "llm_model_sha256": "a" * 64}
    env["OPENPERT_LLM_MAX_TOKENS"] = "64"  # a path check on a small model: every LLM component gets the cap
    assert llm_params(env)["llm_max_tokens"] == "64"
    assert llm_params({}) == {}


# --------------------------------------------------------------------------------------------------
# the plan: images, digests, dataset jobs, component folders


@pytest.fixture()
def bundled(project_copy, tmp_path):
    """``make(outdir)``: a plan of a fixture project copy (dataset loaders included), with component folders."""
    task = Task(project_copy / "src" / "tiny")

    def make(outdir: Path) -> dict:
        stage = dataset_jobs(task, outdir, label_resources(project_copy))
        plan = make_plan(task, task.find_datasets(project_copy / "resources_test" / "tiny"), outdir, dataset_stage=stage)
        return attach_bundles(plan, outdir / "components")

    return project_copy, make


def test_plan_names_an_image_a_digest_and_labels_for_every_job(bundled, tmp_path):
    root, make = bundled
    plan = make(tmp_path / "a")
    entries = [*plan["methods"], *plan["metrics"], *plan["loaders"]]
    assert {e["type"] for e in entries} == {"control_method", "method", "metric", "dataset"}
    assert [j["id"] for j in plan["jobs"] if j["stage"] == "dataset"] == ["datasets/syn_a", "datasets/syn_b"]
    for entry in entries:
        config = read_config(entry["config"])
        # as `openpert images build-order` names it: <project>/<namespace>/<name>:<version>
        assert entry["image"] == str(component_image_name(config))
        assert entry["image"].startswith("fixture/") and entry["image"].endswith(f"/{config.name}:0.0.1")
        assert entry["digest"] == component_digest(config)
        assert entry["labels"] == config.labels and entry["labels"]
        assert entry["needs_llm"] is False


def test_a_changed_script_changes_its_jobs_digest_and_folder_only(bundled, tmp_path):
    root, make = bundled
    before = make(tmp_path / "a")
    script = root / "src" / "tiny" / "methods" / "group_mean" / "script.py"
    script.write_text(script.read_text() + "\n# edited\n")
    after = make(tmp_path / "b")

    def by_id(plan):
        return {e["id"]: e for e in [*plan["methods"], *plan["metrics"]]}

    changed = {i for i, e in by_id(after).items() if e["digest"] != by_id(before)[i]["digest"]}
    assert changed == {"group_mean"}
    edited = by_id(after)["group_mean"]
    assert Path(edited["bundle"]).name != Path(by_id(before)["group_mean"]["bundle"]).name
    assert (Path(edited["bundle"]) / edited["bundle_config"]).with_name("script.py").read_text().endswith("# edited\n")

    # the task library and pertsci are part of the code too
    library = root / "src" / "tiny" / "tiny_lib" / "shrinkage.py"
    library.write_text(library.read_text() + "\n# edited\n")
    again = make(tmp_path / "c")
    # the components that declare the edited module: the whole library (the others declare another module of it)
    declaring = {i for i, e in by_id(again).items() if any(library.resolve().is_relative_to(config.resource_path(r))
                 for config in [read_config(e["config"])] for r in config.resources)}  # fmt: skip
    assert declaring and {i for i, e in by_id(again).items() if e["digest"] != by_id(after)[i]["digest"]} == declaring
    science = root / "common" / "pertsci" / "added.py"
    science.parent.mkdir(parents=True, exist_ok=True)
    science.write_text("VALUE = 1\n")
    last = make(tmp_path / "d")
    assert all(e["digest"] != by_id(again)[i]["digest"] for i, e in by_id(last).items())
    assert (Path(by_id(last)["zeros"]["bundle"]) / "common" / "pertsci" / "added.py").is_file()


def test_component_folder_holds_what_the_component_runs_with(bundled, tmp_path):
    root, make = bundled
    plan = make(tmp_path / "a")
    entry = next(e for e in plan["methods"] if e["id"] == "shrunk_mean")
    bundle = Path(entry["bundle"])
    assert (bundle / "_viash.yaml").is_file()
    assert (bundle / "src" / "tiny" / "api" / "comp_method.yaml").is_file()
    assert (bundle / "src" / "tiny" / "tiny_lib" / "shrinkage.py").is_file()
    assert not (bundle / "src" / "tiny" / "methods" / "group_mean").exists()  # nothing of other components
    copied = read_config(bundle / entry["bundle_config"])
    assert copied.public_dict() == read_config(entry["config"]).public_dict()
    assert not list(bundle.rglob("__pycache__"))


def test_component_folder_refuses_a_merge_it_cannot_carry(bundled, tmp_path):
    root, make = bundled
    outside = root / "elsewhere.yaml"
    outside.write_text("info:\n  note: from outside\n")
    config = root / "src" / "tiny" / "methods" / "group_mean" / "config.vsh.yaml"
    config.write_text(config.read_text().replace("__merge__: ../../api/comp_method.yaml",
                                                 "__merge__: [../../api/comp_method.yaml, ../../../../elsewhere.yaml]"))
    with pytest.raises(ConfigError, match="group_mean/config.vsh.yaml: its copy for Nextflow"):
        make(tmp_path / "a")


# run_nextflow


def _fake_nextflow(bin_dir: Path, exit_code: int = 0) -> Path:
    """A `nextflow` that records how it was called."""
    script = bin_dir / "nextflow"
    _write(
        script,
        "#!/bin/sh\n"
        'echo "fake nextflow: $*"\n'
        'printf "%s\\n" "$@" > "$FAKE_NF_ARGS"\n'
        'pwd > "$FAKE_NF_CWD"\n'
        'echo "$PATH" > "$FAKE_NF_PATH"\n'
        "echo 'some error' >&2\n"
        f"exit {exit_code}\n",
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_run_nextflow_needs_nextflow_on_path(tmp_path):
    empty = tmp_path / "empty_bin"
    empty.mkdir()
    with pytest.raises(RuntimeError, match="needs 'nextflow' on PATH"):
        run_nextflow(
            _plan(tmp_path / "out"), tmp_path / "plan.json", log_path=tmp_path / "nf.log",
            main_nf=MAIN_NF, env={"PATH": str(empty)},
        )  # fmt: skip
    assert not (tmp_path / "plan.json").exists()


def test_run_nextflow_needs_main_nf(tmp_path):
    bin_dir = tmp_path / "bin"
    _fake_nextflow(bin_dir)
    with pytest.raises(RuntimeError, match=re.escape(f"{tmp_path / 'nope.nf'} does not exist")):
        run_nextflow(
            _plan(tmp_path / "out"), tmp_path / "plan.json", log_path=tmp_path / "nf.log",
            main_nf=tmp_path / "nope.nf", env={"PATH": str(bin_dir)},
        )  # fmt: skip


@pytest.mark.parametrize("exit_code", [0, 1])
def test_run_nextflow_writes_plan_runs_and_logs(tmp_path, exit_code):
    bin_dir = tmp_path / "bin"
    _fake_nextflow(bin_dir, exit_code)
    outdir = tmp_path / "out"
    plan = _plan(outdir)
    env = {
        "PATH": str(bin_dir) + os.pathsep + "/usr/bin:/bin",
        "FAKE_NF_ARGS": str(tmp_path / "args"),
        "FAKE_NF_CWD": str(tmp_path / "cwd"),
        "FAKE_NF_PATH": str(tmp_path / "path"),
    }
    done = run_nextflow(
        plan, tmp_path / "plan.json", log_path=tmp_path / "logs" / "nf.log", main_nf=MAIN_NF,
        resume=True, extra_args=["-with-timeline"], env=env,
    )  # fmt: skip
    assert done.returncode == exit_code
    assert json.loads((tmp_path / "plan.json").read_text()) == plan
    args = (tmp_path / "args").read_text().splitlines()
    assert args[:4] == ["run", str(MAIN_NF.resolve()), "-params-file", str((tmp_path / "plan.json").resolve())]
    assert args[args.index("-profile") + 1] == "local"
    assert args[args.index("-work-dir") + 1] == str(outdir / "work")
    assert "-resume" in args and args[-1] == "-with-timeline"
    max_cpus = int(args[args.index("--max_cpus") + 1])
    assert max_cpus >= 1 and int(args[args.index("--max_memory_mb") + 1]) > 0
    assert (tmp_path / "cwd").read_text().strip() == str(outdir)  # .nextflow/ cache lives with the results
    first_on_path = (tmp_path / "path").read_text().strip().split(os.pathsep)[0]
    assert first_on_path == str(Path(sys.executable).parent)
    log = (tmp_path / "logs" / "nf.log").read_text()
    assert log.startswith("$ ") and "fake nextflow: run" in log and "some error" in log


@pytest.mark.parametrize(("profile", "capped"), [("slurm", False), ("slurm,apptainer", False), ("awsbatch", False),
                                               ("docker", True), ("local,docker", True), ("apptainer", True)])
def test_run_nextflow_caps_resources_where_tasks_run_on_this_machine(tmp_path, profile, capped):
    """Nextflow's local executor (also under docker) stops the run at a task bigger than the machine."""
    bin_dir = tmp_path / "bin"
    _fake_nextflow(bin_dir)
    env = {"PATH": str(bin_dir) + os.pathsep + "/usr/bin:/bin", "FAKE_NF_ARGS": str(tmp_path / "args"),
           "FAKE_NF_CWD": str(tmp_path / "cwd"), "FAKE_NF_PATH": str(tmp_path / "path")}  # fmt: skip
    run_nextflow(_plan(tmp_path / "o"), tmp_path / "p.json", log_path=tmp_path / "l", main_nf=MAIN_NF,
                 profile=profile, work_dir=tmp_path / "w", env=env)  # fmt: skip
    args = (tmp_path / "args").read_text().splitlines()
    assert ("--max_cpus" in args and "--max_memory_mb" in args) == capped
    assert "-resume" not in args
    assert args[args.index("-work-dir") + 1] == str(tmp_path / "w")


@pytest.mark.parametrize("profile", ["docker", "slurm,singularity", "apptainer"])
def test_a_required_sandbox_is_refused_where_tasks_run_in_containers(tmp_path, profile):
    """bubblewrap cannot start inside the containers: a required sandbox there would fail every task."""
    task = Task(FIXTURES / "project" / "src" / "tiny")
    with pytest.raises(ConfigError, match=r"--sandbox on cannot hold inside the containers.*--sandbox off"):
        run_benchmark(task, tmp_path / "out", engine="nextflow", profile=profile, sandbox=True)
    assert not (tmp_path / "out").exists()  # refused before anything is planned or written
    assert runs_in_containers(profile) and not runs_in_containers("local") and not runs_in_containers("slurm")


# --------------------------------------------------------------------------------------------------
# the real pipeline


def _openpert_on_path(bin_dir: Path) -> None:
    """Make sure tasks find `openpert` (an installed script, else a shim onto this checkout)."""
    if shutil.which("openpert", path=str(Path(sys.executable).parent)):
        return
    common = REPO / "common"
    _write(
        bin_dir / "openpert",
        f'#!/bin/sh\nPYTHONPATH="{common}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" '
        '-c "import sys; from openpert.cli import main; sys.exit(main())" "$@"\n',
    )
    (bin_dir / "openpert").chmod(0o755)


#: Set (to anything but "" or "0") where Nextflow must be there: a missing nextflow then fails the
#: real-Nextflow tests instead of skipping them (.github/workflows/nextflow.yml sets it).
REQUIRE_NEXTFLOW = "OPENPERT_REQUIRE_NEXTFLOW"


def nextflow_or_skip(env: dict[str, str]) -> str:
    """The ``nextflow`` on ``env``'s PATH; without one, skip, or fail where ``OPENPERT_REQUIRE_NEXTFLOW`` is set."""
    found = shutil.which("nextflow", path=env.get("PATH", ""))
    if found is not None:
        return found
    if env.get(REQUIRE_NEXTFLOW, "") not in ("", "0"):
        pytest.fail(f"nextflow is not on PATH, and {REQUIRE_NEXTFLOW} says this run must use it", pytrace=False)
    pytest.skip("nextflow is not on PATH")


def test_a_missing_nextflow_skips_unless_it_is_required(tmp_path):
    bin_dir = tmp_path / "bin"
    fake = _fake_nextflow(bin_dir)
    assert nextflow_or_skip({"PATH": str(bin_dir), REQUIRE_NEXTFLOW: "1"}) == str(fake)
    with pytest.raises(pytest.skip.Exception, match="nextflow is not on PATH"):
        nextflow_or_skip({"PATH": str(tmp_path), REQUIRE_NEXTFLOW: "0"})
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_NEXTFLOW} says this run must use it"):
        nextflow_or_skip({"PATH": str(tmp_path), REQUIRE_NEXTFLOW: "1"})


@pytest.mark.nextflow
@pytest.mark.slow
def test_real_nextflow_pipeline(tmp_path):
    nextflow_or_skip(dict(os.environ))
    data = _write(
        tmp_path / "data" / "toy" / "data.json",
        json.dumps({"dataset_id": "toy", "observations": {"a": [1, 2, 3], "b": [10, 20]}}),
    )
    solution = _write(
        tmp_path / "data" / "toy" / "solution.json",
        json.dumps({"dataset_id": "toy", "truth": {"a": 2.5, "b": 15}}),
    )
    outdir = tmp_path / "results"

    def entry(kind: str, name: str, inputs: dict, output: str, params: dict) -> dict:
        config = FIXTURE_TASK / f"{kind}s" / name / "config.vsh.yaml"
        return {
            "id": name,
            "type": kind,
            "config": str(config),
            "image": f"openpert/nf_task/{kind}s/{name}:0.1.0",
            "digest": component_digest(read_config(config)),
            "needs_llm": False,
            "inputs": inputs,
            "outputs": {"output": f"file_{output.split('.')[0]}"},
            "output_names": {"output": output},
            "params": params,
            "labels": ["lowmem", "lowcpu", "lowtime"],
        }

    plan = {
        "plan_version": 1,
        "task": "nf_task",
        "task_dir": str(FIXTURE_TASK),
        "repo_root": str(REPO),
        "outdir": str(outdir),
        "datasets": [{"id": "toy", "files": {"file_data": str(data), "file_solution": str(solution)}}],
        "methods": [
            entry("method", "mean", {"input_data": "file_data"}, "prediction.json", {"offset": 0.5}),
            entry("method", "broken", {"input_data": "file_data"}, "prediction.json", {}),
        ],
        "metrics": [
            entry("metric", "abs_error", {"input_solution": "file_solution", "input_prediction": "file_prediction"},
                  "score.json", {}),
        ],  # fmt: skip
        "prediction_format": "file_prediction",
        "method_formats": ["file_data"],
        "resources": parse_label_resources(REPO / "_viash.yaml"),
        "loaders": [],
        "shared_data_argument": "shared_data",
    }
    configs = {e["config"]: read_config(e["config"]) for e in [*plan["methods"], *plan["metrics"]]}
    plan["jobs"] = [job.entry() for job in expand_jobs(plan, configs)]
    attach_bundles(plan, tmp_path / "components")
    run = {"plan_version": 1, "task": "nf_task", "outdir": str(outdir), "jobs": nextflow_jobs(plan, RUN_SETTINGS, {})}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _openpert_on_path(bin_dir)
    env = dict(os.environ, PATH=str(bin_dir) + os.pathsep + os.environ["PATH"])
    if env.get("PYTHONPATH"):  # make a relative PYTHONPATH (e.g. "common") work in task folders
        env["PYTHONPATH"] = os.pathsep.join(str((Path.cwd() / p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep))

    done = run_nextflow(run, outdir / "plan.json", log_path=outdir / "nextflow.log", main_nf=MAIN_NF, env=env)
    log = (outdir / "nextflow.log").read_text()
    assert done.returncode == 0, log

    records = {r.job_id: r for r in collect_job_records(run["jobs"], parse_trace(outdir / TRACE_FILE_NAME))}
    assert set(records) == {"toy/mean", "toy/mean/abs_error", "toy/broken"}  # a failed job's metric could not run

    mean = records["toy/mean"]
    assert mean.succeeded, (mean.reason, log)
    prediction = json.loads(Path(mean.outputs["output"]).read_text())
    assert prediction["prediction"] == {"a": 2.5, "b": 15.5}  # the offset parameter reached the script
    assert Path(mean.outputs["output"]) == outdir / "outputs" / "toy" / "mean" / "prediction.json"
    assert mean.duration_s is not None

    score = records["toy/mean/abs_error"]
    assert score.succeeded, (score.reason, log)
    assert Path(score.outputs["output"]) == outdir / "outputs" / "toy" / "mean" / "abs_error" / "score.json"
    assert json.loads(Path(score.outputs["output"]).read_text())["metric_values"] == [0.25]

    broken = records["toy/broken"]
    assert (broken.status, broken.exit_code, broken.reason) == ("failed", 1, "exited with code 1")
    assert broken.log is not None and "fails on purpose" in Path(broken.log).read_text()

    # -resume reuses every finished task
    again = run_nextflow(run, outdir / "plan.json", log_path=outdir / "nextflow2.log", main_nf=MAIN_NF,
                         env=env, resume=True)  # fmt: skip
    assert again.returncode == 0
    resumed = {r.job_id: r for r in collect_job_records(run["jobs"], parse_trace(outdir / TRACE_FILE_NAME))}
    assert resumed["toy/mean"].cached and resumed["toy/mean/abs_error"].cached
    assert resumed["toy/mean/abs_error"].succeeded
