"""Open Problems' published OP3 leaderboard (perturbation_prediction_lib.published_results) and the Reproduction rows.

The reader is tested on a small file written here and on the published file when the shared data
folder holds it. The comparison of the deterministic controls with Open Problems' values runs the
task's benchmark on the real neurips-2023-data files when they are at hand (``$OPENPERT_OP3_DATA``,
or their store path ``op3/openproblems/neurips-2023-data/`` in the shared data folder or the data
store, where ``openpert data fetch --task perturbation_prediction --include-large`` puts them), and
says why it skips otherwise.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from perturbation_prediction_lib.published_results import openproblems_scores
from project_paths import ROOT, SHARED_DATA

from openpert.config.project import shared_data_dir
from openpert.data.store import default_store_dir
from openpert.results.reproduction import load_declarations, published_values

PUBLISHED = SHARED_DATA / "published" / "openproblems_perturbation_prediction" / "results.json"
needs_published = pytest.mark.skipif(not PUBLISHED.is_file(),
                                     reason=f"Open Problems' published results are not at {PUBLISHED} (set OPENPERT_SHARED_DATA)")
TASK = ROOT / "src" / "perturbation_prediction"
#: Open Problems' published mean row-wise RMSE of the deterministic controls on neurips-2023-data.
PUBLISHED_RMSE = {"zeros": 0.9179, "mean_outcome": 0.8992, "mean_across_celltypes": 0.8925,
                  "mean_across_compounds": 0.9428}


def test_reader_on_a_small_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps([
        {"dataset_id": "d1", "method_id": "zeros", "metric_values": {"rmse": 0.9, "cosine": 0, "spearman": "NA"}},
        {"dataset_id": "d2", "method_id": "zeros", "metric_values": {"rmse": 1.1, "pearson": None}},
    ]))
    assert openproblems_scores(path) == [
        {"dataset": "d1", "method": "zeros", "metric": "rmse", "value": 0.9},
        {"dataset": "d1", "method": "zeros", "metric": "cosine", "value": 0.0},
        {"dataset": "d2", "method": "zeros", "metric": "rmse", "value": 1.1},
    ]
    assert [r["dataset"] for r in openproblems_scores(path, datasets=["d2"])] == ["d2"]
    path.write_text(json.dumps([{"dataset_id": "d1", "method_id": "zeros"}]))
    with pytest.raises(ValueError, match="entry 0 lacks"):
        openproblems_scores(path)
    path.write_text(json.dumps({"results": []}))
    with pytest.raises(ValueError, match="expected a list"):
        openproblems_scores(path)


@needs_published
def test_published_leaderboard():
    records = openproblems_scores(PUBLISHED)
    assert len(records) == 60  # 12 methods and controls x 5 metrics
    rmse = {r["method"]: r["value"] for r in records if r["metric"] == "mean_rowwise_rmse"}
    assert {m: rmse[m] for m in PUBLISHED_RMSE} == PUBLISHED_RMSE
    assert rmse["nn_retraining_with_pseudolabels"] == 0.7562 and rmse["ground_truth"] == 0.0
    assert {r["dataset"] for r in records} == {"neurips-2023-data"}


@needs_published
def test_the_declared_source_maps_every_published_method_and_metric():
    (source,) = load_declarations(TASK)
    values, problem = published_values(source, TASK, SHARED_DATA)
    assert problem == "" and len(values) == 60
    assert {v.method for v in values} == set(source.methods)
    assert {v.metric for v in values} == set(source.metrics)
    assert source.tolerance_of(None) == pytest.approx(0.00005)  # published to 4 decimals


def _op3_folder() -> tuple[Path | None, str]:
    names = ("de_train.h5ad", "de_test.h5ad", "id_map.csv")
    candidates = [Path(os.environ["OPENPERT_OP3_DATA"])] if os.environ.get("OPENPERT_OP3_DATA") else []
    # Where the task's data manifest declares them: the shared folder or the store hold them there.
    candidates += [folder / "op3" / "openproblems" / "neurips-2023-data" for folder in (shared_data_dir(ROOT), default_store_dir())]
    for folder in candidates:
        if all((folder / n).is_file() for n in names):
            return folder, ""
    where = ", ".join(str(c) for c in candidates) or "no data folder"
    return None, (f"Open Problems' real de_train.h5ad, de_test.h5ad and id_map.csv (neurips-2023-data) are not at "
                  f"{where}: set OPENPERT_OP3_DATA to a folder holding them")


OP3_FOLDER, OP3_MISSING = _op3_folder()


@needs_published
@pytest.mark.skipif(OP3_FOLDER is None, reason=OP3_MISSING or "present")
def test_deterministic_controls_equal_open_problems_published_values(tmp_path):
    from openpert.config.task import Task
    from openpert.config.viash import read_config
    from openpert.engines.benchmark import run_benchmark
    from openpert.run.component import run_component

    task = Task(TASK)
    dataset = tmp_path / "input" / "neurips-2023-data"
    outputs = {f"output_{fid.removeprefix('file_')}": dataset / task.format_filename(fid) for fid in task.dataset_formats}
    loader = read_config(TASK / "datasets" / "op3_public" / "config.vsh.yaml")
    made = run_component(loader, {"source": "openproblems", "input_de_train": OP3_FOLDER / "de_train.h5ad",
                                  "input_de_test": OP3_FOLDER / "de_test.h5ad", "input_id_map": OP3_FOLDER / "id_map.csv",
                                  **{k: str(v) for k, v in outputs.items()}}, work_dir=tmp_path / "make")
    assert made.succeeded, made.log.read_text()
    controls = ["ground_truth", *PUBLISHED_RMSE]
    results = run_benchmark(task, tmp_path / "run", input_dir=tmp_path / "input", methods=[], controls=controls,
                            progress=False)
    rows = {(r["method_id"], r["metric_id"]): r for r in results["reproduction"]["rows"] if r["method_id"] in controls}
    assert len(rows) == 25
    for method, rmse in PUBLISHED_RMSE.items():
        assert rows[(method, "mean_rowwise_rmse")]["published"] == rmse
    not_reproduced = {k: (r["published"], r["measured"]) for k, r in rows.items() if r["status"] != "reproduced"}
    assert not not_reproduced
