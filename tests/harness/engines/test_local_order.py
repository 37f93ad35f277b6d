"""The local engine runs each job once the job it follows has succeeded, with its inputs resolved."""

from __future__ import annotations

from pathlib import Path

import pytest

from openpert.config.task import Task
from openpert.engines.local import LocalEngine
from openpert.engines.plan import Job, Output
from openpert.run.process import Limits
from openpert.run.records import EXIT_INVALID, JobRecord


def _job(config, job_id: str, after: str | None, inputs: dict, tmp_path: Path) -> Job:
    return Job(job_id=job_id, stage="method" if after is None else "metric", config=config, dataset_id="d",
               method_id="m", inputs=inputs, outputs={"output": "x.h5ad"}, params={}, limits=Limits(), context={},
               allowed=None, publish_dir=tmp_path / job_id, after=after)


def test_jobs_follow_their_upstream_job_and_read_its_outputs(tiny_project, tmp_path, monkeypatch):
    config = Task(tiny_project / "src" / "tiny").component("group_mean")
    ran: dict[str, Job] = {}

    def run_job(self, job: Job) -> JobRecord:
        ran[job.job_id] = job
        ok = not job.job_id.startswith("fails")
        # "partial" writes no --output: what follows it and reads that output cannot run
        outputs = {} if job.job_id == "partial" else {"output": str(tmp_path / f"{job.job_id}.h5ad")}
        return JobRecord(job_id=job.job_id, stage=job.stage, component="c", component_type="method", dataset_id="d",
                         method_id="m", status="succeeded" if ok else "failed", exit_code=0 if ok else 1,
                         outputs=outputs if ok else {})

    monkeypatch.setattr(LocalEngine, "run_job", run_job)
    data = tmp_path / "data.h5ad"
    jobs = [
        _job(config, "ok", None, {"input": data}, tmp_path),
        _job(config, "ok/next", "ok", {"input": Output("ok", "output")}, tmp_path),
        _job(config, "fails", None, {"input": data}, tmp_path),
        _job(config, "fails/next", "fails", {"input": Output("fails", "output")}, tmp_path),
        _job(config, "fails/next/last", "fails/next", {"input": Output("fails/next", "output")}, tmp_path),
        _job(config, "partial", None, {"input": data}, tmp_path),
        _job(config, "partial/next", "partial", {"input": Output("partial", "output")}, tmp_path),
    ]
    records = {r.job_id: r for r in LocalEngine(tmp_path / "out", jobs=2, progress=False).run(jobs)}
    # the follower got its upstream job's file, not the reference
    assert ran["ok/next"].inputs == {"input": tmp_path / "ok.h5ad"}
    # what follows a failed job does not run, however far down, and has no record of its own
    assert set(records) == {"ok", "ok/next", "fails", "partial", "partial/next"}
    assert "fails/next" not in ran and "fails/next/last" not in ran
    refused = records["partial/next"]
    assert (refused.exit_code, refused.reason) == (EXIT_INVALID, "job partial/next: upstream job partial wrote no --output")
    assert "partial/next" not in ran


def test_a_job_following_no_planned_job_is_refused(tiny_project, tmp_path):
    config = Task(tiny_project / "src" / "tiny").component("group_mean")
    with pytest.raises(ValueError, match="jobs follow jobs that are not planned: elsewhere"):
        LocalEngine(tmp_path / "out", progress=False).run([_job(config, "x", "elsewhere", {}, tmp_path)])


def test_a_failed_build_fails_the_datasets_cut_from_it_naming_the_build(tiny_project, tmp_path, monkeypatch):
    config = Task(tiny_project / "src" / "tiny").component("group_mean")
    ran: list[str] = []

    def run_job(self, job: Job) -> JobRecord:
        ran.append(job.job_id)
        return JobRecord(job_id=job.job_id, stage=job.stage, component="c", component_type="dataset",
                         dataset_id=job.dataset_id, status="failed", exit_code=1, reason="exited with code 1")

    monkeypatch.setattr(LocalEngine, "run_job", run_job)

    def job(job_id: str, stage: str, after: str | None) -> Job:
        return Job(job_id=job_id, stage=stage, config=config, dataset_id=job_id.split("/")[-1], method_id=None,
                   inputs={} if after is None else {"input": Output(after, "output")}, outputs={"output": "x.h5ad"},
                   params={}, limits=Limits(), context={}, allowed=None, publish_dir=tmp_path / job_id, after=after)

    jobs = [job("builds/src", "build", None), job("datasets/fold_a", "dataset", "builds/src"),
            job("datasets/fold_b", "dataset", "builds/src"), job("fold_a/m", "method", "datasets/fold_a")]
    records = {r.job_id: r for r in LocalEngine(tmp_path / "out", jobs=2, progress=False).run(jobs)}
    assert ran == ["builds/src"]
    # each fold is listed as failed with the build's reason; what follows a fold has no record
    assert set(records) == {"builds/src", "datasets/fold_a", "datasets/fold_b"}
    for fold in ("fold_a", "fold_b"):
        record = records[f"datasets/{fold}"]
        assert (record.stage, record.dataset_id, record.exit_code) == ("dataset", fold, EXIT_INVALID)
        assert record.reason == "its build builds/src failed: exited with code 1"
