"""Per-item values beside results.json: written reproducibly, read back exactly, bad files refused."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from openpert.results.item_scores import ItemScoresError, read_item_scores, write_item_scores


def _items() -> dict[tuple[str, str, str], pd.Series]:
    return {("k562", "mlp", "auroc"): pd.Series([0.1, 1 / 3, np.nan], index=["TP53", "MYC", "GATA1"]),
            ("k562", "gat", "auroc"): pd.Series([0.25], index=[17])}


def test_values_round_trip_exactly_and_bytes_are_reproducible(tmp_path: Path) -> None:
    a, b = write_item_scores(tmp_path / "a.csv.gz", _items()), write_item_scores(tmp_path / "b.csv.gz", _items())
    assert a.read_bytes() == b.read_bytes()
    back = read_item_scores(a)
    assert list(back) == [("k562", "gat", "auroc"), ("k562", "mlp", "auroc")]
    mlp = back["k562", "mlp", "auroc"]
    assert mlp.index.tolist() == ["TP53", "MYC"] and mlp.tolist() == [0.1, 1 / 3]  # NaN dropped, 1/3 exact
    assert back["k562", "gat", "auroc"].index.tolist() == ["17"]


def test_empty_items_write_a_readable_file(tmp_path: Path) -> None:
    assert read_item_scores(write_item_scores(tmp_path / "e.csv.gz", {})) == {}


@pytest.mark.parametrize(("text", "problem"), [
    ("dataset_id,method_id,item,value\nk,m,a,1\n", "missing column(s) metric_id"),
    ("dataset_id,method_id,metric_id,item,value\nk,m,x,a,high\n", "row 2 has a value that is not a number"),
    ("dataset_id,method_id,metric_id,item,value\nk,m,x,a,1\nk,m,x,a,2\n", "item 'a' appears twice for k/m/x"),
])
def test_bad_files_are_refused_naming_the_problem(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "bad.csv.gz"
    path.write_bytes(gzip.compress(text.encode()))
    with pytest.raises(ItemScoresError, match=f"bad.csv.gz: {problem.replace('(', '.').replace(')', '.')}"):
        read_item_scores(path)


def test_a_file_that_is_not_gzip_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "item_scores.csv.gz"
    path.write_bytes(b"\x1f\x8b broken")
    with pytest.raises(ItemScoresError, match="not a readable item scores file"):
        read_item_scores(path)


def test_collecting_a_run_writes_the_values_each_score_is_the_mean_of(tiny_project: Path, tmp_path: Path) -> None:
    import anndata as ad

    from openpert.config.task import Task
    from openpert.engines.plan import make_plan
    from openpert.results.collect import write_results
    from openpert.results.item_scores import ITEM_SCORES
    from openpert.run.records import JobRecord

    task = Task(tiny_project / "src" / "tiny")
    out = tmp_path / "out"
    plan = make_plan(task, task.find_datasets(tiny_project / "resources_test" / "tiny"), out,
                     methods=["group_mean"], metrics=["errors"])
    records = []
    for method, rmse in (("group_mean", 1.0), ("truth", 0.0), ("zeros", 3.0)):
        path = tmp_path / method / "score.h5ad"
        path.parent.mkdir()
        obs = pd.DataFrame({"rmse": [rmse, rmse + 1], "mae": [np.nan, 0.5]}, index=["r1", "r2"])
        ad.AnnData(obs=obs, uns={"dataset_id": "syn", "method_id": method, "metric_ids": ["rmse", "mae"],
                                 "metric_values": [rmse + 0.5, 0.5]}).write_h5ad(path)
        records.append(JobRecord(job_id=f"syn/{method}/errors", stage="metric", component="errors",
                                 component_type="metric", dataset_id="syn", method_id=method, status="succeeded",
                                 exit_code=0, outputs={"output": str(path)}))
    write_results(task, plan, records, out)
    items = read_item_scores(out / ITEM_SCORES)
    assert items["syn", "zeros", "rmse"].to_dict() == {"r1": 3.0, "r2": 4.0}
    assert items["syn", "truth", "mae"].to_dict() == {"r2": 0.5}  # the NaN item is not a value
    assert {key[1] for key in items} == {"group_mean", "truth", "zeros"}
