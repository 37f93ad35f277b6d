"""main.nf and nextflow.config under Groovy, without Nextflow, and the jobs main.nf runs.

Groovy parses both files as Nextflow's legacy parser would (a Nextflow script is Groovy syntax)
and tests/harness/engines/nextflow/strict_syntax.groovy checks them against the rules of
Nextflow's strict syntax. The jobs main.nf runs are made in Python (``nextflow_jobs``) from a real
plan of the fixture project: every job has its image, its code digest, its limits on each attempt
and a task script whose words reach `openpert` intact; main.nf's one helper that builds words for
bash (`words`) runs here under Groovy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "nextflow"))
from groovy_tools import ROOT, needs_groovy, run_groovy, strict_check_all  # noqa: E402

from openpert.config.task import Task  # noqa: E402
from openpert.config.viash import read_config  # noqa: E402
from openpert.engines.cache_keys import component_digest  # noqa: E402
from openpert.engines.nextflow import RUN_SETTINGS, attach_bundles, attempt_limits, nextflow_jobs, run_settings  # noqa: E402
from openpert.engines.plan import dataset_jobs, label_resources, make_plan  # noqa: E402
from openpert.engines.resource_labels import parse_label_resources  # noqa: E402

HOSTILE = [
    "it's", "$(touch pwned)", "`touch pwned`", "; touch pwned", "a\nb", '"quoted"', "back\\slash", "*", "~",
    "", "--flag", "$HOME", "!!", "x' ; touch pwned ; '", "ünïcode ✓", "tab\there", "a b  c",
]  # fmt: skip


# --------------------------------------------------------------------------------------------------
# parsing and the strict syntax

BAD_SCRIPT = (
    "import groovy.json.JsonSlurper\n"
    "include { foo } from './foo' addParams(x: 1)\n"
    "params.x = 1\n"
    "println 'top'\n"
    "class Helper { }\n"
    "def f(a) {\n"
    "    println params.x\n"
    "    for (i in [1, 2]) { println i }\n"
    "    while (false) { }\n"
    "    switch (a) { case 1: break }\n"
    "    final b = 2\n"
    "    String c = 'x'\n"
    "    def d = (Map) a\n"
    "    def e = [*a]\n"
    "    g(h = 1)\n"
    "    a++\n"
    "    [1].each { println it }\n"
    "    def s = $/x/$\n"
    "}\n"
    "process p {\n    input:\n    env FOO\n    val x\n    '''\n    echo\n    '''\n}\n"
    "process q {\n    input:\n    val x\n    shell:\n    '''\n    echo\n    '''\n}\n"
    "workflow {\n    Channel.of(1)\n}\n"
)
BAD_CONFIG = (
    "import foo.Bar\n"
    "def hostname() { 'x' }\n"
    "def y = 1\n"
    "if (y) { params.a = 1 }\n"
    "params { a = 1 }\n"
    "google.location = 'x'\n"
    'google.subnetwork = "regions/${google.location}/x"\n'
    "process {\n    withLabel: big { memory = { 4.GB * task.attempt } }\n    cpus = y\n}\n"
    "profiles { local { process.executor = 'local'; println 'x' } }\n"
    "includeConfig 'other.config'\n"
)


@pytest.fixture(scope="module")
def strict(tmp_path_factory):
    """``strict_syntax.groovy`` on main.nf, nextflow.config and the files below, all in one Groovy run, by name."""
    folder = tmp_path_factory.mktemp("strict")
    files = {"bad.nf": BAD_SCRIPT, "bad.config": BAD_CONFIG, "snippet.nf": "println 'Hello'\ndef x = 1\nprintln x\n",
             "broken.nf": "workflow {\n"}
    for name, text in files.items():
        (folder / name).write_text(text)
    checks = {"main.nf": ("script", ROOT / "main.nf"), "nextflow.config": ("config", ROOT / "nextflow.config")}
    checks.update({name: ("config" if name.endswith(".config") else "script", folder / name) for name in files})
    return dict(zip(checks, strict_check_all(list(checks.values()))))


@needs_groovy
def test_main_nf_keeps_to_the_strict_syntax(strict):
    assert strict["main.nf"].problems() == (0, [])


@needs_groovy
def test_nextflow_config_keeps_to_the_strict_syntax(strict):
    assert strict["nextflow.config"].problems() == (0, [])


@needs_groovy
def test_strict_checker_reports_every_rule_it_knows(strict):
    code, problems = strict["bad.nf"].problems()
    assert code == 1
    expected = [
        ":0: import declaration", ":2: include with addParams", ":4: statement outside a workflow",
        ":5: class declaration 'Helper'", ":8: for loop", ":9: while loop", ":10: switch statement",
        ":11: variable 'b' declared final", ":12: variable 'c' declared with a Groovy type", ":13: soft cast to Map",
        ":14: spread operator", ":15: assignment inside an expression", ":16: ++ in an expression",
        ":17: closure uses the implicit parameter 'it'", ":18: dollar-slashy string",
        ":20: process without a 'script:' label", ":22: env input or output 'FOO' must be quoted",
        ":28: process 'shell:' section", ":37: 'Channel'", ":7: params used outside the entry workflow",
    ]  # fmt: skip
    for text in expected:
        assert any(text in p for p in problems), (text, problems)
    assert len(problems) == len(expected), problems
    # params declarations, functions, processes and workflows are what a script may hold
    assert not any(":3:" in p for p in problems)

    code, problems = strict["bad.config"].problems()
    assert code == 1
    expected = [":0: import declaration", ":2: function declaration 'hostname'", ":3: config statement",
                ":4: config statement", ":7: 'google' referenced", ":10: 'y' referenced", ":12: config statement"]
    for text in expected:
        assert any(text in p for p in problems), (text, problems)
    assert len(problems) == len(expected), problems


@needs_groovy
def test_a_code_snippet_is_an_implicit_workflow(strict):
    assert strict["snippet.nf"].problems() == (0, [])


@needs_groovy
def test_a_file_that_does_not_parse_is_an_error(strict):
    with pytest.raises(AssertionError, match="does not parse"):
        strict["broken.nf"].problems()


# --------------------------------------------------------------------------------------------------


@needs_groovy
def test_main_nf_words_keep_hostile_file_names_whole(tmp_path):
    """main.nf's `words` (the staged inputs for `set --`), cut out of main.nf and run under Groovy."""
    source = re.search(r"^def words\(files\) \{\n.*?^\}\n", (ROOT / "main.nf").read_text(), re.MULTILINE | re.DOTALL).group(0)
    names = [w for w in HOSTILE if w and "\n" not in w and "\t" not in w]
    literal = "[" + ", ".join("'" + w.replace("\\", "\\\\").replace("'", "\\'") + "'" for w in names) + "]"
    script = tmp_path / "words.groovy"
    script.write_text(source + f"print(words({literal}.collect {{ n -> java.nio.file.Paths.get('in1', n) }}))\n",
                      encoding="utf-8")
    done = run_groovy(script)
    assert done.returncode == 0, done.stderr
    echoed = subprocess.run(["bash", "-c", "set -- " + done.stdout + "\nprintf '%s\\0' \"$@\""], capture_output=True,
                            cwd=tmp_path, check=True)
    assert echoed.stdout.decode().split("\0")[:-1] == [f"in1/{n}" for n in names]
    assert not (tmp_path / "pwned").exists()


def test_attempt_limits_scale_memory_and_time_and_are_capped():
    table = parse_label_resources(ROOT / "_viash.yaml")
    base = {"cpus": table["midcpu"]["cpus"], "memory_mb": table["midmem"]["memory_mb"], "time_s": table["midtime"]["time_s"],
            "disk_mb": table["lowdisk"]["disk_mb"]}
    free = {"max_cpus": None, "max_memory_mb": None}
    assert attempt_limits(base, 1, free) == base
    # memory and time grow with the attempt; disk does not (a job over it is not retried)
    assert attempt_limits(base, 3, free) == dict(base, memory_mb=3 * base["memory_mb"], time_s=3 * base["time_s"])
    capped = {"max_cpus": "1", "max_memory_mb": base["memory_mb"] + 1}
    assert attempt_limits(base, 2, capped) == dict(base, cpus=1, memory_mb=base["memory_mb"] + 1, time_s=2 * base["time_s"])
    assert attempt_limits({}, 2, free) == {"cpus": None, "memory_mb": None, "time_s": None, "disk_mb": None}


def test_run_settings_from_the_config_then_ones_own_then_the_command_line(tmp_path):
    main_nf = ROOT / "main.nf"
    assert run_settings(main_nf, [], []) == RUN_SETTINGS  # nextflow.config's defaults are the same
    mine = tmp_path / "cluster.config"
    mine.write_text("params {\n    shared_data = 's3://bucket/shared'\n    max_retries = 4\n    aws_queue = 'q'\n}\n")
    got = run_settings(main_nf, [mine], ["--max_retries", "1", "-with-report", "r.html", "--image_tag", "0.1-abc"])
    assert (got["shared_data"], got["max_retries"], got["image_tag"]) == ("s3://bucket/shared", "1", "0.1-abc")
    assert "aws_queue" not in got


@pytest.fixture(scope="module")
def bundled_plan(tiny_project, tmp_path_factory):
    """A plan of the fixture project (ready-made datasets and dataset jobs, a control with two seeds) with component folders."""
    root = tmp_path_factory.mktemp("nfplan") / "project"
    shutil.copytree(tiny_project, root)
    config = root / "src/tiny/control_methods/zeros/config.vsh.yaml"
    config.write_text(config.read_text().replace("  control: negative\n", "  control: negative\n  seeds: 2\n")
                      + "arguments:\n  - {name: --seed, type: integer, default: 0, description: Seed.}\n")
    task = Task(root / "src" / "tiny")
    assert not task.config_errors
    outdir = root.parent / "results"
    stage = dataset_jobs(task, outdir, label_resources(root))
    plan = make_plan(task, task.find_datasets(root / "resources_test" / "tiny"), outdir, dataset_stage=stage)
    return attach_bundles(plan, outdir / "components")


def _settings(**extra) -> dict:
    return {**RUN_SETTINGS, **extra}


def test_jobs_carry_image_digest_limits_and_their_wiring(bundled_plan):
    plan = bundled_plan
    jobs = nextflow_jobs(plan, _settings(image_tag="0.0.1-abc1234", max_cpus=1, shared_data="s3://b/shared"), {})
    ids = [job["id"] for job in jobs]
    assert {"datasets/syn_a", "datasets/syn_b", "syn/zeros@seed0", "syn/zeros@seed1", "syn/zeros@seed1/errors"} <= set(ids)
    assert "syn/zeros" not in ids and len(ids) == len(set(ids))
    by_id = {job["id"]: job for job in jobs}
    position = {job_id: i for i, job_id in enumerate(ids)}
    for job in jobs:
        config = read_config(job["config"])
        # an image for every job, with the build's tag: docker, singularity, awsbatch and k8s run it
        assert job["container"].endswith(":0.0.1-abc1234") and f"/{config.name}:" in job["container"]
        # the digest main.nf passes as a `val` input is the local engine's component digest
        assert job["digest"] == component_digest(config)
        assert Path(job["bundle"]).is_dir()
        assert len(job["attempts"]) == RUN_SETTINGS["max_retries"] + 1
        assert all(a["cpus"] == 1 for a in job["attempts"])
        # every input is a file or an output of a job upstream, which comes first
        assert len(job["stage_in"]) == len(job["inputs"])
        for source in job["stage_in"]:
            assert set(source) in ({"file"}, {"job", "output"})
            if "job" in source:
                assert position[source["job"]] < position[job["id"]]
                assert source["output"] in by_id[source["job"]]["outputs"]
        if job["after"] is not None:
            assert position[job["after"]] < position[job["id"]]
    seeded = by_id["syn/zeros@seed1"]
    assert seeded["params"]["seed"] == 1 and seeded["seed"] == 1 and seeded["publish_dir"].endswith("outputs/syn/zeros@seed1")
    metric = by_id["syn/zeros@seed1/errors"]
    assert metric["after"] == "syn/zeros@seed1"
    assert {"job": "syn/zeros@seed1", "output": "output"} in metric["stage_in"]
    made = [job for job in jobs if job["stage"] == "method" and job["after"] == "datasets/syn_a"]
    assert made and all(s.get("job") == "datasets/syn_a" for j in made for s in j["stage_in"])
    # a loader reads the shared data from where a cluster keeps it
    loaders = [job for job in jobs if job["stage"] == "dataset" and plan["shared_data_argument"] in job["inputs"]]
    for job in loaders:
        assert {"file": "s3://b/shared"} in job["stage_in"]


def test_task_script_gives_openpert_every_word_intact(bundled_plan, tmp_path):
    """Run a job's script with bash as main.nf does (`set --` and its staged inputs), an `openpert` that records its arguments standing in."""
    plan = json.loads(json.dumps(bundled_plan))
    entry = next(e for e in plan["jobs"] if e["stage"] == "metric")
    entry["params"] = {"hostile": HOSTILE, "plain": "x' ; touch pwned", "flag": True, "ratio": 1e-05}
    plan["jobs"] = [entry]
    llm = {"llm_base_url": "http://host:8000/v1'; touch pwned"}
    (job,) = nextflow_jobs(plan, _settings(openpert=str(tmp_path / "bin" / "openpert"), max_retries=3), llm)
    staged = [f"in{i}/it's {i}.h5ad" for i in range(1, len(job["stage_in"]) + 1)]

    fake = tmp_path / "bin" / "openpert"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    "json.dump({'argv': sys.argv[1:], 'tmp': os.environ['TMPDIR'], 'pythonpath': os.environ['PYTHONPATH'],"
                    " 'home': os.environ['HOME']}, open('argv.json', 'w'))\n")  # fmt: skip
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    task = tmp_path / "task"
    task.mkdir()
    quoted = " ".join("'" + s.replace("'", "'\\''") + "'" for s in staged)
    (task / ".command.sh").write_text(f"set -- {quoted}\n{job['attempts'][1]['script']}\n")
    subprocess.run(["bash", "-euo", "pipefail", ".command.sh"], cwd=task, check=True)
    seen = json.loads((task / "argv.json").read_text())
    limits = job["attempts"][1]["limits"]
    expected = ["run-component", "--work-dir", "run", "--sandbox", "auto"]
    for option, key in (("--limit-cpus", "cpus"), ("--limit-memory-mb", "memory_mb"), ("--limit-time-s", "time_s")):
        if limits[key] is not None:
            expected += [option, str(limits[key])]
    component = next(c for c in plan["metrics"] if c["config"] == entry["config"])
    expected.append(f"component/{component['bundle_config']}")
    for arg, path in zip(sorted(entry["inputs"]), staged):
        expected += [f"--{arg}", path]
    for arg, name in sorted(entry["outputs"].items()):
        expected += [f"--{arg}", f"out/{name}"]
    expected += ["--flag", "true", "--hostile", ";".join(HOSTILE), "--plain", "x' ; touch pwned", "--ratio", "1e-05"]
    assert seen["argv"] == expected  # an LLM setting reaches only a component that talks to a model
    if entry["limits"]["memory_mb"] is not None:
        assert limits["memory_mb"] == 2 * job["attempts"][0]["limits"]["memory_mb"]  # the second attempt asks for more
    assert seen["tmp"] == str(task / "tmp")  # temporary files stay in the task's folder
    assert seen["pythonpath"].split(":")[0] == str(task / "component" / "common")
    assert not (task / "tmp").exists() and not list(tmp_path.rglob("pwned"))
    assert seen["home"] == os.environ["HOME"]  # a home it can write is kept
    # a container run as the launching user has a home it cannot write (docker's -u: HOME=/)
    subprocess.run(["bash", "-euo", "pipefail", ".command.sh"], cwd=task, check=True,
                   env=dict(os.environ, HOME=str(tmp_path / "no_such_home")))
    assert json.loads((task / "argv.json").read_text())["home"] == str(task / "tmp")
