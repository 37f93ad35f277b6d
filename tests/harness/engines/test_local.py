"""The local engine end to end on the fixture task: scores, failure isolation, caching and resume."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from conftest import FAILING, GOOD  # noqa: E402
from fixture_tasks import copy_tiny_task

from openpert.config.formats import content_identity
from openpert.config.task import Task
from openpert.config.viash import ConfigError
from openpert.engines.benchmark import run_benchmark
from openpert.engines.plan import make_plan


def raw_scores(results: dict) -> dict:
    return {(s["dataset_id"], s["method_id"], s["metric_id"]): s["raw"] for s in results["scores"]}


@pytest.fixture(scope="module")
def runs(fixture_runs):
    return fixture_runs


def test_failures_are_isolated_and_recorded(runs):
    clean, mixed, out, _ = runs
    failures = {f["method_id"]: f for f in mixed["failures"]}
    assert set(failures) == set(FAILING)
    assert failures["fail_raise"]["exit_code"] == 1 and "RuntimeError: this method fails on purpose" in failures["fail_raise"]["reason"]
    assert failures["fail_timeout"]["exit_code"] == 143 and "time limit" in failures["fail_timeout"]["reason"]
    assert failures["fail_memory"]["exit_code"] == 137 and "memory limit" in failures["fail_memory"]["reason"]
    assert failures["fail_invalid"]["exit_code"] == -1 and "non-finite" in failures["fail_invalid"]["reason"]
    assert "may not read" in failures["reads_solution"]["reason"]
    for fail in failures.values():
        assert (out / fail["log"]).is_file()
    # every other job's scores are exactly what they are without the failing methods
    assert raw_scores(mixed) == raw_scores(clean)
    scores = {(d["method_id"]): d for d in mixed["dataset_scores"]}
    for method in FAILING:
        assert scores[method]["status"] == "failed" and scores[method]["score"] == 0.0
    assert not any(s["method_id"] in FAILING for s in mixed["scores"])


def test_scaling_matches_hand_computation(runs):
    clean, _, _, _ = runs
    raw = raw_scores(clean)
    scaled = {(s["dataset_id"], s["method_id"], s["metric_id"]): s["scaled"] for s in clean["scores"]}
    for metric in ("rmse", "mae", "pearson"):
        hi, lo = raw[("syn", "truth", metric)], raw[("syn", "zeros", metric)]
        for method in ["truth", "zeros", "train_mean", *GOOD]:
            assert scaled[("syn", method, metric)] == pytest.approx((raw[("syn", method, metric)] - lo) / (hi - lo))
        assert scaled[("syn", "truth", metric)] == pytest.approx(1.0)
        assert scaled[("syn", "zeros", metric)] == pytest.approx(0.0)
    assert raw[("syn", "truth", "rmse")] == 0.0  # the positive control is exact
    # the dataset score is the mean of scaled values clipped to [0, 1]
    for row in clean["dataset_scores"]:
        values = [min(1.0, max(0.0, scaled[("syn", row["method_id"], m)])) for m in ("rmse", "mae", "pearson")]
        assert row["score"] == pytest.approx(sum(values) / 3)
    overall = {o["method_id"]: o for o in clean["overall"]}
    assert overall["truth"]["score"] == pytest.approx(1.0) and overall["zeros"]["score"] == pytest.approx(0.0)
    # ranks order methods and baselines; the controls that set the scale are references
    assert overall["truth"]["rank"] is None and overall["zeros"]["rank"] is None
    ranks = sorted((o["rank"], o["method_id"]) for o in clean["overall"] if o["rank"] is not None)
    assert [m for _, m in ranks] == sorted([*GOOD, "train_mean"], key=lambda m: -overall[m]["score"]) and ranks[0][0] == 1


def test_results_files(runs):
    _, mixed, out, _ = runs
    for name in ("score_uns.yaml", "method_configs.yaml", "metric_configs.yaml", "dataset_uns.yaml", "task_info.yaml",
                 "trace.tsv", "results.json", "plan.json"):
        assert (out / name).is_file(), name
    trace = pd.read_csv(out / "trace.tsv", sep="\t")
    assert len(trace) == len(mixed["resources"])
    assert set(trace.loc[trace["status"] == "failed", "method_id"]) == set(FAILING)
    assert json.loads((out / "results.json").read_text())["task"]["name"] == "tiny"
    # per-item values give CIs, and methods are compared to the best one
    ci = [s for s in mixed["scores"] if s["method_id"] == "group_mean" and s["metric_id"] == "rmse"][0]
    assert ci["ci_low"] <= ci["raw"] <= ci["ci_high"] and ci["n_items"] == 12
    assert {c["metric_id"] for c in mixed["comparisons"]} == {"rmse", "mae", "pearson"}


def test_dataset_stage_and_filters(tiny_task, tmp_path):
    results = run_benchmark(tiny_task, tmp_path, methods=["group_mean"], controls=["zeros"], metrics=["errors"], progress=False)
    assert [d["dataset_id"] for d in results["datasets"]] == ["syn_a", "syn_b"]
    assert {r["method_id"] for r in results["dataset_scores"]} == {"group_mean", "zeros"}
    assert {m["id"] for m in results["metrics"]} == {"rmse", "mae"}
    assert (tmp_path / "datasets" / "syn_a" / "train.h5ad").is_file()
    # The task's analysis is given the datasets the dataset jobs made (plan.json lists none).
    counts = results["statistics"]["prediction_counts"]["table"]
    assert counts == [{"dataset_id": d, "test_file": "test.h5ad", "n_predictions": 2} for d in ("syn_a", "syn_b")]
    with pytest.raises(ConfigError, match="unknown methods: nope"):
        make_plan(tiny_task, tiny_task.find_datasets(tmp_path / "datasets"), tmp_path, methods=["nope"])


def test_resume_after_kill_redoes_only_unfinished_jobs(project_copy, tmp_path):
    """Kill a running benchmark, resume it: finished jobs are reused, the rest run."""
    out = tmp_path / "results"
    # a slow method makes the kill land while jobs are still pending
    slow = project_copy / "src/tiny/methods/group_mean/script.py"
    text = slow.read_text()
    assert "import numpy as np\n" in text
    slow.write_text(text.replace("import numpy as np\n", "import time\n\nimport numpy as np\n\ntime.sleep(1.5)\n", 1))
    # Four jobs, one at a time: the control truth, then group_mean (slow), then their two metric jobs.
    # The kill comes once truth has finished, so it lands in group_mean with the metric jobs pending.
    cmd = [sys.executable, "-m", "openpert.cli", "benchmark", "--task", "tiny", "--input", "resources_test/tiny", "-o", str(out),
           "--methods", "group_mean", "--controls", "truth", "--metrics", "errors", "-j", "1"]
    proc = subprocess.Popen(cmd, cwd=project_copy, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    work = out / "tiny" / "work"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(work.glob("*/*/record.json")):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {json.loads(p.read_text())["job_id"] for p in work.glob("*/*/record.json")}
    assert finished, "no job finished before the kill"
    same = {"input_dir": project_copy / "resources_test" / "tiny", "methods": ["group_mean"], "controls": ["truth"],
            "metrics": ["errors"], "resume": True, "progress": False}
    results = run_benchmark(Task(project_copy / "src" / "tiny"), out / "tiny", **same)
    assert not results["failures"]
    cached = {r["job_id"] for r in results["resources"] if r["cached"]}
    assert cached == finished, "exactly the jobs finished before the kill are reused"
    assert len(results["resources"]) == 4 and len(cached) < 4
    # a second resume reuses everything and gives the same scores
    again = run_benchmark(Task(project_copy / "src" / "tiny"), out / "tiny", **same)
    assert all(r["cached"] for r in again["resources"])
    assert raw_scores(again) == raw_scores(results)


def test_regression_against_item_covariates(runs):
    """task_info's regressions: per-item metric values against a per-item covariate, with CIs."""
    import anndata as ad

    from openpert.results.collect import BOOTSTRAP_SEED, N_BOOT
    from openpert.results.resampling import regression_with_ci

    clean, _, _, clean_out = runs
    table = clean["statistics"]["regressions"]["table"]
    assert {r["method_id"] for r in table} == {"group_mean", "shrunk_mean", "train_mean"}
    row = next(r for r in table if r["method_id"] == "group_mean")
    assert row["metric_id"] == "rmse" and row["covariate"] == "truth_spread" and row["n_items"] == 12
    obs = ad.read_h5ad(clean_out / "outputs" / "syn" / "group_mean" / "errors" / "score.h5ad").obs
    fit = regression_with_ci(obs["truth_spread"].to_numpy(), obs["rmse"].to_numpy(), n_boot=N_BOOT, seed=BOOTSTRAP_SEED)
    assert row["slope"] == pytest.approx(fit.slope.estimate) and row["slope_low"] == pytest.approx(fit.slope.low)
    assert row["correlation_high"] == pytest.approx(fit.correlation.high)
    assert row["slope_low"] <= row["slope"] <= row["slope_high"]


def test_llm_components_are_skipped_without_a_model(tiny_task, tiny_project, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENPERT_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("OPENPERT_LLM_MODEL", raising=False)
    datasets = tiny_task.find_datasets(tiny_project / "resources_test" / "tiny")
    plan = make_plan(tiny_task, datasets, tmp_path, methods=["group_mean", "llm_constant"])
    assert [m["id"] for m in plan["methods"] if m["type"] == "method"] == ["group_mean"]
    assert plan["skipped"][0]["id"] == "llm_constant" and "OPENPERT_LLM_BASE_URL" in plan["skipped"][0]["reason"]
    monkeypatch.setenv("OPENPERT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    plan = make_plan(tiny_task, datasets, tmp_path, methods=["group_mean", "llm_constant"])
    assert "llm_constant" in [m["id"] for m in plan["methods"]] and plan["skipped"] == []


@pytest.mark.slow
def test_a_model_server_that_dies_mid_run_is_resumed_asking_only_the_rest(project_copy, tmp_path, monkeypatch):
    from openpert.testing.llm_server import OpenAIStubServer

    # Six questions, one request each; the server dies after two answers.
    script = project_copy / "src/tiny/methods/llm_constant/script.py"
    one = ('(answers,) = client.generate([f"Give one number for {test.shape[0]} rows."], SamplingParams(temperature=0, n=1, seed=0))\n'
           "value = float(answers[0].strip())")
    assert one in script.read_text()
    # The client retries as it always does, with a backoff of milliseconds rather than its default seconds.
    client = 'client = client_from_arguments(**{k: v for k, v in par.items() if k.startswith("llm_")})'
    assert client in script.read_text()
    script.write_text(script.read_text().replace(one, (
        'answers = client.generate([f"Give one number for part {i} of {test.shape[0]} rows." for i in range(6)], '
        "SamplingParams(temperature=0, n=1, seed=0))\n"
        "value = sum(float(a[0].strip()) for a in answers) / len(answers)")).replace(
        client, client[:-1] + ", retry_base_delay=0.01)"))
    task, inputs, out = Task(project_copy / "src" / "tiny"), project_copy / "resources_test" / "tiny", tmp_path / "out"
    monkeypatch.setenv("OPENPERT_LLM_CACHE", str(tmp_path / "llm_cache"))
    monkeypatch.setenv("OPENPERT_LLM_MODEL", "stub-model")

    def respond(request: dict) -> str:
        return "0.25"

    with OpenAIStubServer(respond, die_after=2) as dying:
        monkeypatch.setenv("OPENPERT_LLM_BASE_URL", dying.base_url)
        first = run_benchmark(task, out, input_dir=inputs, methods=["llm_constant"], controls=[], metrics=["errors"],
                              progress=False, sandbox=False)
    # The job fails (the client retried first, with its backoff), saying what a rerun will not ask again.
    (failure,) = [f for f in first["failures"] if f["method_id"] == "llm_constant"]
    assert "LLMRequestError" in failure["reason"]
    assert ("2 of the 6 answers of this call are in the generation cache" in (out / failure["log"]).read_text())
    with OpenAIStubServer(respond, port=dying.bound_port) as restarted:
        again = run_benchmark(task, out, input_dir=inputs, methods=["llm_constant"], controls=[], metrics=["errors"],
                              progress=False, sandbox=False, resume=True)
    assert again["failures"] == [] and restarted.n_requests == 4


def test_task_analysis_is_merged_and_its_failure_is_a_flag(runs, project_copy):
    from openpert.results.collect import run_task_analysis

    clean, mixed, _, _ = runs
    counts = {r["dataset_id"]: r["n_predictions"] for r in clean["statistics"]["prediction_counts"]["table"]}
    assert counts == {"syn": 5}  # 3 controls + 2 methods
    (project_copy / "src/tiny/analysis.py").write_text("def task_statistics(outdir, datasets):\n    raise ValueError('no such column')\n")
    extra = run_task_analysis(Task(project_copy / "src" / "tiny"), project_copy, [])
    assert extra["qc"][0]["flag"] == "analysis_failed" and "ValueError: no such column" in extra["qc"][0]["message"]


@pytest.fixture(scope="module")
def unsandboxed_run(tiny_task, tmp_path_factory):
    """group_mean and fail_raise scored by ``errors``, run with the sandbox off and the default progress display.

    Returns ``(results folder, results, what the run wrote to stderr)``.
    """
    out = tmp_path_factory.mktemp("unsandboxed_run") / "out"
    # capsys is a test's fixture: this module's fixture catches the progress lines itself
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        results = run_benchmark(tiny_task, out, input_dir=tiny_task.root / "resources_test" / "tiny",
                                methods=["group_mean", "fail_raise"], controls=[], metrics=["errors"], sandbox=False)
    return out, results, err.getvalue()


def test_progress_is_one_line_per_job_start_and_end_when_not_a_terminal(unsandboxed_run, tiny_task, capsys):
    out, _, err = unsandboxed_run
    lines = err.splitlines()
    assert "start    syn/group_mean" in lines
    ended = {line.split()[1]: line.split()[2] for line in lines if line.startswith("end ")}
    assert ended["syn/group_mean"] == "succeeded" and ended["syn/fail_raise"] == "failed"
    assert ended["syn/group_mean/errors"] == "succeeded"
    run_benchmark(tiny_task, out, input_dir=tiny_task.root / "resources_test" / "tiny", methods=["group_mean"], controls=[],
                  metrics=["errors"], resume=True, progress=False, sandbox=False)
    assert capsys.readouterr().err == ""


# --- a cache that proves itself, faults that stay local, honest empties ----------------------------------
def tiny_inputs(project):
    return project / "resources_test" / "tiny"


def cached_outputs(out, job_id: str) -> tuple[dict, dict]:
    """The cache record of a job (as JSON) and its record.json path."""
    for path in (out / "work").glob("*/*/record.json"):
        data = json.loads(path.read_text())
        if data["job_id"] == job_id:
            return data, path
    raise AssertionError(f"no cache record of {job_id}")


def bump_prediction(path) -> None:
    """Edit a prediction in place (same file, same inode), as a hand or a script in the results folder would."""
    import h5py

    os.chmod(path, 0o644)
    with h5py.File(path, "r+") as fh:
        fh["layers/prediction"][...] = fh["layers/prediction"][...] + 5.0


@pytest.mark.parametrize("where", ["cache", "outputs"])
def test_resume_reruns_an_edited_prediction_and_outputs_are_copies(resumable_run, capsys, where):
    from openpert.files import hash_file

    out, clean = resumable_run.out, resumable_run.results
    record, _ = cached_outputs(out, "syn/group_mean")
    cached = record["outputs"]["output"]
    published = out / "outputs" / "syn" / "group_mean" / "prediction.h5ad"
    assert record["output_sha256"] == {"output": hash_file(cached)} and isinstance(record["sandbox"], str)
    assert not os.path.samefile(published, cached), "a published output is a copy, not a link into the cache"
    # ... noted as one: the jobs that read it take it as the file that passed validation.
    assert content_identity(published) == content_identity(cached)

    bump_prediction(cached if where == "cache" else published)
    assert content_identity(published) != content_identity(cached)
    resumed = resumable_run.resume()
    err = capsys.readouterr().err
    jobs = {r["job_id"]: r for r in resumed["resources"]}
    assert raw_scores(resumed) == raw_scores(clean) and not resumed["failures"]
    if where == "cache":
        assert "re-running syn/group_mean: cached output prediction.h5ad changed" in err
        assert not jobs["syn/group_mean"]["cached"]
        assert "cached output prediction.h5ad changed" in (out / "logs" / "syn" / "group_mean.log").read_text()
    else:
        # the cache never saw the edit: the job is reused and its published copy is restored
        assert jobs["syn/group_mean"]["cached"] and "re-running" not in err
    assert hash_file(published) == cached_outputs(out, "syn/group_mean")[0]["output_sha256"]["output"]


@pytest.mark.parametrize(("damage", "job_id", "message"), [
    ("truncate_score", "syn/group_mean/errors", "cached output score.h5ad changed"),
    ("truncate_record", "syn/group_mean/errors", "cached record.json is unreadable"),
    ("remove_prediction", "syn/group_mean", "cached output prediction.h5ad vanished"),
])
def test_resume_reruns_a_job_whose_cache_entry_is_damaged(resumable_run, capsys, damage, job_id, message):
    out, clean = resumable_run.out, resumable_run.results
    record, record_path = cached_outputs(out, job_id)
    if damage == "truncate_score":
        score = record["outputs"]["output"]
        with open(score, "r+b") as fh:
            fh.truncate(os.path.getsize(score) // 2)
    elif damage == "truncate_record":
        record_path.write_text(record_path.read_text()[:40])
    else:
        os.unlink(record["outputs"]["output"])
    resumed = resumable_run.resume()
    assert f"re-running {job_id}: {message}" in capsys.readouterr().err
    assert not resumed["failures"], "a damaged cache entry is re-run, not reported"
    assert raw_scores(resumed) == raw_scores(clean)
    rerun = {r["job_id"] for r in resumed["resources"] if not r["cached"]}
    assert job_id in rerun and "syn/truth" not in rerun


def two_datasets(project, tmp_path):
    inputs = tmp_path / "inputs"
    for ds in ("syn_a", "syn_b"):
        shutil.copytree(tiny_inputs(project) / "syn", inputs / ds)
    return inputs


#: The dataset of the faulty run whose file of that name is cut short.
CORRUPT = {"test.h5ad": "bad_test", "train.h5ad": "bad_train"}


@pytest.fixture(scope="module")
def faulty_run(tiny_project, tmp_path_factory):
    """One benchmark (group_mean, truth, errors) beside faults that must stay local to what they break.

    The project has a method whose config is invalid YAML; the inputs are the dataset ``syn_a``
    whole and, for each name of :data:`CORRUPT`, a copy of it whose file of that name is cut short.
    One run shows every fault at once, each test reading its own (4 jobs, not 4 per fault).
    Returns ``(results, results folder)``.
    """
    root = tmp_path_factory.mktemp("faulty_run")
    project = root / "project"
    shutil.copytree(tiny_project, project)
    broken = project / "src" / "tiny" / "methods" / "broken"
    broken.mkdir()
    (broken / "config.vsh.yaml").write_text("name: broken\narguments: [\n")
    inputs = root / "inputs"
    for ds in ("syn_a", *CORRUPT.values()):
        shutil.copytree(tiny_inputs(project) / "syn", inputs / ds)
    for name, ds in CORRUPT.items():
        damaged = inputs / ds / name
        damaged.write_bytes(damaged.read_bytes()[:300])
    out = root / "out"
    results = run_benchmark(Task(project / "src" / "tiny"), out, input_dir=inputs, methods=["group_mean"],
                            controls=["truth"], metrics=["errors"], jobs=2, progress=False)
    return results, out


@pytest.mark.parametrize("name", list(CORRUPT))
def test_a_corrupt_dataset_file_fails_its_dataset_only(faulty_run, tiny_task, tmp_path, name):
    results, out = faulty_run
    assert json.loads((out / "results.json").read_text())["scores"] == results["scores"]
    assert {s["dataset_id"] for s in results["scores"]} == {"syn_a"}
    assert {(s["method_id"], s["metric_id"]) for s in results["scores"]} == {
        (m, k) for m in ("group_mean", "truth") for k in ("rmse", "mae")}
    # each corrupt dataset fails its own dataset job, and nothing else fails
    assert sorted(f["job_id"] for f in results["failures"]) == sorted(f"datasets/{ds}" for ds in CORRUPT.values())
    dataset = CORRUPT[name]
    (failure,) = [f for f in results["failures"] if f["dataset_id"] == dataset]
    assert failure["job_id"] == f"datasets/{dataset}" and failure["stage"] == "dataset"
    assert f"{dataset}/{name}" in failure["reason"] and "cannot be read as h5ad" in failure["reason"]
    assert name in (out / failure["log"]).read_text()
    # with every dataset unusable there is nothing to benchmark: that stays the task's error, with the reasons
    inputs = two_datasets(tiny_task.root, tmp_path)
    for file in [inputs / "syn_b" / name, *(inputs / "syn_a").iterdir()]:
        file.write_bytes(file.read_bytes()[:300])
    with pytest.raises(ConfigError, match=r"no usable dataset: datasets/syn_a: invalid dataset file: .*syn_a/\w+.h5ad"):
        run_benchmark(tiny_task, tmp_path / "out2", input_dir=inputs, methods=["group_mean"], metrics=["errors"], progress=False)


def test_a_malformed_component_config_is_reported_and_the_task_runs(faulty_run):
    from openpert.results.collect import format_summary

    results, out = faulty_run
    (error,) = results["config_errors"]
    assert error["component"] == "broken" and error["type"] == "method"
    assert error["config"] == "src/tiny/methods/broken/config.vsh.yaml" and "broken/config.vsh.yaml: invalid YAML" in error["reason"]
    assert json.loads((out / "results.json").read_text())["config_errors"] == [error]
    assert {s["method_id"] for s in results["scores"]} == {"group_mean", "truth"}
    assert "config error, method broken left out: " in format_summary(results)


def test_a_dataset_without_test_items_fails_its_job(project_copy, tmp_path):
    """min_rows on the test format: a dataset component that yields no items fails, naming the file."""
    api = project_copy / "src" / "tiny" / "api" / "file_test.yaml"
    api.write_text(api.read_text().replace("    type: h5ad\n", "    type: h5ad\n    min_rows: 1\n"))
    script = project_copy / "src" / "tiny" / "datasets" / "synthetic" / "script.py"
    script.write_text(script.read_text().replace("is_test = np.tile(np.arange(n_per_group) < 3, n_groups)",
                                                 "is_test = np.tile(np.arange(n_per_group) < (3 if par['seed'] == 1 else 0), n_groups)"))
    task = Task(project_copy / "src" / "tiny")
    results = run_benchmark(task, tmp_path / "out", methods=["group_mean"], controls=[], metrics=["errors"], jobs=2,
                            progress=False)
    (failure,) = results["failures"]
    assert failure["job_id"] == "datasets/syn_b" and failure["stage"] == "dataset"
    assert "test.h5ad (file_test): has 0 rows (obs); the format asks for at least 1 (min_rows)" in failure["reason"]
    assert [d["dataset_id"] for d in results["datasets"]] == ["syn_a"]
    assert {s["dataset_id"] for s in results["scores"]} == {"syn_a"}


def test_the_sandbox_mode_reaches_every_job_record(unsandboxed_run, group_mean_run):
    from openpert.run.sandbox import available

    _, off, _ = unsandboxed_run
    assert {r["sandbox"] for r in off["resources"]} == {"none"}
    if available():
        # the shared run ran with the default mode, the sandbox where it works
        assert {r["sandbox"] for r in group_mean_run.results["resources"]} == {"bubblewrap"}


def test_a_job_gets_its_share_of_the_cores_at_most_what_its_label_asks():
    from openpert.engines.local import machine_share
    from openpert.run.process import Limits

    midcpu = Limits(time_s=60, memory_mb=100, cpus=2)
    assert machine_share(midcpu, jobs=2, cores=2) == Limits(time_s=60, memory_mb=100, cpus=1)
    assert machine_share(midcpu, jobs=1, cores=8).cpus == 2  # the label's count, not the machine's
    assert machine_share(midcpu, jobs=8, cores=2).cpus == 1  # never 0
    assert machine_share(Limits(cpus=None), jobs=2, cores=8).cpus == 4  # no label: the share
    assert machine_share(Limits(cpus=4), jobs=3, cores=8).cpus == 2


def test_job_slots_bound_jobs_across_engines_and_stop_them_all():
    import threading

    from openpert.engines.local import JobSlots, RunStopped

    slots = JobSlots(2)
    running, most = [0], [0]
    lock = threading.Lock()

    def job():
        with slots.slot():
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.05)
            with lock:
                running[0] -= 1

    threads = [threading.Thread(target=job) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 2
    # A stop reaches a job waiting for a slot and one about to take it.
    held = JobSlots(1)
    stopped = []

    def wait_for_a_slot():
        with pytest.raises(RunStopped):
            with held.slot():
                pass
        stopped.append(True)

    with held.slot():
        waiter = threading.Thread(target=wait_for_a_slot)
        waiter.start()
        held.stop()
        waiter.join(timeout=5)
    assert not waiter.is_alive() and len(stopped) == 1
    with pytest.raises(RunStopped):
        with held.slot():
            pass


@pytest.fixture(scope="module")
def two_tasks_run(tiny_project, tmp_path_factory):
    """The CLI's benchmark of two tasks at once (tiny and tiny2, one method, one control, one metric).

    The project holds the fixture task twice (tiny2 under another name, with its own test
    resources) and, in resources_test/other, a folder of a foreign task that neither reads.
    Returns ``(project, results folder, stdout, stderr, {task: results.json as written by this run})``.
    """
    from openpert.cli import main

    project = tmp_path_factory.mktemp("two_tasks") / "project"
    shutil.copytree(tiny_project, project)
    copy_tiny_task(project, "tiny2")
    shutil.copytree(project / "resources_test" / "tiny", project / "resources_test" / "tiny2")
    foreign = project / "resources_test" / "other" / "half"
    foreign.mkdir(parents=True)
    (foreign / "train.h5ad").write_bytes(b"not a dataset of tiny")
    out = project.parent / "out"
    args = ["benchmark", "--task", "tiny", "tiny2", "--input", "resources_test", "--methods", "group_mean",
            "--controls", "truth", "--metrics", "errors", "-j", "2", "-o", str(out)]
    # capsys is a test's fixture: this module's fixture catches the CLI's output itself
    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        mp.chdir(project)
        assert main(args) == 0
    results = {task: json.loads((out / task / "results.json").read_text()) for task in ("tiny", "tiny2")}
    return project, out, stdout.getvalue(), stderr.getvalue(), results


def test_several_tasks_share_the_job_slots_and_report_in_order(two_tasks_run):
    _, _, out, err, results = two_tasks_run
    # Each task's summary in the order asked; the progress lines name the task of each job.
    assert out.index("tiny: ") < out.index("tiny2: ")
    started = [line.split()[1] for line in err.splitlines() if line.startswith("start ")]
    assert "tiny/syn/group_mean" in started and "tiny2/syn/group_mean" in started
    assert [(s["method_id"], s["metric_id"], s["raw"]) for s in results["tiny"]["scores"]] == \
           [(s["method_id"], s["metric_id"], s["raw"]) for s in results["tiny2"]["scores"]]


def test_visible_gpus_reads_device_files_and_cuda_visible_devices(tmp_path):
    from openpert.engines.local import visible_gpus

    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert visible_gpus({}, dev=tmp_path) == 2
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "1"}, dev=tmp_path) == 1
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, dev=tmp_path) == 0
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}, dev=tmp_path) == 0
    assert visible_gpus({}, dev=tmp_path / "none") == 0


def test_a_gpu_job_without_a_gpu_runs_with_a_notice_unless_a_server_generates():
    from openpert.engines.local import gpu_notice

    said = gpu_notice("d/summer", 1, needs_llm=True, env={}, visible=0)
    assert "d/summer asks for 1 GPU(s) and this machine shows 0: it runs anyway" in said
    assert gpu_notice("d/summer", 1, needs_llm=True, env={"OPENPERT_LLM_BASE_URL": "http://127.0.0.1:8000/v1"},
                      visible=0) == ""
    assert gpu_notice("d/summer", 1, needs_llm=True, env={"OPENPERT_LLM_BACKEND": "dry_run"}, visible=0) == ""
    assert gpu_notice("d/torch_fit", 1, needs_llm=False, env={"OPENPERT_LLM_BASE_URL": "http://x/v1"}, visible=0) != ""
    assert gpu_notice("d/summer", 1, needs_llm=True, env={}, visible=1) == ""
    assert gpu_notice("d/m", None, needs_llm=False, env={}, visible=0) == ""


def test_one_task_reads_its_own_folder_of_a_resources_tree(two_tasks_run, monkeypatch):
    from openpert.cli import main

    # `--input resources_test` (the folder of every task's resources) means resources_test/tiny for
    # the task tiny, as it does with several tasks; a foreign task's folder beside it is not read.
    # The two-task run's jobs of tiny are this run's too: resumed, it finds them done, but it reads
    # its input folder as any run does (resources_test itself would hold tiny/syn, tiny2/syn and other/half).
    project, out, _, _, _ = two_tasks_run
    assert (project / "resources_test" / "other" / "half" / "train.h5ad").is_file()
    monkeypatch.chdir(project)
    args = ["benchmark", "--task", "tiny", "--input", "resources_test", "--methods", "group_mean",
            "--controls", "truth", "--metrics", "errors", "-j", "2", "-o", str(out), "--quiet", "--resume"]
    assert main(args) == 0
    results = json.loads((out / "tiny" / "results.json").read_text())
    assert {d["dataset_id"] for d in results["datasets"]} == {"syn"}


def test_language_model_jobs_run_in_a_lane_beside_the_job_slots(tmp_path):
    import threading
    from types import SimpleNamespace

    from openpert.engines.local import JobSlots, LocalEngine, RunStopped
    from openpert.run.records import JobRecord

    # The slots: the lane holds llm_jobs at a time, and holding it takes no job slot.
    slots, second = JobSlots(1, llm_jobs=1), []

    def second_llm_job():
        with pytest.raises(RunStopped):
            with slots.slot(llm=True):
                second.append("ran")
        second.append("stopped")

    with slots.slot(), slots.slot(llm=True):
        waiter = threading.Thread(target=second_llm_job)
        waiter.start()
        waiter.join(timeout=0.5)
        assert waiter.is_alive() and not second  # a second language-model job waits for the lane
        slots.stop()
        waiter.join(timeout=5)
    assert second == ["stopped"]

    # The engine: with one job slot, a language-model job waiting on its server leaves the slot to
    # the other jobs (it would hold it, and this run would never end, in the slots' pool).
    cpu_started = threading.Event()

    def job(job_id: str, llm: bool):
        arguments = [SimpleNamespace(name="llm_base_url")] if llm else []
        return SimpleNamespace(job_id=job_id, after=None, stage="method", config=SimpleNamespace(arguments=arguments),
                               resolved=lambda outputs, self_id=job_id, llm=llm: job(self_id, llm))

    def run_job(self, job):
        with self.slots.slot(llm=bool(job.config.arguments)):
            if job.config.arguments:
                assert cpu_started.wait(timeout=10), "the job slot stayed with the language-model job"
            else:
                cpu_started.set()
        return JobRecord(job_id=job.job_id, stage="method", component="c", component_type="method", dataset_id="a",
                         exit_code=0)

    engine = LocalEngine(tmp_path, jobs=1, progress=False)
    engine.run_job = run_job.__get__(engine)
    records = engine.run([job("a/summer", llm=True), job("a/summer2", llm=True), job("a/mean", llm=False)])
    assert sorted(r.job_id for r in records) == ["a/mean", "a/summer", "a/summer2"]
