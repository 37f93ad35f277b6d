"""Components of perturbation_prediction run as jobs: controls, metrics and the prediction format.

The library functions they call are tested in-process, one test file per module of
``perturbation_prediction_lib``; here a few components run end to end.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest

from openpert.config.formats import FormatError
from openpert.config.task import Task
from openpert.config.viash import find_project_root, read_config
from openpert.results.collect import read_score
from openpert.run.component import run_component

ROOT = find_project_root(Path(__file__).resolve())
TASK = Task(ROOT / "src" / "perturbation_prediction")
DATA = ROOT / "resources_test" / "perturbation_prediction" / "op3_synthetic"
FILES = {"file_de_train": DATA / "de_train.h5ad", "file_de_test": DATA / "de_test.h5ad", "file_id_map": DATA / "id_map.csv",
         "file_de_test_half": DATA / "de_test_half.h5ad"}


def run(kind: str, name: str, tmp_path: Path, **args) -> Path:
    config = read_config(TASK.dir / kind / name / "config.vsh.yaml")
    job = tmp_path / f"{name}_{uuid.uuid4().hex[:8]}"
    out = job / f"{name}.h5ad"
    result = run_component(config, {**{k: str(v) for k, v in args.items()}, "output": str(out)},
                           work_dir=job / "work", context={**FILES})
    assert result.succeeded, result.log.read_text()
    return out


@pytest.fixture(scope="module")
def data():
    de_train = ad.read_h5ad(FILES["file_de_train"])
    de_test = ad.read_h5ad(FILES["file_de_test"])
    id_map = pd.read_csv(FILES["file_id_map"])
    return de_train, de_test, id_map


def test_controls_as_jobs_and_their_scores(tmp_path, data):
    """Ground truth scores perfectly through the metric job; sample draws from each gene's values."""
    de_train, de_test, id_map = data
    gt = run("control_methods", "ground_truth", tmp_path, de_train=FILES["file_de_train"], de_test=FILES["file_de_test"],
             id_map=FILES["file_id_map"])
    raw, items, uns = read_score(run("metrics", "mean_rowwise_error", tmp_path, de_test=FILES["file_de_test"], prediction=gt))
    assert raw == {"mean_rowwise_rmse": 0.0, "mean_rowwise_mae": 0.0}
    assert list(items.index) == [str(i) for i in range(de_test.n_obs)] and uns["method_id"] == "ground_truth"
    sample = ad.read_h5ad(run("control_methods", "sample", tmp_path, de_train=FILES["file_de_train"],
                              de_test=FILES["file_de_test"], id_map=FILES["file_id_map"]))
    values = np.asarray(de_train.layers["clipped_sign_log10_pval"])
    pred = sample.layers["prediction"]
    assert pred.shape == (len(id_map), de_train.n_vars)
    assert all(np.isin(pred[:, j], values[:, j]).all() for j in range(de_train.n_vars))


# --- the prediction format -------------------------------------------------------------------------
def _bad_prediction(tmp_path: Path, kind: str) -> Path:
    pred = ad.read_h5ad(DATA / "prediction.h5ad")
    if kind == "nan":
        pred.layers["prediction"] = pred.layers["prediction"].copy()
        pred.layers["prediction"][0, 0] = np.nan
    elif kind == "rows":
        pred = pred[:-1].copy()
    elif kind == "genes":
        pred = pred[:, pred.var_names[:-3]].copy()
    path = tmp_path / f"bad_{kind}.h5ad"
    pred.write_h5ad(path)
    return path


@pytest.mark.parametrize("kind, message", [
    ("nan", r"layers\['prediction'\] has 1 non-finite values \(1 NaN"),
    ("rows", r"n_obs is \d+ but file_id_map has n_rows \d+"),
    ("genes", r"var_names lacks 3 of file_de_train's var_names"),
])
def test_invalid_prediction_is_rejected_naming_the_file(tmp_path, kind, message):
    path = _bad_prediction(tmp_path, kind)
    with pytest.raises(FormatError, match=message) as err:
        TASK.file_formats["file_prediction"].validate(path, FILES)
    assert str(path) in str(err.value)


def test_metric_job_refuses_an_invalid_prediction(tmp_path):
    """The job fails before its script runs, with a reason naming the file and the problem."""
    path = _bad_prediction(tmp_path, "nan")
    config = read_config(TASK.dir / "metrics" / "mean_rowwise_error" / "config.vsh.yaml")
    result = run_component(config, {"de_test": str(FILES["file_de_test"]), "prediction": str(path),
                                    "output": str(tmp_path / "score.h5ad")}, work_dir=tmp_path / "work", context=dict(FILES))
    assert not result.succeeded
    assert "invalid input --prediction" in result.reason and str(path) in result.reason and "NaN" in result.reason


def test_methods_cannot_read_de_test():
    assert TASK.method_formats == {"file_de_train", "file_id_map"}
    assert TASK.prediction_format == "file_prediction"


def test_half_cell_ceiling_lies_between_the_controls(tmp_path):
    """The ceiling scores below the ground truth and far above the zeros control; it reads a solution file."""
    args = dict(de_train=FILES["file_de_train"], de_test=FILES["file_de_test"], id_map=FILES["file_id_map"])
    ceiling = run("control_methods", "half_cell_ceiling", tmp_path, de_test_half=FILES["file_de_test_half"], **args)
    zeros = run("control_methods", "zeros", tmp_path, **args)
    raw = {name: read_score(run("metrics", "mean_rowwise_error", tmp_path, de_test=FILES["file_de_test"], prediction=p))[0]
           for name, p in (("ceiling", ceiling), ("zeros", zeros))}
    assert 0 < raw["ceiling"]["mean_rowwise_rmse"] < 0.8 * raw["zeros"]["mean_rowwise_rmse"]
    assert "file_de_test_half" not in TASK.method_formats


def test_half_cell_ceiling_fails_without_cells(tmp_path):
    """A dataset without single cells has an empty de_test_half: the ceiling job fails with the reason."""
    from perturbation_prediction_lib.public_data import no_half_cells

    empty = tmp_path / "de_test_half.h5ad"
    no_half_cells(ad.read_h5ad(FILES["file_de_test"]), "no single cells in this dataset").write_h5ad(empty)
    config = read_config(TASK.dir / "control_methods" / "half_cell_ceiling" / "config.vsh.yaml")
    result = run_component(config, {"de_train": str(FILES["file_de_train"]), "de_test": str(FILES["file_de_test"]),
                                    "id_map": str(FILES["file_id_map"]), "de_test_half": str(empty),
                                    "output": str(tmp_path / "out.h5ad")},
                           work_dir=tmp_path / "work", context={**FILES, "file_de_test_half": empty})
    assert not result.succeeded
    assert "no half-cell DE for this dataset: no single cells in this dataset" in result.log.read_text()


def test_adversarial_controls_run_and_keep_the_mean_correlations(tmp_path):
    """The scaled means keep the mean-outcome correlations exactly: the row correlations ignore scale."""
    args = dict(de_train=FILES["file_de_train"], de_test=FILES["file_de_test"], id_map=FILES["file_id_map"])
    scores = {}
    for name in ("mean_outcome", "mean_scaled_up", "mean_scaled_down", "sign_only", "de_count_prior"):
        pred = run("control_methods", name, tmp_path, **args)
        scores[name] = read_score(run("metrics", "mean_rowwise_correlation", tmp_path, de_test=FILES["file_de_test"],
                                      prediction=pred))[0]
    for name in ("mean_scaled_up", "mean_scaled_down"):
        assert scores[name] == pytest.approx(scores["mean_outcome"], abs=1e-12)
    assert all(np.isfinite(list(s.values())).all() for s in scores.values())
