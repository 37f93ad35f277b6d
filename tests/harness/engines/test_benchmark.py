"""Tests of openpert.engines.benchmark: what one benchmark run makes of its engine's records."""

from __future__ import annotations

from openpert.engines.benchmark import produced_datasets
from openpert.run.records import JobRecord


def _dataset_job(job_id: str) -> dict:
    """A plan's entry of a method job reading the train file of dataset job ``job_id``."""
    return {"id": f"{job_id}/m", "context": {"train": {"job": job_id, "output": "output_train"}}}


def test_made_datasets_follow_the_plan_not_the_finish_order():
    """Dataset jobs that finish in any order (``-j 2``) give the datasets in the plan's order; failed ones are left out."""
    plan = {"jobs": [{"id": "a", "context": {}}, {"id": "b", "context": {}}, {"id": "c", "context": {}},
                     _dataset_job("a"), _dataset_job("b"), _dataset_job("c")]}

    def record(job_id: str, status: str = "succeeded") -> JobRecord:
        return JobRecord(job_id=job_id, stage="dataset", component="loader", component_type="dataset", dataset_id=job_id,
                         status=status, outputs={"output_train": f"/out/{job_id}/train.h5ad", "output_log": "x"})

    made = produced_datasets(plan, [record("c"), record("b", "failed"), record("a")])
    assert made == [{"id": "a", "files": {"train": "/out/a/train.h5ad"}},
                    {"id": "c", "files": {"train": "/out/c/train.h5ad"}}]
