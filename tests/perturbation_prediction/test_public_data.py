"""perturbation_prediction_lib.public_data (and the op3_public component), against a local HTTP server on 127.0.0.1.

The server serves synthetic files in the published layouts (Open Problems h5ad, Kaggle parquet
zipped as the Kaggle API serves it, behind basic authentication); nothing is downloaded from the
internet.
"""

from __future__ import annotations

import base64
import http.server
import io
import threading
import zipfile
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from perturbation_prediction_lib import public_data as pdata

from openpert.config.viash import find_project_root, read_config
from openpert.run.component import run_component

ROOT = find_project_root(Path(__file__).resolve())
COMPONENT = ROOT / "src" / "perturbation_prediction" / "datasets" / "op3_public"
DATA = ROOT / "resources_test" / "perturbation_prediction" / "op3_synthetic"

USER, KEY = "someone", "s3cret"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Files in the published layouts, and a server for them: (base URL, folder, originals)."""
    root = tmp_path_factory.mktemp("www")
    (root / "op").mkdir()
    (root / "kaggle").mkdir()
    de_train = ad.read_h5ad(DATA / "de_train.h5ad")
    de_test = ad.read_h5ad(DATA / "de_test.h5ad")
    id_map = pd.read_csv(DATA / "id_map.csv")
    # Open Problems: de_test rows in another order than id_map, id_map columns as OP writes them.
    shuffled = de_test[np.random.default_rng(0).permutation(de_test.n_obs)].copy()
    de_train.write_h5ad(root / "op" / "de_train.h5ad")
    shuffled.write_h5ad(root / "op" / "de_test.h5ad")
    id_map[["id", "sm_name", "cell_type"]].to_csv(root / "op" / "id_map.csv", index=False)
    # Kaggle: the parquet zipped, as the API serves large files.
    table = pdata.to_kaggle_table(de_train)
    buf = io.BytesIO()
    table.to_parquet(buf, index=False)
    with zipfile.ZipFile(root / "kaggle" / "de_train.parquet", "w") as zf:
        zf.writestr("de_train.parquet", buf.getvalue())
    id_map.to_csv(root / "kaggle" / "id_map.csv", index=False)

    expected = "Basic " + base64.b64encode(f"{USER}:{KEY}".encode()).decode()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def do_GET(self):  # noqa: N802 - http.server's naming
            if self.path.startswith("/kaggle/") and self.headers.get("Authorization") != expected:
                self.send_error(401, "Unauthorized")
                return
            super().do_GET()

        def log_message(self, *args):  # keep test output quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root, (de_train, de_test, id_map, table)
    server.shutdown()


def test_openproblems_download_and_load_as_a_component(served, tmp_path):
    base, _, (de_train, de_test, id_map, _) = served
    config = read_config(COMPONENT / "config.vsh.yaml")
    out = {name: tmp_path / "out" / f for name, f in
           [("output_de_train", "de_train.h5ad"), ("output_de_test", "de_test.h5ad"), ("output_id_map", "id_map.csv"),
            ("output_de_test_half", "de_test_half.h5ad")]}
    result = run_component(config, {"source": "openproblems", "url_base": f"{base}/op", **{k: str(v) for k, v in out.items()}},
                           work_dir=tmp_path / "work")
    assert result.succeeded, result.log.read_text()
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


def test_kaggle_download_with_credentials_and_holdout(served, tmp_path, monkeypatch):
    base, _, (de_train, _, _, table) = served
    monkeypatch.setenv("KAGGLE_USERNAME", USER)
    monkeypatch.setenv("KAGGLE_KEY", KEY)
    files = pdata.fetch(f"{base}/kaggle", pdata.KAGGLE_FILES, tmp_path, auth=pdata.kaggle_auth())
    pd.testing.assert_frame_equal(pd.read_parquet(files["de_train.parquet"]), table)  # unzipped
    tr, te, idm = pdata.load_kaggle(files["de_train.parquet"], files["id_map.csv"], seed=1)
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
    _, root, (de_train, de_test, id_map, table) = served
    test_table = pdata.to_kaggle_table(de_test).iloc[::-1]
    test_table.to_parquet(tmp_path / "test.parquet", index=False)
    table.to_parquet(tmp_path / "train.parquet", index=False)  # the served copy is zipped
    tr, te, idm = pdata.load_kaggle(tmp_path / "train.parquet", root / "kaggle" / "id_map.csv",
                                    test_values_path=tmp_path / "test.parquet")
    assert tr.n_obs == len(table)
    assert list(te.obs["sm_name"]) == list(id_map["sm_name"])
    np.testing.assert_allclose(te.layers["sign_log10_pval"], de_test.layers["sign_log10_pval"])


def test_download_errors_name_the_url(served, tmp_path, monkeypatch):
    base, _, _ = served
    monkeypatch.delenv("KAGGLE_USERNAME", raising=False)
    monkeypatch.delenv("KAGGLE_KEY", raising=False)
    with pytest.raises(RuntimeError, match=r"/kaggle/id_map.csv: download failed: HTTP 401.*KAGGLE_USERNAME"):
        pdata.download(f"{base}/kaggle/id_map.csv", tmp_path / "id_map.csv", auth=pdata.kaggle_auth())
    with pytest.raises(RuntimeError, match=r"/op/missing.h5ad: download failed: HTTP 404"):
        pdata.download(f"{base}/op/missing.h5ad", tmp_path / "missing.h5ad")
    assert not any(tmp_path.iterdir())  # nothing half-written is left behind
    with pytest.raises(RuntimeError, match="download failed"):
        pdata.download("http://127.0.0.1:9/none", tmp_path / "x", timeout=5)


def test_openproblems_loader_rejects_mismatched_files(served, tmp_path):
    _, root, (_, de_test, id_map, _) = served
    bad_map = id_map.copy()
    bad_map.loc[0, "sm_name"] = "Not A Compound"
    bad_map.to_csv(tmp_path / "id_map.csv", index=False)
    with pytest.raises(ValueError, match=r"id_map.csv: 1 rows are not in .*de_test.h5ad"):
        pdata.load_openproblems(root / "op" / "de_train.h5ad", root / "op" / "de_test.h5ad", tmp_path / "id_map.csv")


def test_fetch_missing_downloads_only_what_is_not_given(served, tmp_path):
    base, root, _ = served
    files = pdata.fetch_missing({"de_train.h5ad": root / "op" / "de_train.h5ad", "id_map.csv": None}, f"{base}/op", tmp_path)
    assert files == {"de_train.h5ad": root / "op" / "de_train.h5ad", "id_map.csv": tmp_path / "id_map.csv"}
    assert [p.name for p in tmp_path.iterdir()] == ["id_map.csv"]
    assert pdata.fetch_missing({"id_map.csv": str(root / "op" / "id_map.csv")}, "http://127.0.0.1:9", tmp_path / "none") == {
        "id_map.csv": root / "op" / "id_map.csv"}  # nothing to download: no request is made


def test_dataset_metadata():
    assert pdata.openproblems_uns()["dataset_id"] == "neurips-2023-data"
    assert pdata.openproblems_uns("mine")["dataset_id"] == "mine"
    given = pdata.kaggle_uns()
    assert given["dataset_id"] == "neurips-2023-kaggle"
    assert given["dataset_description"] == "The competition's de_train.parquet; its test rows' values were given."
    held = pdata.kaggle_uns("k", "B cells of 50% of the compounds that have them (seed 0)")
    assert held["dataset_description"].endswith("held-out rows: B cells of 50% of the compounds that have them (seed 0).")
