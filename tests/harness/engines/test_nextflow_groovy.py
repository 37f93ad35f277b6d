"""main.nf, nextflow.config and lib/OpenpertJobs.groovy under Groovy, without Nextflow.

Groovy parses both files as Nextflow's legacy parser would (a Nextflow script is Groovy syntax)
and tests/harness/engines/nextflow/strict_syntax.groovy checks them against the rules of
Nextflow's strict syntax. The jobs main.nf builds come from lib/OpenpertJobs.groovy, which runs
here on a real plan of the fixture project: every job has its image, its code digest and a task
script whose words reach `openpert` intact, and the Python mirror the stand-in `nextflow` uses
returns exactly the same.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "nextflow"))
import jobs_mirror as mirror  # noqa: E402
from groovy_tools import LIB, ROOT, call_jobs, needs_groovy, run_groovy, strict_problems  # noqa: E402

from openpert.config.task import Task  # noqa: E402
from openpert.config.viash import read_config  # noqa: E402
from openpert.engines.cache_keys import component_digest  # noqa: E402
from openpert.engines.nextflow import attach_bundles  # noqa: E402
from openpert.engines.plan import dataset_jobs, label_resources, make_plan  # noqa: E402
from openpert.engines.resource_labels import parse_label_resources  # noqa: E402

pytestmark = [needs_groovy]

HOSTILE = [
    "it's", "$(touch pwned)", "`touch pwned`", "; touch pwned", "a\nb", '"quoted"', "back\\slash", "*", "~",
    "", "--flag", "$HOME", "!!", "x' ; touch pwned ; '", "ünïcode ✓", "tab\there", "a b  c",
]  # fmt: skip


def _options(outdir: str, **extra) -> dict:
    options = {"outdir": outdir, "resources": label_resources(ROOT), "max_cpus": None, "max_memory_mb": None,
               "image_tag": None, "openpert": "openpert", "sandbox": "auto", "max_retries": 2,
               "llm": {"llm_base_url": None, "llm_model": None, "llm_backend": None}}  # fmt: skip
    options.update(extra)
    return options


# --------------------------------------------------------------------------------------------------
# parsing and the strict syntax


def test_main_nf_keeps_to_the_strict_syntax():
    assert strict_problems("script", ROOT / "main.nf") == (0, [])


def test_nextflow_config_keeps_to_the_strict_syntax():
    assert strict_problems("config", ROOT / "nextflow.config") == (0, [])


def test_strict_checker_reports_every_rule_it_knows(tmp_path):
    script = tmp_path / "bad.nf"
    script.write_text(
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
    code, problems = strict_problems("script", script)
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

    config = tmp_path / "bad.config"
    config.write_text(
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
    code, problems = strict_problems("config", config)
    assert code == 1
    expected = [":0: import declaration", ":2: function declaration 'hostname'", ":3: config statement",
                ":4: config statement", ":7: 'google' referenced", ":10: 'y' referenced", ":12: config statement"]
    for text in expected:
        assert any(text in p for p in problems), (text, problems)
    assert len(problems) == len(expected), problems


def test_a_code_snippet_is_an_implicit_workflow(tmp_path):
    snippet = tmp_path / "snippet.nf"
    snippet.write_text("println 'Hello'\ndef x = 1\nprintln x\n")
    assert strict_problems("script", snippet) == (0, [])


def test_a_file_that_does_not_parse_is_an_error(tmp_path):
    broken = tmp_path / "broken.nf"
    broken.write_text("workflow {\n")
    with pytest.raises(AssertionError, match="does not parse"):
        strict_problems("script", broken)


# --------------------------------------------------------------------------------------------------
# the helper functions


def test_shell_quote_keeps_hostile_words_whole(tmp_path):
    results = call_jobs([("shellQuote", [word]) for word in HOSTILE], tmp_path)
    quoted = [r["value"] for r in results]
    assert quoted == [mirror.shell_quote(word) for word in HOSTILE]
    done = subprocess.run(["bash", "-c", "printf '%s\\0' " + " ".join(quoted)], capture_output=True, cwd=tmp_path, check=True)
    assert done.stdout.decode().split("\0")[:-1] == HOSTILE
    assert not (tmp_path / "pwned").exists()
    assert call_jobs([("shellQuote", [None])], tmp_path) == [{"error": "openpert: a null word cannot be put in a command"}]


def test_resources_come_from_the_labels_and_scale_with_the_attempt(tmp_path):
    table = parse_label_resources(ROOT / "_viash.yaml")
    component = {"labels": ["midmem", "midcpu", "midtime", "lowdisk"]}
    base = {"cpus": table["midcpu"]["cpus"], "memory_mb": table["midmem"]["memory_mb"], "time_s": table["midtime"]["time_s"],
            "disk_mb": table["lowdisk"]["disk_mb"]}
    job = {"limits": base, "caps": {"cpus": None, "memory_mb": None}}
    capped = {"limits": base, "caps": {"cpus": 1, "memory_mb": base["memory_mb"] + 1}}
    calls = [("resources", [component, table]), ("attemptLimits", [job, 1]), ("attemptLimits", [job, 3]),
             ("attemptLimits", [capped, 2]), ("resources", [{"labels": ["lowmem", "highmem"]}, table]),
             ("resources", [{"labels": []}, table])]  # fmt: skip
    got = [r["value"] for r in call_jobs(calls, tmp_path)]
    assert got[0] == base
    assert got[1] == base
    # memory and time grow with the attempt; disk does not (a job over it is not retried)
    assert got[2] == {"cpus": base["cpus"], "memory_mb": 3 * base["memory_mb"], "time_s": 3 * base["time_s"], "disk_mb": base["disk_mb"]}
    assert got[3] == {"cpus": 1, "memory_mb": base["memory_mb"] + 1, "time_s": 2 * base["time_s"], "disk_mb": base["disk_mb"]}
    assert got[4]["memory_mb"] == table["highmem"]["memory_mb"]  # a later label wins
    assert got[5] == {"cpus": None, "memory_mb": None, "time_s": None, "disk_mb": None}
    assert got == [mirror.FUNCTIONS[fn](*args) for fn, args in calls]


def test_accelerator_from_the_gpu_label_where_the_profile_schedules_gpus(tmp_path):
    table = parse_label_resources(ROOT / "_viash.yaml")
    assert table["gpu"] == {"gpus": 1}
    llm = {"component": {"labels": ["midmem", "gpu"], "needs_llm": True}}
    plain = {"component": {"labels": ["midmem"], "needs_llm": False}}
    two = {"component": {"labels": ["gpu", "two"], "needs_llm": False}}
    calls = [("accelerator", [llm, table, True, None]), ("accelerator", [llm, table, "false", None]),
             ("accelerator", [llm, table, True, "http://vllm:8000/v1"]), ("accelerator", [plain, table, True, None]),
             ("accelerator", [two, {**table, "two": {"gpus": 2}}, "true", "http://x/v1"]),
             ("accelerator", [llm, table, None, ""])]  # fmt: skip
    got = [r["value"] for r in call_jobs(calls, tmp_path)]
    # In process on a GPU executor: one GPU; off, or with a server generating: none.
    assert got == [1, None, None, None, 2, None]
    assert got == [mirror.FUNCTIONS[fn](*args) for fn, args in calls]


def test_wiring_by_format_and_its_error(tmp_path):
    metric = {"config": "/x/metrics/m/config.vsh.yaml", "inputs": {"input_solution": "file_solution", "input_prediction": "file_prediction"}}
    calls = [("wire", ["d/m/x", metric, {"file_prediction": "pred.h5ad"}, {"file_solution": "sol.h5ad", "file_prediction": "no.h5ad"}]),
             ("wire", ["d/m/x", metric, {}, {"file_solution": "sol.h5ad"}])]  # fmt: skip
    got = call_jobs(calls, tmp_path)
    # arguments in the order of their names, whatever order the plan's map keeps
    assert got[0] == {"value": [["input_prediction", "input_solution"], ["pred.h5ad", "sol.h5ad"]]}
    assert got[1] == {"error": "openpert: job d/m/x: nothing of format 'file_prediction' for --input_prediction of /x/metrics/m/config.vsh.yaml"}
    with pytest.raises(ValueError, match=got[1]["error"]):
        mirror.wire(*calls[1][1])


@pytest.fixture(scope="module")
def bundled_plan(tiny_project, tmp_path_factory):
    """A plan of the fixture project (ready-made datasets and dataset jobs) with component folders."""
    task = Task(tiny_project / "src" / "tiny")
    outdir = tmp_path_factory.mktemp("nfplan") / "results"
    stage = dataset_jobs(task, outdir, label_resources(tiny_project))
    plan = make_plan(task, task.find_datasets(tiny_project / "resources_test" / "tiny"), outdir, dataset_stage=stage)
    attach_bundles(plan, outdir / "components")
    plan["methods"][0]["seeds"] = [0, 2]  # a seeded control: one job per seed
    return plan


def _plan_calls(plan: dict) -> list[tuple[str, list]]:
    calls: list[tuple[str, list]] = []
    for entry in plan["dataset_jobs"]:
        calls.append(("datasetJob", [entry, plan["shared_data_argument"], None]))
        calls.append(("datasetJob", [entry, plan["shared_data_argument"], "s3://bucket/shared"]))
    for dataset in plan["datasets"]:
        for method in plan["methods"]:
            calls.append(("methodJobs", [dataset, method]))
    return calls


def test_jobs_carry_image_digest_and_a_runnable_script(bundled_plan, tmp_path):
    plan = bundled_plan
    made = call_jobs(_plan_calls(plan), tmp_path)
    pairs = []
    for result in made:
        value = result["value"]
        pairs += value if value and isinstance(value[0], list) else [value]
    # metric jobs on the first prediction of each method
    calls = []
    for job, _files in pairs:
        if job["stage"] == "method":
            outs = [f"/work/ab/{name}" for name in job["component"]["output_names"].values()]
            calls.append(("outputsByFormat", [job, outs]))
    by_format = [r["value"] for r in call_jobs(calls, tmp_path)]
    method_pairs = [p for p in pairs if p[0]["stage"] == "method"]
    metric_calls = [("metricJob", [job, fmt, metric]) for (job, _), fmt in zip(method_pairs, by_format) for metric in plan["metrics"]]
    pairs += [r["value"] for r in call_jobs(metric_calls, tmp_path)]
    options = _options(plan["outdir"], image_tag="0.0.1-abc1234", max_cpus=1)
    prepared = [r["value"] for r in call_jobs([("prepare", [job, options]) for job, _ in pairs], tmp_path)]

    ids = [job["id"] for job in prepared if job["stage"] != "dataset"] + [e["job_id"] for e in plan["dataset_jobs"]]
    seeded = plan["methods"][0]["id"]
    assert {"datasets/syn_a", "datasets/syn_b", f"syn/{seeded}@seed0", f"syn/{seeded}@seed2", f"syn/{seeded}@seed2/errors"} <= set(ids)
    assert f"syn/{seeded}" not in ids
    assert len(ids) == len(set(ids))
    for job in prepared:
        component = job["component"]
        config = read_config(component["config"])
        # an image for every job, with the build's tag: docker, singularity, awsbatch and k8s run it
        assert job["container"] == f"{component['image'].rsplit(':', 1)[0]}:0.0.1-abc1234"
        assert f"/{config.name}:" in job["container"]
        # the digest main.nf passes as a `val` input is the local engine's component digest
        assert component["digest"] == component_digest(config)
        assert (Path(component["bundle"]) / component["bundle_config"]).is_file()
        assert job["publish_path"] == f"{plan['outdir']}/{job['publish_dir']}"
        assert job["caps"] == {"cpus": 1, "memory_mb": None}
        if job["stage"] == "method" and job["method_id"] == seeded:
            assert job["params"]["seed"] == job["seed"] and job["id"].endswith(f"@seed{job['seed']}")
            assert job["publish_dir"] == f"outputs/{job['id']}"
    loaders = [p for p in pairs if p[0]["stage"] == "dataset"]
    for job, files in loaders:
        assert job["publish_dir"] == f"datasets/{job['dataset_id']}"
        assert len(files) == len(job["args"])
    # the shared data of a dataset loader can be read from where a cluster keeps it
    entry = {"id": "d", "component": plan["dataset_jobs"][0]["component"], "params": {"x": 1},
             "inputs": {"shared_data": "/launcher/shared", "table": "/launcher/table.csv"}}  # fmt: skip
    (given, overridden) = [r["value"] for r in call_jobs([("datasetJob", [entry, "shared_data", None]),
                                                          ("datasetJob", [entry, "shared_data", "s3://b/shared"])], tmp_path)]
    assert given[1] == ["/launcher/shared", "/launcher/table.csv"]
    assert overridden[1] == ["s3://b/shared", "/launcher/table.csv"] and overridden[0]["id"] == "datasets/d"


def test_groovy_and_the_python_mirror_agree(bundled_plan, tmp_path):
    plan = bundled_plan
    calls = _plan_calls(plan)
    groovy = call_jobs(calls, tmp_path)
    python = [{"value": mirror.FUNCTIONS[fn](*args)} for fn, args in calls]
    assert groovy == json.loads(json.dumps(python))

    # then the jobs made ready and their scripts, on two attempts, with hostile settings
    pairs = [p for r in groovy for p in (r["value"] if isinstance(r["value"][0], list) else [r["value"]])]
    llm = {"llm_base_url": "http://host:8000/v1'; touch pwned", "llm_model": None, "llm_backend": "openai"}
    options = _options(plan["outdir"], max_memory_mb="5000", llm=llm, sandbox="off", max_retries="3")
    prepared_calls = [("prepare", [job, options]) for job, _ in pairs]
    prepared = [r["value"] for r in call_jobs(prepared_calls, tmp_path)]
    assert prepared == json.loads(json.dumps([mirror.prepare(job, options) for job, _ in pairs]))
    script_calls = []
    for job, (_, files) in zip(prepared, pairs):
        staged = [f"in{i}/{mirror.file_name(f)}" for i, f in enumerate(files, start=1)]
        job = dict(job, params={**job["params"], "hostile": HOSTILE[:6], "flag": True, "ratio": 1e-05})
        script_calls += [("taskScript", [job, staged, 1]), ("taskScript", [job, staged, "2"]),
                         ("commandWords", [job, staged[:-1] + ["x"] * (not staged), {}])]  # fmt: skip
    groovy_scripts = call_jobs(script_calls, tmp_path)
    python_scripts = []
    for fn, args in script_calls:
        try:
            python_scripts.append({"value": mirror.FUNCTIONS[fn](*args)})
        except ValueError as err:
            python_scripts.append({"error": str(err)})
    assert groovy_scripts == json.loads(json.dumps(python_scripts))


def test_task_scripts_do_not_depend_on_how_the_plan_json_is_read(bundled_plan, tmp_path):
    """Nextflow reads -params-file with Groovy's JsonSlurper; the stand-in with Python's json.

    Groovy's JsonSlurper need not keep a map's order (the Groovy installed here gives the keys
    back sorted, Python keeps the file's order); the scripts, which -resume hashes, must come out
    the same either way.
    """
    plan = json.loads(json.dumps(bundled_plan))
    many = {f"{word}_{i}": i for i, word in enumerate(["zeta", "alpha", "mu", "beta", "omega", "kappa", "delta", "chi",
                                                       "eta", "gamma", "iota", "lambda", "nu", "xi", "pi", "rho"])}
    for method in plan["methods"]:
        method["params"] = {**many, **method["params"]}
        method["seeds"] = []
    plan["datasets"][0]["files"] = {f"file_extra_{i}": f"/data/x{i}.h5ad" for i in range(12)} | plan["datasets"][0]["files"]
    options = _options(plan["outdir"])
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "options.json").write_text(json.dumps(options))
    done = run_groovy("-cp", LIB, Path(__file__).parent / "nextflow" / "plan_scripts.groovy", tmp_path / "plan.json",
                      tmp_path / "options.json")
    assert done.returncode == 0, done.stderr
    groovy = json.loads(done.stdout)
    python = []
    for dataset in plan["datasets"]:
        for method in plan["methods"]:
            for job, files in mirror.method_jobs(dataset, method):
                prepared = mirror.prepare(job, options)
                staged = [f"in{i}/{mirror.file_name(f)}" for i, f in enumerate(files, start=1)]
                python.append({"id": prepared["id"], "script": mirror.task_script(prepared, staged, 1)})
    assert len(groovy) == len(plan["methods"]) * len(plan["datasets"])
    assert groovy == python
    assert "'--alpha_1' '1' '--beta_3' '3' '--chi_7' '7'" in groovy[0]["script"]  # params in the order of their names


def test_task_script_gives_openpert_every_word_intact(bundled_plan, tmp_path):
    """Run a job's script with bash, an `openpert` that records its arguments standing in."""
    plan = bundled_plan
    method = plan["methods"][0]
    (pair,) = [r["value"] for r in call_jobs([("methodJobs", [plan["datasets"][0], dict(method, seeds=[])])], tmp_path)][0]
    job, files = pair
    job["params"] = {"hostile": HOSTILE, "plain": "x' ; touch pwned"}
    options = _options(plan["outdir"], openpert=str(tmp_path / "bin" / "openpert"))
    prepared = call_jobs([("prepare", [job, options])], tmp_path)[0]["value"]
    staged = [f"in{i}/{Path(f).name}" for i, f in enumerate(files, start=1)]
    script = call_jobs([("taskScript", [prepared, staged, 2])], tmp_path)[0]["value"]

    fake = tmp_path / "bin" / "openpert"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    "json.dump({'argv': sys.argv[1:], 'tmp': os.environ['TMPDIR'], 'pythonpath': os.environ['PYTHONPATH'],"
                    " 'home': os.environ['HOME']}, open('argv.json', 'w'))\n")  # fmt: skip
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    task = tmp_path / "task"
    task.mkdir()
    (task / ".command.sh").write_text(script + "\n")
    subprocess.run(["bash", "-euo", "pipefail", ".command.sh"], cwd=task, check=True)
    seen = json.loads((task / "argv.json").read_text())
    limits = mirror.attempt_limits(prepared, 2)
    expected = ["run-component", "--work-dir", "run", "--sandbox", "auto", "--limit-cpus", str(limits["cpus"]),
                "--limit-memory-mb", str(limits["memory_mb"]), "--limit-time-s", str(limits["time_s"]),
                f"component/{method['bundle_config']}"]  # fmt: skip
    for arg, path in zip(prepared["args"], staged):
        expected += [f"--{arg}", path]
    for arg, name in method["output_names"].items():
        expected += [f"--{arg}", f"out/{name}"]
    expected += ["--hostile", ";".join(HOSTILE), "--plain", "x' ; touch pwned"]
    assert seen["argv"] == expected
    assert limits["memory_mb"] == 2 * prepared["limits"]["memory_mb"]  # the second attempt asks for more
    assert seen["tmp"] == str(task / "tmp")  # temporary files stay in the task's folder
    assert seen["pythonpath"].split(":")[0] == str(task / "component" / "common")
    assert not (task / "tmp").exists() and not list(tmp_path.rglob("pwned"))
    assert seen["home"] == os.environ["HOME"]  # a home it can write is kept
    # a container run as the launching user has a home it cannot write (docker's -u: HOME=/)
    subprocess.run(["bash", "-euo", "pipefail", ".command.sh"], cwd=task, check=True,
                   env=dict(os.environ, HOME=str(tmp_path / "no_such_home")))
    assert json.loads((task / "argv.json").read_text())["home"] == str(task / "tmp")
