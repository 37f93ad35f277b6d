"""Collecting results: ``results.json`` is written for what succeeded, whatever else is broken."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anndata as ad
import pandas as pd

from openpert.config.task import Dataset, Task
from openpert.engines.plan import make_plan
from openpert.results.collect import format_summary, write_results
from openpert.run.records import JobRecord


def corrupt_dataset(project: Path, tmp_path: Path) -> list[Dataset]:
    """The fixture dataset with every h5ad file cut short."""
    folder = tmp_path / "syn"
    shutil.copytree(project / "resources_test" / "tiny" / "syn", folder)
    for path in folder.glob("*.h5ad"):
        path.write_bytes(path.read_bytes()[:300])
    task = Task(project / "src" / "tiny")
    return task.find_datasets(folder.parent)


def test_a_corrupt_dataset_file_does_not_stop_results_writing(tiny_project, tmp_path):
    """Reading ``dataset_*`` of a truncated file becomes a QC flag naming the file, not an exception."""
    task = Task(tiny_project / "src" / "tiny")
    out = tmp_path / "out"
    plan = make_plan(task, corrupt_dataset(tiny_project, tmp_path), out, methods=["group_mean"], metrics=["errors"])
    failed = JobRecord(job_id="syn/group_mean", stage="method", component="group_mean", component_type="method",
                       dataset_id="syn", method_id="group_mean", exit_code=-1, reason="invalid input --input_test: ...")
    results = write_results(task, plan, [failed], out)
    assert json.loads((out / "results.json").read_text())["datasets"] == [{"dataset_id": "syn"}]
    flags = [q for q in results["qc"] if q["flag"] == "dataset_file_unreadable"]
    assert flags and all(q["dataset_id"] == "syn" for q in flags)
    assert any("syn/train.h5ad: cannot read the dataset's uns: OSError" in q["message"] for q in flags)
    assert [f["job_id"] for f in results["failures"]] == ["syn/group_mean"]


def test_an_unreadable_score_fails_its_metric_job_only(tiny_project, tmp_path):
    """A score file whose values cannot be read fails that metric job; the rest is collected."""
    task = Task(tiny_project / "src" / "tiny")
    datasets = task.find_datasets(tiny_project / "resources_test" / "tiny")
    out = tmp_path / "out"
    plan = make_plan(task, datasets, out, methods=["group_mean"], metrics=["errors"])

    def score(method: str, values) -> JobRecord:
        path = tmp_path / method / "score.h5ad"
        path.parent.mkdir()
        ad.AnnData(obs=pd.DataFrame(index=["r1"]), uns={"dataset_id": "syn", "method_id": method, "metric_ids": ["rmse"],
                                                        "metric_values": values}).write_h5ad(path)
        return JobRecord(job_id=f"syn/{method}/errors", stage="metric", component="errors", component_type="metric",
                         dataset_id="syn", method_id=method, status="succeeded", exit_code=0, outputs={"output": str(path)})

    records = [score("group_mean", {"nested": 1.0}), score("truth", [0.0]), score("zeros", [2.0])]
    results = write_results(task, plan, records, out)
    (failure,) = results["failures"]
    assert failure["job_id"] == "syn/group_mean/errors" and "group_mean/score.h5ad: TypeError" in failure["reason"]
    assert {(s["method_id"], s["raw"]) for s in results["scores"]} == {("truth", 0.0), ("zeros", 2.0)}


def test_a_score_claiming_another_identity_or_another_metrics_items_fails_its_job(tiny_project, tmp_path):
    """Whose score it is and which metrics it reports are the plan's: a score file claiming otherwise is refused."""
    task = Task(tiny_project / "src" / "tiny")
    out = tmp_path / "out"
    plan = make_plan(task, task.find_datasets(tiny_project / "resources_test" / "tiny"), out,
                     methods=["group_mean"], metrics=["errors"])

    def score(method: str, *, uns: dict | None = None, items: dict | None = None) -> JobRecord:
        path = tmp_path / method / "score.h5ad"
        path.parent.mkdir()
        obs = pd.DataFrame({"rmse": [0.5, 0.7], **(items or {})}, index=["r1", "r2"])
        ad.AnnData(obs=obs, uns={"dataset_id": "syn", "method_id": method, "metric_ids": ["rmse"],
                                 "metric_values": [0.6], **(uns or {})}).write_h5ad(path)
        return JobRecord(job_id=f"syn/{method}/errors", stage="metric", component="errors", component_type="metric",
                         dataset_id="syn", method_id=method, status="succeeded", exit_code=0, outputs={"output": str(path)})

    records = [score("group_mean", uns={"method_id": "truth"}),           # passes itself off as the positive control
               score("zeros", items={"pearson": [1.0, 1.0]}),           # writes the correlation metric's items
               score("truth", uns={"dataset_id": "elsewhere"}),         # files its score under another dataset
               score("train_mean")]
    results = write_results(task, plan, records, out)
    reasons = {f["job_id"]: f["reason"] for f in results["failures"]}
    assert reasons["syn/group_mean/errors"].endswith("uns['method_id'] is 'truth', but the job scored method 'group_mean'")
    assert reasons["syn/zeros/errors"].endswith("obs holds per-item values of ['pearson'], metrics errors does not "
                                                "declare (another metric component reports them)")
    assert reasons["syn/truth/errors"].endswith("uns['dataset_id'] is 'elsewhere', but the job scored dataset 'syn'")
    assert {s["method_id"] for s in results["scores"]} == {"train_mean"}


def test_config_errors_reach_results_and_the_summary(project_copy, tmp_path):
    broken = project_copy / "src" / "tiny" / "metrics" / "broken"
    broken.mkdir()
    (broken / "config.vsh.yaml").write_text("__merge__: ../../api/comp_metric.yaml\nname: Broken\n")
    task = Task(project_copy / "src" / "tiny")
    plan = make_plan(task, task.find_datasets(project_copy / "resources_test" / "tiny"), tmp_path, methods=["group_mean"],
                     metrics=["errors"])
    results = write_results(task, plan, [], tmp_path)
    (error,) = results["config_errors"]
    assert error == {"config": "src/tiny/metrics/broken/config.vsh.yaml", "component": "broken", "type": "metric",
                     "reason": error["reason"]}
    assert "name: 'Broken' must match" in error["reason"]
    assert format_summary(results).splitlines()[0].startswith("config error, metric broken left out: ")


def test_a_metric_without_items_on_a_dataset_is_left_out_of_the_comparisons(tiny_project, tmp_path):
    """A per-item metric of a subset the dataset lacks (NaN for every item and method) is no error."""
    task = Task(tiny_project / "src" / "tiny")
    datasets = task.find_datasets(tiny_project / "resources_test" / "tiny")
    out = tmp_path / "out"
    plan = make_plan(task, datasets, out, methods=["group_mean"], metrics=["errors"])

    def score(method: str, rmse: float) -> JobRecord:
        path = tmp_path / method / "score.h5ad"
        path.parent.mkdir()
        obs = pd.DataFrame({"rmse": [rmse, rmse + 1], "mae": [float("nan")] * 2}, index=["r1", "r2"])
        ad.AnnData(obs=obs, uns={"dataset_id": "syn", "method_id": method, "metric_ids": ["rmse", "mae"],
                                 "metric_values": [rmse + 0.5, float("nan")]}).write_h5ad(path)
        return JobRecord(job_id=f"syn/{method}/errors", stage="metric", component="errors", component_type="metric",
                         dataset_id="syn", method_id=method, status="succeeded", exit_code=0, outputs={"output": str(path)})

    records = [score("group_mean", 1.0), score("train_mean", 2.0), score("truth", 0.0), score("zeros", 3.0)]
    results = write_results(task, plan, records, out)
    assert not results["failures"]
    compared = {(c["metric_id"], c["method_id"]) for c in results["comparisons"]}
    assert ("rmse", "group_mean") in compared and not any(metric == "mae" for metric, _ in compared)


def test_the_summary_shows_every_name_in_full_and_a_failed_method_as_failed():
    long_metric = "pearson_specific_top100_perturbations"
    long_method = "a_method_with_a_rather_long_descriptive_name"
    results = {
        "metrics": [{"id": long_metric}, {"id": "rmse"}],
        "methods": [{"id": long_method}, {"id": "broken"}, {"id": "zeros", "control": "negative"}],
        "datasets": [{"dataset_id": "syn"}],
        "scores": [{"dataset_id": "syn", "method_id": m, "metric_id": k, "raw": v, "ci_low": None, "ci_high": None}
                   for m, k, v in [(long_method, long_metric, 0.5), (long_method, "rmse", 1.0),
                                   ("zeros", long_metric, 0.0), ("zeros", "rmse", 2.0)]],
        "dataset_scores": [{"dataset_id": "syn", "method_id": long_method, "score": 0.7, "status": "succeeded"},
                           {"dataset_id": "syn", "method_id": "broken", "score": 0.0, "status": "failed"},
                           {"dataset_id": "syn", "method_id": "zeros", "score": 0.0, "status": "succeeded"}],
    }
    lines = format_summary(results).splitlines()
    header = lines[1].split()
    assert header == ["method", "score", long_metric, "rmse"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert rows[long_method][1:] == ["0.700", "0.500", "1.000"]
    # a failed method is not scored 0.000 in the console: its score column says so
    assert rows["broken"][1:] == ["failed", "failed", "failed"]
    assert rows["zeros"][1:] == ["(negative)", "0.000", "0.000", "2.000"]
    # the columns stay aligned: each value ends where its header ends
    assert len({len(line) for line in lines[1:]}) == 1
