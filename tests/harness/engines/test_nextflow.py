"""Tests for the Nextflow engine: openpert.engines.nextflow, main.nf and nextflow.config.

Nextflow itself is only needed by the last test (skipped where ``nextflow`` is not on PATH);
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
from project_paths import FIXTURES, ROOT

from openpert.engines.nextflow import TRACE_FILE_NAME, config_profiles, nextflow_command, run_nextflow
from openpert.engines.nextflow_trace import collect_job_records, parse_trace
from openpert.engines.resource_labels import parse_label_resources, parse_resource_directive
from openpert.run.records import EXIT_INVALID, EXIT_MEMORY, EXIT_TIME

REPO = ROOT
MAIN_NF = REPO / "main.nf"
NEXTFLOW_CONFIG = REPO / "nextflow.config"
FIXTURE_TASK = FIXTURES / "nf_task"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _viash_yaml(tmp_path: Path, labels: str) -> Path:
    body = '  .runners[.type == "nextflow"].config.labels := { ' + labels + " }\n"
    return _write(tmp_path / "_viash.yaml", "name: x\nconfig_mods: |\n" + body)


# --------------------------------------------------------------------------------------------------
# resource labels


def test_parse_label_resources_reads_the_repository_labels():
    assert parse_label_resources(REPO / "_viash.yaml") == {
        "lowmem": {"memory_mb": 4096},
        "midmem": {"memory_mb": 12288},
        "highmem": {"memory_mb": 20480},
        "lowcpu": {"cpus": 1},
        "midcpu": {"cpus": 2},
        "highcpu": {"cpus": 4},
        "lowtime": {"time_s": 600},
        "midtime": {"time_s": 3600},
        "hightime": {"time_s": 14400},
        "veryhightime": {"time_s": 43200},
    }


def test_parse_label_resources_units(tmp_path):
    path = _viash_yaml(
        tmp_path,
        'a : "memory = 500.MB", b : "memory = 1024.KB", c : "memory = 2.TB", d : "time = 30.s", '
        'e : "time = 2.d", f : "time = 1.5.h", g : "memory = \'1 GB\'", h : "time = 250.ms", '
        'i : "cpus = 16", j : "memory = 3GB"',
    )
    assert parse_label_resources(path) == {
        "a": {"memory_mb": 500},
        "b": {"memory_mb": 1},
        "c": {"memory_mb": 2 * 1024 * 1024},
        "d": {"time_s": 30},
        "e": {"time_s": 2 * 86400},
        "f": {"time_s": 5400},
        "g": {"memory_mb": 1024},
        "h": {"time_s": 1},  # rounded up: a limit is never made stricter than written
        "i": {"cpus": 16},
        "j": {"memory_mb": 3072},
    }


def test_parse_label_resources_accepts_a_list_of_config_mods(tmp_path):
    path = _write(
        tmp_path / "_viash.yaml",
        yaml.safe_dump(
            {
                "config_mods": [
                    '.info.x := "y"',
                    '.runners[.type == "nextflow"].config.labels := { small : "memory = 1.GB" }',
                ]
            }
        ),
    )
    assert parse_label_resources(path) == {"small": {"memory_mb": 1024}}


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ('lowmem : "memory = 4.XB"', "unknown memory unit 'XB'"),
        ('lowtime : "time = 10.fortnights"', "unknown time unit 'fortnights'"),
        ('lowdisk : "disk = 4.GB"', "unknown resource directive 'disk'"),
        ('lowcpu : "cpus = two"', "cpus must be a positive integer"),
        ('lowcpu : "cpus = 0"', "cpus must be a positive integer"),
        ('lowmem : "memory 4.GB"', "expected '<directive> = <value>'"),
        ('lowmem : "memory = lots"', "cannot read memory value 'lots'"),
        ("lowmem : memory = 4.GB", "malformed label entry"),
        ('lowmem : "memory = 4.GB" midmem : "memory = 8.GB"', "malformed label entry"),
    ],
)
def test_parse_label_resources_malformed_entries_name_the_file(tmp_path, labels, message):
    path = _viash_yaml(tmp_path, labels)
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        parse_label_resources(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\n", "no 'config_mods'"),
        ("config_mods: |\n  .info.x := 1\n", "has no '.labels := {...}'"),
        ('config_mods: |\n  .runners[.type == "nextflow"].config.labels := lowmem\n', "malformed labels"),
        ("config_mods: [\n", "not valid YAML"),
    ],
)
def test_parse_label_resources_without_labels_names_the_file(tmp_path, text, message):
    path = _write(tmp_path / "_viash.yaml", text)
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        parse_label_resources(path)
    assert str(path) in str(info.value)


def test_parse_resource_directive():
    assert parse_resource_directive("memory = 4.GB") == {"memory_mb": 4096}
    assert parse_resource_directive("memory=512.B") == {"memory_mb": 1}
    assert parse_resource_directive("time = 10.m") == {"time_s": 600}
    assert parse_resource_directive("time = 1.h") == {"time_s": 3600}
    assert parse_resource_directive("time = '90 min'") == {"time_s": 5400}
    assert parse_resource_directive("cpus = 4") == {"cpus": 4}


# --------------------------------------------------------------------------------------------------
# nextflow.config and the command line


def test_repository_config_defines_the_documented_profiles():
    assert config_profiles(NEXTFLOW_CONFIG) == ["local", "docker", "singularity", "slurm", "awsbatch", "k8s"]


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
    assert "local, docker, singularity, slurm, awsbatch, k8s" in message


def test_nextflow_command_reads_profiles_from_the_given_config(tmp_path):
    config = _write(tmp_path / "custom.config", "profiles { mycluster { } }\n")
    cmd = nextflow_command("p.json", main_nf=MAIN_NF, profile="mycluster", work_dir="w", config_path=config)
    assert cmd[cmd.index("-profile") + 1] == "mycluster"
    with pytest.raises(ValueError, match="unknown Nextflow profile 'local'"):
        nextflow_command("p.json", main_nf=MAIN_NF, work_dir="w", config_path=config)


def _config_label_blocks(text: str) -> dict[str, dict[str, int]]:
    blocks = re.findall(r"withLabel:\s*(\w+)\s*\{\s*(\w+\s*=\s*[^}\n]+?)\s*\}", text)
    return {label: parse_resource_directive(directive) for label, directive in blocks}


def test_config_labels_match_viash_yaml():
    assert _config_label_blocks(NEXTFLOW_CONFIG.read_text()) == parse_label_resources(REPO / "_viash.yaml")


def test_config_trace_matches_what_openpert_reads():
    text = NEXTFLOW_CONFIG.read_text()
    trace = _block(text, "trace {")
    assert re.search(r"enabled\s*=\s*true", trace)
    assert re.search(r"overwrite\s*=\s*true", trace)  # -resume rewrites the same file
    assert f'file = "${{params.outdir}}/{TRACE_FILE_NAME}"' in trace
    fields = re.search(r"fields\s*=\s*'([^']*)'", trace).group(1).split(",")
    assert fields == [
        "task_id", "hash", "native_id", "name", "tag", "status", "exit", "submit",
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


def test_main_nf_processes_run_openpert_run_component():
    code = _main_nf_code()
    command = _block(code, "def componentCommand(")
    assert "'run-component'" in command
    assert "params.openpert ?: 'openpert'" in command
    for name, publish in (("run_method", "outputs/"), ("run_metric", "outputs/")):
        process = _block(code, f"process {name} ")
        script = process[process.index("script:") :]
        assert "componentCommand(job, inputs)" in script
        assert "errorStrategy 'ignore'" in process
        assert 'tag "${job.id}"' in process
        assert f'publishDir "${{params.outdir}}/{publish}${{job.publish_dir}}"' in process
        for directive in ("cpus {", "memory {", "time {"):
            assert directive in process
        assert "path(inputs, stageAs:" in process
        assert not re.search(r"^\s*label\s", process, re.MULTILINE)  # labels become cpus/memory/time


def test_main_nf_wires_channels_as_documented():
    workflow = _block(_main_nf_code(), "workflow {")
    assert "fromList(params.datasets)" in workflow
    assert "fromList(params.methods)" in workflow
    assert re.search(r"datasets\s*\.combine\(methods\)", workflow)
    assert re.search(r"predictions\s*\.combine\(metrics\)", workflow)
    assert "run_method(method_jobs)" in workflow
    assert "run_metric(metric_jobs)" in workflow


def test_main_nf_params_come_from_the_plan_or_the_config():
    plan_keys = {
        "plan_version", "task", "task_dir", "repo_root", "outdir", "datasets", "methods", "metrics",
        "prediction_format", "method_formats", "resources",
    }  # fmt: skip
    config_params = set(
        re.findall(r"^\s{4}(\w+)\s*=", _block(NEXTFLOW_CONFIG.read_text(), "params {"), re.MULTILINE)
    )
    used = set(re.findall(r"params\.(\w+)", _main_nf_code()))
    assert used, "main.nf reads its plan from params"
    assert used - plan_keys - config_params == set()


# --------------------------------------------------------------------------------------------------
# trace

TRACE_HEADER = (
    "task_id\thash\tnative_id\tname\ttag\tstatus\texit\tsubmit\tduration\trealtime\t%cpu\tpeak_rss"
    "\tpeak_vmem\tworkdir"
)


def _trace_text(work: Path) -> str:
    rows = [
        # a method and its metric that succeed
        ("1", "3f/a1b2c3", "40211", "run_method (k562/mlp)", "k562/mlp", "COMPLETED", "0",
         "2026-01-05 10:00:00.123", "1m 2s", "58.3s", "98.5%", "812.4 MB", "1.2 GB", f"{work}/3f/a1b2c3"),
        ("7", "0c/11aa22", "40280", "run_metric (k562/mlp/auroc)", "k562/mlp/auroc", "COMPLETED", "0",
         "2026-01-05 10:01:03.001", "2.5s", "2.1s", "101.2%", "96 MB", "300 MB", f"{work}/0c/11aa22"),
        # killed for memory, killed for time by a scheduler, crashed
        ("2", "4a/b5c6d7", "40212", "run_method (k562/hog)", "k562/hog", "FAILED", "137",
         "2026-01-05 10:00:00.200", "5m 1s", "5m", "99.0%", "4 GB", "4.5 GB", f"{work}/4a/b5c6d7"),
        ("3", "5b/c6d7e8", "40213", "run_method (k562/slow)", "k562/slow", "FAILED", "143",
         "2026-01-05 10:00:00.300", "1h 2m 3s", "1h 2m", "100.0%", "1.5 GB", "2 GB", f"{work}/5b/c6d7e8"),
        ("4", "6c/d7e8f9", "40214", "run_method (k562/crash)", "k562/crash", "FAILED", "1",
         "2026-01-05 10:00:00.400", "350ms", "120ms", "12.0%", "1024 KB", "0", f"{work}/6c/d7e8f9"),
        # stopped by the local executor at its time limit: no exit code
        ("5", "7d/e8f9a0", "40215", "run_method (k562/stuck)", "k562/stuck", "FAILED", "-",
         "2026-01-05 10:00:00.500", "10m 2s", "10m 1s", "-", "-", "-", f"{work}/7d/e8f9a0"),
        # completed, but its output was never published
        ("6", "8e/f9a0b1", "40216", "run_method (k562/invalid)", "k562/invalid", "COMPLETED", "0",
         "2026-01-05 10:00:00.600", "3s", "2.9s", "50.0%", "512 B", "100 MB", f"{work}/8e/f9a0b1"),
        ("11", "9f/a0b1c2", "-", "run_metric (k562/invalid/auroc)", "k562/invalid/auroc", "ABORTED", "-",
         "2026-01-05 10:00:04.000", "-", "-", "-", "-", "-", f"{work}/9f/a0b1c2"),
        # a retried method, then its metric reused from a previous run
        ("8", "aa/000001", "40218", "run_method (k562/flaky)", "k562/flaky", "FAILED", "1",
         "2026-01-05 10:00:00.800", "1s", "900ms", "80.0%", "10 MB", "20 MB", f"{work}/aa/000001"),
        ("9", "aa/000002", "40219", "run_method (k562/flaky)", "k562/flaky", "COMPLETED", "0",
         "2026-01-05 10:00:02.000", "1d 2h", "1d 1h 59m 59s", "99.9%", "1.5 GB", "2 GB", f"{work}/aa/000002"),
        ("10", "bb/000003", "-", "run_metric (k562/flaky/auroc)", "k562/flaky/auroc", "CACHED", "0",
         "2026-01-04 09:00:00.000", "4.2s", "4s", "95.0%", "200 MB", "400 MB", f"{work}/bb/000003"),
        # a task Nextflow recorded without an exit status (Integer.MAX_VALUE)
        ("12", "cc/000004", "40220", "run_method (k562/lost)", "k562/lost", "FAILED", "2147483647",
         "2026-01-05 10:00:01.000", "2s", "1s", "-", "-", "-", f"{work}/cc/000004"),
    ]  # fmt: skip
    return "\n".join([TRACE_HEADER, *("\t".join(r) for r in rows)]) + "\n"


@pytest.fixture
def trace_file(tmp_path):
    return _write(tmp_path / TRACE_FILE_NAME, _trace_text(tmp_path / "work"))


def test_parse_trace_converts_values(trace_file, tmp_path):
    rows = parse_trace(trace_file)
    assert len(rows) == 12
    by_id = {r["task_id"]: r for r in rows}
    mlp = by_id[1]
    assert mlp == {
        "task_id": 1,
        "hash": "3f/a1b2c3",
        "native_id": "40211",
        "name": "run_method (k562/mlp)",
        "tag": "k562/mlp",
        "status": "COMPLETED",
        "exit": 0,
        "submit": "2026-01-05 10:00:00.123",
        "duration": 62.0,
        "realtime": 58.3,
        "%cpu": 98.5,
        "peak_rss": pytest.approx(812.4),
        "peak_vmem": 1.2 * 1024,
        "workdir": f"{tmp_path / 'work'}/3f/a1b2c3",
    }
    assert by_id[2]["exit"] == 137 and by_id[2]["peak_rss"] == 4096.0 and by_id[2]["realtime"] == 300.0
    assert by_id[3]["duration"] == 3723.0 and by_id[3]["realtime"] == 3720.0
    assert by_id[4]["duration"] == pytest.approx(0.35) and by_id[4]["realtime"] == pytest.approx(0.12)
    assert by_id[4]["peak_rss"] == 1.0 and by_id[4]["peak_vmem"] == 0.0
    assert by_id[5]["exit"] is None and by_id[5]["%cpu"] is None and by_id[5]["peak_rss"] is None
    assert by_id[6]["peak_rss"] == pytest.approx(512 / 1024**2)
    assert by_id[11]["native_id"] is None and by_id[11]["duration"] is None
    assert by_id[9]["duration"] == 26 * 3600.0 and by_id[9]["realtime"] == 26 * 3600.0 - 1
    assert by_id[12]["exit"] is None


def test_parse_trace_header_only_and_blank_lines(tmp_path):
    assert parse_trace(_write(tmp_path / "t.tsv", TRACE_HEADER + "\n\n")) == []
    assert parse_trace(_write(tmp_path / "empty.tsv", "")) == []


def test_parse_trace_errors_name_file_and_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        parse_trace(tmp_path / "missing.tsv")
    short = _write(tmp_path / "short.tsv", TRACE_HEADER + "\n1\t3f/a1b2c3\tCOMPLETED\n")
    with pytest.raises(ValueError, match=re.escape(f"{short}, line 2: 3 fields, the header has 14")):
        parse_trace(short)
    row = "\t".join(["1", "h", "1", "n", "t", "COMPLETED", "0", "s", "forever", "1s", "1%", "1 MB", "1 MB", "w"])
    bad = _write(tmp_path / "bad.tsv", TRACE_HEADER + "\n" + row + "\n")
    with pytest.raises(ValueError, match=re.escape(f"{bad}, line 2, field 'duration'")):
        parse_trace(bad)
    row = row.replace("forever", "1s").replace("1 MB\t1 MB", "lots\t1 MB")
    with pytest.raises(ValueError, match="field 'peak_rss': not a Nextflow memory value"):
        parse_trace(_write(tmp_path / "bad2.tsv", TRACE_HEADER + "\n" + row + "\n"))


# --------------------------------------------------------------------------------------------------
# job records


def _component(id_: str, type_: str, labels: list[str], output: str) -> dict:
    return {
        "id": id_,
        "type": type_,
        "config": f"/repo/src/t/{type_}s/{id_}/config.vsh.yaml",
        "inputs": {"input": "file_data"},
        "outputs": {"output": "file_out"},
        "output_names": {"output": output},
        "params": {},
        "labels": labels,
    }


def _plan(outdir: Path) -> dict:
    methods = ["mlp", "hog", "slow", "crash", "stuck", "invalid", "flaky", "lost", "never"]
    return {
        "plan_version": 1,
        "outdir": str(outdir),
        "datasets": [{"id": "k562", "files": {"file_data": "/data/k562.h5ad"}}],
        "methods": [
            _component(m, "control_method" if m == "mlp" else "method", ["lowmem", "lowtime"], "prediction.h5ad")
            for m in methods
        ],
        "metrics": [_component("auroc", "metric", ["lowmem"], "score.h5ad")],
        "prediction_format": "file_out",
        "resources": {"lowmem": {"memory_mb": 4096}, "lowtime": {"time_s": 600}},
    }


@pytest.fixture
def collected(tmp_path, trace_file):
    outdir = tmp_path / "results"
    published = [
        "k562/mlp/prediction.h5ad",
        "k562/mlp/auroc/score.h5ad",
        "k562/flaky/prediction.h5ad",
        "k562/flaky/auroc/score.h5ad",
        "k562/hog/prediction.h5ad",  # stale, from an earlier run: the failure still counts
    ]
    for rel in published:
        _write(outdir / "outputs" / rel, "x")
    _write(tmp_path / "work" / "3f" / "a1b2c3" / ".command.log", "log of mlp\n")
    records = collect_job_records(_plan(outdir), parse_trace(trace_file))
    return outdir, {r.job_id: r for r in records}, records


def test_collect_returns_every_plan_job_in_plan_order(collected):
    _, _, records = collected
    assert [r.job_id for r in records[:4]] == ["k562/mlp", "k562/mlp/auroc", "k562/hog", "k562/hog/auroc"]
    assert len(records) == 18
    assert [r.stage for r in records[:2]] == ["method", "metric"]


def test_collect_succeeded_jobs(collected, tmp_path):
    outdir, by_id, _ = collected
    mlp = by_id["k562/mlp"]
    assert mlp.status == "succeeded" and mlp.succeeded
    assert mlp.exit_code == 0 and mlp.reason == ""
    assert mlp.component == "mlp" and mlp.component_type == "control_method"
    assert mlp.dataset_id == "k562" and mlp.method_id == "mlp"
    assert mlp.outputs == {"output": str(outdir / "outputs" / "k562" / "mlp" / "prediction.h5ad")}
    assert mlp.duration_s == 58.3 and mlp.peak_memory_mb == pytest.approx(812.4)
    assert mlp.log == str(tmp_path / "work" / "3f" / "a1b2c3" / ".command.log")
    assert mlp.cached is False

    score = by_id["k562/mlp/auroc"]
    assert score.succeeded and score.stage == "metric" and score.component == "auroc"
    assert score.component_type == "metric" and score.method_id == "mlp"
    assert score.outputs == {"output": str(outdir / "outputs" / "k562" / "mlp" / "auroc" / "score.h5ad")}
    assert score.duration_s == 2.1 and score.peak_memory_mb == 96.0
    assert score.log is None  # its work dir does not exist any more


def test_collect_failures_and_their_reasons(collected):
    _, by_id, _ = collected
    hog = by_id["k562/hog"]
    assert (hog.status, hog.exit_code) == ("failed", EXIT_MEMORY)
    assert hog.reason == "memory limit exceeded (peak 4.0 GB, limit 4.0 GB)"
    assert hog.outputs == {}  # a stale published file does not make a failed job succeed

    slow = by_id["k562/slow"]
    assert (slow.status, slow.exit_code) == ("failed", EXIT_TIME)
    assert slow.reason == "time limit exceeded (limit 600 s)"
    assert slow.duration_s == 3720.0

    crash = by_id["k562/crash"]
    assert (crash.status, crash.exit_code, crash.reason) == ("failed", 1, "exited with code 1")
    assert crash.peak_memory_mb == 1.0

    stuck = by_id["k562/stuck"]
    assert (stuck.status, stuck.exit_code) == ("failed", EXIT_TIME)
    assert stuck.reason.startswith("time limit exceeded")

    lost = by_id["k562/lost"]
    assert (lost.status, lost.exit_code) == ("failed", EXIT_INVALID)
    assert lost.reason == "stopped by Nextflow without an exit code"


def test_collect_missing_published_output_is_invalid(collected):
    outdir, by_id, _ = collected
    invalid = by_id["k562/invalid"]
    assert (invalid.status, invalid.exit_code) == ("failed", EXIT_INVALID)
    missing = outdir / "outputs" / "k562" / "invalid" / "prediction.h5ad"
    assert invalid.reason == f"output 'output' was not published: {missing} is missing"
    assert invalid.outputs == {}
    aborted = by_id["k562/invalid/auroc"]
    assert (aborted.status, aborted.exit_code) == ("failed", EXIT_INVALID)
    assert aborted.reason == "aborted by Nextflow before it finished"


def test_collect_retries_and_cache(collected):
    _, by_id, _ = collected
    flaky = by_id["k562/flaky"]
    assert flaky.succeeded and flaky.exit_code == 0
    assert flaky.duration_s == 26 * 3600 - 1 and flaky.peak_memory_mb == 1536.0
    cached = by_id["k562/flaky/auroc"]
    assert cached.succeeded and cached.cached is True


def test_collect_jobs_that_never_ran(collected):
    _, by_id, _ = collected
    for method in ("hog", "slow", "crash", "stuck", "lost"):
        record = by_id[f"k562/{method}/auroc"]
        assert (record.status, record.exit_code) == ("failed", EXIT_INVALID)
        assert record.reason == f"not run: upstream job k562/{method} failed"
        assert record.duration_s is None and record.outputs == {}
    never = by_id["k562/never"]
    assert (never.status, never.exit_code, never.reason) == ("failed", EXIT_INVALID, "not run")
    assert by_id["k562/never/auroc"].reason == "not run: upstream job k562/never failed"


def test_collect_metric_missing_after_successful_method_is_not_run(tmp_path):
    outdir = tmp_path / "results"
    _write(outdir / "outputs" / "k562" / "mlp" / "prediction.h5ad", "x")
    trace = _write(tmp_path / "t.tsv", _trace_text(tmp_path / "work").splitlines()[0] + "\n"
                   + _trace_text(tmp_path / "work").splitlines()[1] + "\n")  # fmt: skip
    records = collect_job_records(_plan(outdir), parse_trace(trace))
    metric = next(r for r in records if r.job_id == "k562/mlp/auroc")
    assert (metric.status, metric.reason) == ("failed", "not run")
    assert next(r for r in records if r.job_id == "k562/mlp").succeeded


def test_collect_without_trace_rows_fails_every_job(tmp_path):
    records = collect_job_records(_plan(tmp_path), [])
    assert len(records) == 18
    assert all(not r.succeeded and r.exit_code == EXIT_INVALID for r in records)
    assert {r.reason for r in records if r.stage == "method"} == {"not run"}


def test_collect_records_round_trip_as_json(collected, tmp_path):
    _, by_id, _ = collected
    path = tmp_path / "record.json"
    by_id["k562/hog"].write(path)
    assert json.loads(path.read_text())["exit_code"] == EXIT_MEMORY


# --------------------------------------------------------------------------------------------------
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


def test_run_nextflow_caps_resources_only_for_local(tmp_path):
    bin_dir = tmp_path / "bin"
    _fake_nextflow(bin_dir)
    env = {"PATH": str(bin_dir) + os.pathsep + "/usr/bin:/bin", "FAKE_NF_ARGS": str(tmp_path / "args"),
           "FAKE_NF_CWD": str(tmp_path / "cwd"), "FAKE_NF_PATH": str(tmp_path / "path")}  # fmt: skip
    run_nextflow(_plan(tmp_path / "o"), tmp_path / "p.json", log_path=tmp_path / "l", main_nf=MAIN_NF,
                 profile="slurm", work_dir=tmp_path / "w", env=env)  # fmt: skip
    args = (tmp_path / "args").read_text().splitlines()
    assert "--max_cpus" not in args and "-resume" not in args
    assert args[args.index("-work-dir") + 1] == str(tmp_path / "w")


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


@pytest.mark.nextflow
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nextflow") is None, reason="nextflow is not on PATH")
def test_real_nextflow_pipeline(tmp_path):
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
        return {
            "id": name,
            "type": kind,
            "config": str(FIXTURE_TASK / f"{kind}s" / name / "config.vsh.yaml"),
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
        "resources": parse_label_resources(REPO / "_viash.yaml"),
    }
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _openpert_on_path(bin_dir)
    env = dict(os.environ, PATH=str(bin_dir) + os.pathsep + os.environ["PATH"])
    if env.get("PYTHONPATH"):  # make a relative PYTHONPATH (e.g. "common") work in task folders
        env["PYTHONPATH"] = os.pathsep.join(str((Path.cwd() / p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep))

    done = run_nextflow(plan, outdir / "plan.json", log_path=outdir / "nextflow.log", main_nf=MAIN_NF, env=env)
    log = (outdir / "nextflow.log").read_text()
    assert done.returncode == 0, log

    records = {r.job_id: r for r in collect_job_records(plan, parse_trace(outdir / TRACE_FILE_NAME))}
    assert set(records) == {"toy/mean", "toy/mean/abs_error", "toy/broken", "toy/broken/abs_error"}

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
    assert records["toy/broken/abs_error"].reason == "not run: upstream job toy/broken failed"

    # -resume reuses every finished task
    again = run_nextflow(plan, outdir / "plan.json", log_path=outdir / "nextflow2.log", main_nf=MAIN_NF,
                         env=env, resume=True)  # fmt: skip
    assert again.returncode == 0
    resumed = {r.job_id: r for r in collect_job_records(plan, parse_trace(outdir / TRACE_FILE_NAME))}
    assert resumed["toy/mean"].cached and resumed["toy/mean/abs_error"].cached
    assert resumed["toy/mean/abs_error"].succeeded
