"""perturbation_prediction_lib.public_data and the op3_public component: the published layouts as the task's files.

The Open Problems files reach the loader through the data store, as in a benchmark: served by a
mirror on 127.0.0.1 at their store paths (synthetic files in the published layout, beside copies
of the shared data the dataset also reads), fetched before the job, and read by a job without
network. Nothing is downloaded from the internet.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from perturbation_prediction_lib import public_data as pdata
from sandbox_marks import needs_sandbox
from tooling.data_mirror import DataMirrorServer

from openpert.config.project import shared_data_dir
from openpert.config.task import Task
from openpert.config.viash import find_project_root, read_config
from openpert.data.fetching import Sources
from openpert.data.manifest import task_manifest
from openpert.data.store import DataStore
from openpert.engines.plan import dataset_stage, label_resources
from openpert.run.component import run_component

ROOT = find_project_root(Path(__file__).resolve())
TASK = ROOT / "src" / "perturbation_prediction"
COMPONENT = TASK / "datasets" / "op3_public"
DATA = ROOT / "resources_test" / "perturbation_prediction" / "op3_synthetic"
OP_FOLDER = "op3/openproblems/neurips-2023-data"
OUTPUTS = [("output_de_train", "de_train.h5ad"), ("output_de_test", "de_test.h5ad"), ("output_id_map", "id_map.csv"),
           ("output_de_test_half", "de_test_half.h5ad")]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Files in the published layouts: (folder, originals). Open Problems' at their store paths."""
    root = tmp_path_factory.mktemp("published")
    (root / OP_FOLDER).mkdir(parents=True)
    (root / "kaggle").mkdir()
    de_train = ad.read_h5ad(DATA / "de_train.h5ad")
    de_test = ad.read_h5ad(DATA / "de_test.h5ad")
    id_map = pd.read_csv(DATA / "id_map.csv")
    # Open Problems: de_test rows in another order than id_map, id_map columns as OP writes them.
    shuffled = de_test[np.random.default_rng(0).permutation(de_test.n_obs)].copy()
    de_train.write_h5ad(root / OP_FOLDER / "de_train.h5ad")
    shuffled.write_h5ad(root / OP_FOLDER / "de_test.h5ad")
    id_map[["id", "sm_name", "cell_type"]].to_csv(root / OP_FOLDER / "id_map.csv", index=False)
    table = pdata.to_kaggle_table(de_train)
    table.to_parquet(root / "kaggle" / "de_train.parquet", index=False)
    id_map.to_csv(root / "kaggle" / "id_map.csv", index=False)
    return root, (de_train, de_test, id_map, table)


def _outputs(folder: Path) -> dict[str, Path]:
    return {name: folder / f for name, f in OUTPUTS}


def _check_openproblems_outputs(out: dict[str, Path], de_train, de_test, id_map) -> None:
    got_test = ad.read_h5ad(out["output_de_test"])
    got_map = pd.read_csv(out["output_id_map"])
    assert list(got_map.columns) == ["id", "cell_type", "sm_name"]
    # Rows back in id_map order, values unchanged.
    assert list(got_test.obs["sm_name"]) == list(id_map["sm_name"])
    np.testing.assert_array_equal(got_test.layers["clipped_sign_log10_pval"], de_test.layers["clipped_sign_log10_pval"])
    assert got_test.uns["dataset_id"] == "neurips-2023-data"
    assert list(ad.read_h5ad(out["output_de_train"]).var_names) == list(de_train.var_names)
    # No single cells, no half-cell ceiling: an empty file that says why.
    half = ad.read_h5ad(out["output_de_test_half"])
    assert half.n_obs == 0 and list(half.var_names) == list(got_test.var_names)
    assert "no single cells" in half.uns["half_cells_unavailable"] and half.uns["dataset_id"] == "neurips-2023-data"


@pytest.mark.skipif(not shared_data_dir(ROOT).is_dir(), reason=f"needs the shared data folder {shared_data_dir(ROOT)}")
@needs_sandbox()
def test_the_store_fetches_the_openproblems_files_and_the_loader_reads_them_without_network(served, tmp_path):
    folder, (de_train, de_test, id_map, _) = served
    task = Task(TASK)
    # The mirror holds every file the dataset reads: the published three and the shared data's.
    mirror = tmp_path / "mirror"
    wanted = [f for f in task_manifest(TASK) if f.read_by("neurips-2023-data")]
    assert {f.path for f in wanted if not f.pinned} == {f"{OP_FOLDER}/{n}" for n in ("de_train.h5ad", "de_test.h5ad", "id_map.csv")}
    for f in wanted:
        source = folder / f.path if f.path.startswith(OP_FOLDER) else shared_data_dir(ROOT) / f.path
        (mirror / f.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, mirror / f.path)
    store = DataStore(tmp_path / "store")
    with DataMirrorServer(mirror) as server:
        (job,) = dataset_stage(task, tmp_path / "run", label_resources(ROOT), ["neurips-2023-data"], store=store,
                               sources=Sources(mirror=server.base_url), stream=None)
        assert sum(server.requests.values()) == len(wanted)
    # Unpinned: the first fetch recorded what it saw, which later fetches must match.
    assert store.observed(f"{OP_FOLDER}/de_test.h5ad")[1] == (folder / OP_FOLDER / "de_test.h5ad").stat().st_size
    assert job.params["source"] == "openproblems" and job.params["dataset_id"] == "neurips-2023-data"
    for name in ("input_de_train", "input_de_test", "input_id_map"):
        assert job.inputs[name].is_relative_to(store.meta / "views"), (name, job.inputs[name])
    out = _outputs(tmp_path / "out")
    result = run_component(job.config, {**job.params, **job.inputs, **out}, work_dir=tmp_path / "work", sandbox=True)
    assert result.succeeded, result.log.read_text()
    _check_openproblems_outputs(out, de_train, de_test, id_map)


def test_a_source_without_its_files_fails_naming_them(tmp_path):
    result = run_component(read_config(COMPONENT / "config.vsh.yaml"),
                           {"source": "openproblems", **{k: str(v) for k, v in _outputs(tmp_path / "out").items()}},
                           work_dir=tmp_path / "work", sandbox=False)
    assert not result.succeeded
    assert ("op3_public --source openproblems: --input_de_train, --input_de_test, --input_id_map not given"
            in result.log.read_text())


def test_kaggle_files_with_a_holdout(served):
    folder, (de_train, _, _, table) = served
    tr, te, idm = pdata.load_kaggle(folder / "kaggle" / "de_train.parquet", folder / "kaggle" / "id_map.csv", seed=1)
    assert set(te.obs["cell_type"]) <= {"B cells", "Myeloid cells"}
    assert not set(zip(tr.obs["cell_type"], tr.obs["sm_name"])) & set(zip(te.obs["cell_type"], te.obs["sm_name"]))
    assert tr.n_obs + te.n_obs == len(table)
    assert list(zip(idm["cell_type"], idm["sm_name"])) == list(zip(te.obs["cell_type"], te.obs["sm_name"]))
    # Held-out values are the original rows; p-value layers follow from sign(logFC) * -log10(p).
    orig = table.set_index(["cell_type", "sm_name"])[list(de_train.var_names)]
    v = orig.loc[list(zip(te.obs["cell_type"], te.obs["sm_name"]))].to_numpy()
    np.testing.assert_allclose(te.layers["sign_log10_pval"], v)
    np.testing.assert_allclose(te.layers["P.Value"], 10.0 ** -np.abs(v))
    np.testing.assert_allclose(te.layers["clipped_sign_log10_pval"], np.clip(v, -4, 4))
    assert "logFC" not in te.layers


def test_kaggle_competition_split_with_test_values(served, tmp_path):
    root, (de_train, de_test, id_map, table) = served
    test_table = pdata.to_kaggle_table(de_test).iloc[::-1]
    test_table.to_parquet(tmp_path / "test.parquet", index=False)
    tr, te, idm = pdata.load_kaggle(root / "kaggle" / "de_train.parquet", root / "kaggle" / "id_map.csv",
                                    test_values_path=tmp_path / "test.parquet")
    assert tr.n_obs == len(table)
    assert list(te.obs["sm_name"]) == list(id_map["sm_name"])
    np.testing.assert_allclose(te.layers["sign_log10_pval"], de_test.layers["sign_log10_pval"])


def test_openproblems_loader_rejects_mismatched_files(served, tmp_path):
    root, (_, de_test, id_map, _) = served
    bad_map = id_map.copy()
    bad_map.loc[0, "sm_name"] = "Not A Compound"
    bad_map.to_csv(tmp_path / "id_map.csv", index=False)
    with pytest.raises(ValueError, match=r"id_map.csv: 1 rows are not in .*de_test.h5ad"):
        pdata.load_openproblems(root / OP_FOLDER / "de_train.h5ad", root / OP_FOLDER / "de_test.h5ad", tmp_path / "id_map.csv")


def test_dataset_metadata():
    assert pdata.openproblems_uns()["dataset_id"] == "neurips-2023-data"
    assert pdata.openproblems_uns("mine")["dataset_id"] == "mine"
    given = pdata.kaggle_uns()
    assert given["dataset_id"] == "neurips-2023-kaggle"
    assert given["dataset_description"] == "The competition's de_train.parquet; its test rows' values were given."
    held = pdata.kaggle_uns("k", "B cells of 50% of the compounds that have them (seed 0)")
    assert held["dataset_description"].endswith("held-out rows: B cells of 50% of the compounds that have them (seed 0).")
