"""TaskResults' indexed lookups answer exactly as a scan of the lists does, in file order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_fixture import build_results  # noqa: E402

from openpert.report.task_results import TaskResults, load_results


def scanned_resources(data: dict, method_id: str) -> list[dict]:
    return [r for r in data["resources"] if r.get("stage") == "method"
            and (r.get("method_id") == method_id or (r.get("method_id") is None and r.get("component") == method_id))]


def test_lookups_match_a_scan_of_the_lists() -> None:
    data = build_results()
    # A dataset job failure, a resource row named by its component only, and a duplicate method id.
    data["failures"].append({"job_id": "datasets/rpe1", "stage": "dataset", "component": "loader", "dataset_id": "rpe1",
                             "method_id": None, "exit_code": 1, "reason": "corrupt"})
    data["resources"].insert(0, {"job_id": "k562/mlp", "stage": "method", "component": "mlp", "dataset_id": "k562",
                                 "method_id": None, "duration_s": 9.0})
    data["methods"].append({**data["methods"][0], "label": "Second entry of the same id"})
    results = TaskResults(data, Path("."))
    method_ids = [m["id"] for m in data["methods"]] + ["unknown"]
    dataset_ids = [d["dataset_id"] for d in data["datasets"]] + ["unknown"]
    failures = data["failures"]
    assert failures, "the fixture must have failures for this test to mean anything"
    for mid in method_ids:
        assert results.method(mid) is next((m for m in data["methods"] if m["id"] == mid), None)
        assert results.method_resources(mid) == scanned_resources(data, mid)
        assert results.component_failures(mid) == [f for f in failures if f.get("stage") != "metric"
                                                   and (f.get("method_id") == mid or f.get("component") == mid)]
        assert results.scoring_failures(mid) == [f for f in failures if f.get("stage") == "metric" and f.get("method_id") == mid]
        for did in dataset_ids:
            assert results.method_failures(did, mid) == [f for f in failures if f.get("dataset_id") == did and (
                f.get("stage") == "dataset" or (f.get("stage") != "metric" and f.get("method_id") == mid))]
            for metric in data["metrics"]:
                names = {metric["component"], metric["id"]}
                expected = next((f for f in failures if f.get("stage") == "metric" and f.get("dataset_id") == did
                                 and f.get("method_id") == mid and f.get("component") in names), None)
                assert results.metric_failure(did, mid, metric["id"]) is expected
    assert results.method_resources("mlp")[0]["duration_s"] == 9.0
    assert any(results.metric_failure(f["dataset_id"], f["method_id"], m["id"]) for f in failures for m in data["metrics"]
               if f.get("stage") == "metric")
    assert results.dataset("rpe1") is data["datasets"][1] and results.dataset("nope") == {}


def test_a_file_whose_list_is_not_a_list_of_objects_is_refused_naming_it(tmp_path) -> None:
    data = build_results()
    data["failures"] = [{"job_id": "x"}, "not an object"]
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"results\.json: failures is not a JSON array of objects"):
        load_results(tmp_path)
    data["failures"], data["scale"] = [], []
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"results\.json: scale is not a JSON object"):
        load_results(tmp_path)
    data["scale"] = {}
    (tmp_path / "results.json").write_text(json.dumps(data))
    assert load_results(tmp_path).failures == []
