"""Nextflow's trace read back: values converted, rows matched to the plan's jobs, failures explained."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from nextflow_plans import component_entry, example_jobs, job_entry

from openpert.engines.nextflow import TRACE_FILE_NAME
from openpert.engines.nextflow_trace import collect_job_records, parse_trace
from openpert.run.records import EXIT_INVALID, EXIT_MEMORY, EXIT_TIME


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _viash_yaml(tmp_path: Path, labels: str) -> Path:
    body = '  .runners[.type == "nextflow"].config.labels := { ' + labels + " }\n"
    return _write(tmp_path / "_viash.yaml", "name: x\nconfig_mods: |\n" + body)



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
    records = collect_job_records(example_jobs(outdir), parse_trace(trace_file))
    return outdir, {r.job_id: r for r in records}, records


def test_collect_returns_every_job_that_could_run_in_plan_order(collected):
    _, _, records = collected
    assert [r.job_id for r in records[:4]] == ["k562/mlp", "k562/mlp/auroc", "k562/hog", "k562/slow"]
    # nine methods, and the metrics of the two that succeeded: a failed method's metric could not run
    assert len(records) == 11
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
    # the metric Nextflow aborted follows a job that failed: it has no record, as with the local engine
    assert "k562/invalid/auroc" not in by_id


def test_collect_aborted_job_says_so(tmp_path):
    outdir = tmp_path / "results"
    _write(outdir / "outputs" / "k562" / "mlp" / "prediction.h5ad", "x")
    trace = _write(tmp_path / "t.tsv", "task_id\ttag\tstatus\texit\n1\tk562/mlp\tCOMPLETED\t0\n"
                   "2\tk562/mlp/auroc\tABORTED\t-\n")
    by_id = {r.job_id: r for r in collect_job_records(example_jobs(outdir), parse_trace(trace))}
    aborted = by_id["k562/mlp/auroc"]
    assert (aborted.status, aborted.exit_code, aborted.reason) == ("failed", EXIT_INVALID, "aborted by Nextflow before it finished")


def test_collect_retries_and_cache(collected):
    _, by_id, _ = collected
    flaky = by_id["k562/flaky"]
    assert flaky.succeeded and flaky.exit_code == 0
    assert flaky.duration_s == 26 * 3600 - 1 and flaky.peak_memory_mb == 1536.0
    cached = by_id["k562/flaky/auroc"]
    assert cached.succeeded and cached.cached is True


def test_collect_jobs_that_never_ran(collected):
    _, by_id, _ = collected
    for method in ("hog", "slow", "crash", "stuck", "lost", "never"):
        assert f"k562/{method}/auroc" not in by_id  # its method failed: the method's record says why
    never = by_id["k562/never"]
    assert (never.status, never.exit_code, never.reason) == ("failed", EXIT_INVALID, "not run")
    assert never.duration_s is None and never.outputs == {}


def test_collect_metric_missing_after_successful_method_is_not_run(tmp_path):
    outdir = tmp_path / "results"
    _write(outdir / "outputs" / "k562" / "mlp" / "prediction.h5ad", "x")
    trace = _write(tmp_path / "t.tsv", _trace_text(tmp_path / "work").splitlines()[0] + "\n"
                   + _trace_text(tmp_path / "work").splitlines()[1] + "\n")  # fmt: skip
    records = collect_job_records(example_jobs(outdir), parse_trace(trace))
    metric = next(r for r in records if r.job_id == "k562/mlp/auroc")
    assert (metric.status, metric.reason) == ("failed", "not run")
    assert next(r for r in records if r.job_id == "k562/mlp").succeeded


def test_collect_without_trace_rows_fails_every_job(tmp_path):
    records = collect_job_records(example_jobs(tmp_path), [])
    assert len(records) == 9  # the methods: their metrics follow them
    assert all(not r.succeeded and r.exit_code == EXIT_INVALID for r in records)
    assert {r.reason for r in records if r.stage == "method"} == {"not run"}


def test_collect_dataset_jobs_seeds_and_retries(tmp_path):
    """Loaders run in Nextflow: their datasets' jobs follow them, a failed one's get no record; seeds and retries."""
    outdir = tmp_path / "results"
    loader = dict(component_entry("loader", "dataset", [], "data.h5ad"), digest="ab12",
                  output_names={"output_data": "data.h5ad", "output_extra": "extra.h5ad"})
    mlp = dict(component_entry("mlp", "control_method", ["lowmem"], "prediction.h5ad"), digest="cd34")
    hog = component_entry("hog", "method", ["lowtime"], "prediction.h5ad")
    auroc = component_entry("auroc", "metric", [], "score.h5ad")
    memory, time_limit = {"memory_mb": 4096, "time_s": None}, {"memory_mb": None, "time_s": 600}
    jobs = []
    for made in ("made", "broken"):
        jobs.append(job_entry(f"datasets/{made}", "dataset", loader, dataset_id=made, method_id=None, after=None,
                              publish_dir=outdir / "datasets" / made, limits={}, params={"n": 3} if made == "made" else {}))
    for made in ("made", "broken"):
        for seed in (0, 1):
            folder = outdir / "outputs" / made / f"mlp@seed{seed}"
            jobs.append(job_entry(f"{made}/mlp@seed{seed}", "method", mlp, dataset_id=made, method_id="mlp",
                                  after=f"datasets/{made}", publish_dir=folder, limits=memory, seed=seed, params={"seed": seed}))
            jobs.append(job_entry(f"{made}/mlp@seed{seed}/auroc", "metric", auroc, dataset_id=made, method_id="mlp",
                                  after=f"{made}/mlp@seed{seed}", publish_dir=folder / "auroc", limits={}, seed=seed))
        jobs.append(job_entry(f"{made}/hog", "method", hog, dataset_id=made, method_id="hog", after=f"datasets/{made}",
                              publish_dir=outdir / "outputs" / made / "hog", limits=time_limit))
    _write(outdir / "datasets" / "made" / "data.h5ad", "x")  # the optional extra output was not written
    seed0 = outdir / "outputs" / "made" / "mlp@seed0"
    _write(seed0 / "prediction.h5ad", "x")
    _write(seed0 / "auroc" / "score.h5ad", "x")
    rows = [
        ("1", "datasets/made", "COMPLETED", "0"), ("2", "datasets/broken", "FAILED", "1"),
        ("3", "made/mlp@seed0", "COMPLETED", "0"), ("4", "made/mlp@seed0/auroc", "COMPLETED", "0"),
        ("5", "made/mlp@seed1", "FAILED", "137"), ("6", "made/mlp@seed1", "FAILED", "137"),
        ("7", "made/hog", "FAILED", "143"),
    ]  # fmt: skip
    attempts = {"6": "2"}
    trace = _write(tmp_path / "t.tsv", "task_id\ttag\tstatus\texit\tattempt\n"
                   + "".join("\t".join([*r, attempts.get(r[0], "1")]) + "\n" for r in rows))  # fmt: skip
    records = collect_job_records(jobs, parse_trace(trace))
    by_id = {r.job_id: r for r in records}
    assert [r.job_id for r in records][:2] == ["datasets/made", "datasets/broken"]
    assert not any(r.dataset_id == "broken" for r in records if r.stage != "dataset")
    made = by_id["datasets/made"]
    assert made.succeeded and made.stage == "dataset" and made.params == {"n": 3}
    assert made.outputs == {"output_data": str(outdir / "datasets" / "made" / "data.h5ad")}
    assert made.component_digest == "sha256:ab12" and made.engine == "nextflow"
    assert by_id["datasets/broken"].exit_code == 1

    first = by_id["made/mlp@seed0"]
    assert first.succeeded and (first.seed, first.method_id) == (0, "mlp") and first.params["seed"] == 0
    assert by_id["made/mlp@seed0/auroc"].seed == 0 and by_id["made/mlp@seed0/auroc"].succeeded
    retried = by_id["made/mlp@seed1"]
    # the limit of the attempt that failed: the second attempt had twice the memory
    assert (retried.exit_code, retried.reason) == (EXIT_MEMORY, "memory limit exceeded (limit 8.0 GB) on attempt 2")
    assert "made/mlp@seed1/auroc" not in by_id
    assert "made/mlp" not in by_id and by_id["made/hog"].exit_code == EXIT_TIME and by_id["made/hog"].seed is None
    assert by_id["made/hog"].reason == "time limit exceeded (limit 600 s)"



def test_a_failed_build_fails_the_datasets_cut_from_it_naming_the_build(tmp_path):
    outdir = tmp_path / "results"
    build = component_entry("source", "dataset", [], "items.parquet")
    split = component_entry("split", "dataset", [], "data.h5ad")
    mlp = component_entry("mlp", "method", [], "prediction.h5ad")
    jobs = [job_entry("builds/src", "build", build, dataset_id="src", method_id=None, after=None,
                      publish_dir=outdir / "builds" / "src", limits={})]
    for fold in ("a", "b"):
        jobs.append(job_entry(f"datasets/{fold}", "dataset", split, dataset_id=fold, method_id=None, after="builds/src",
                              publish_dir=outdir / "datasets" / fold, limits={}))
        jobs.append(job_entry(f"{fold}/mlp", "method", mlp, dataset_id=fold, method_id="mlp", after=f"datasets/{fold}",
                              publish_dir=outdir / "outputs" / fold / "mlp", limits={}))
    trace = _write(tmp_path / "t.tsv", "task_id\ttag\tstatus\texit\tattempt\n1\tbuilds/src\tFAILED\t2\t1\n")
    records = collect_job_records(jobs, parse_trace(trace))
    assert [(r.job_id, r.stage, r.exit_code) for r in records] == [
        ("builds/src", "build", 2), ("datasets/a", "dataset", EXIT_INVALID), ("datasets/b", "dataset", EXIT_INVALID)]
    assert {r.reason for r in records[1:]} == {"its build builds/src failed: exited with code 2"}

def test_collect_records_round_trip_as_json(collected, tmp_path):
    _, by_id, _ = collected
    path = tmp_path / "record.json"
    by_id["k562/hog"].write(path)
    assert json.loads(path.read_text())["exit_code"] == EXIT_MEMORY


# --------------------------------------------------------------------------------------------------


def test_a_time_out_names_the_label_that_set_the_limit_and_the_next_one_up(collected, tmp_path):
    # As the local engine says it: rerunning the same job runs out of time again; a larger label is the fix.
    outdir, _, _ = collected
    jobs = example_jobs(outdir)
    config = Path(__file__).resolve().parents[3] / "src" / "perturbqa" / "control_methods" / "gene_prevalence" / "config.vsh.yaml"
    for job in jobs:
        if job["id"] == "k562/slow":
            job["config"] = str(config)
    records = {r.job_id: r for r in collect_job_records(jobs, parse_trace(tmp_path / TRACE_FILE_NAME))}
    reason = records["k562/slow"].reason
    assert reason.startswith("time limit exceeded (limit 600 s); label lowtime")
    assert "midtime" in reason and "gene_prevalence/config.vsh.yaml" in reason
