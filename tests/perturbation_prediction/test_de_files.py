"""perturbation_prediction_lib.de_files: reading DE layers and id_map, writing and aligning predictions."""

from __future__ import annotations

from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from perturbation_prediction_lib.de_files import (
    aligned_truth_prediction,
    read_de,
    read_half_cell_de,
    read_id_map,
    row_keys,
    write_prediction,
)
from perturbation_prediction_lib.public_data import no_half_cells

DATA = Path(__file__).resolve().parents[2] / "resources_test" / "perturbation_prediction" / "op3_synthetic"
LAYER = "clipped_sign_log10_pval"


@pytest.fixture(scope="module")
def de_test() -> ad.AnnData:
    return ad.read_h5ad(DATA / "de_test.h5ad")


def test_read_de_and_its_errors_name_the_file(tmp_path):
    adata, values = read_de(DATA / "de_train.h5ad", LAYER)
    np.testing.assert_array_equal(values, adata.layers[LAYER])
    assert values.dtype == float
    with pytest.raises(ValueError, match=r"de_train.h5ad: no layer 'nope'"):
        read_de(DATA / "de_train.h5ad", "nope")
    bad = adata.copy()
    bad.layers[LAYER] = values.copy()
    bad.layers[LAYER][0, :2] = np.nan
    bad.write_h5ad(tmp_path / "nan.h5ad")
    with pytest.raises(ValueError, match=r"nan.h5ad: layer 'clipped_sign_log10_pval' has 2 non-finite values"):
        read_de(tmp_path / "nan.h5ad", LAYER)


def test_read_id_map_checks_its_columns(tmp_path):
    id_map = read_id_map(DATA / "id_map.csv")
    assert {"id", "cell_type", "sm_name"} <= set(id_map.columns)
    id_map.drop(columns="sm_name").to_csv(tmp_path / "id_map.csv", index=False)
    with pytest.raises(ValueError, match=r"id_map.csv: id_map lacks the columns \['sm_name'\]"):
        read_id_map(tmp_path / "id_map.csv")


def test_row_keys_are_strings():
    obs = pd.DataFrame({"cell_type": pd.Categorical(["B cells"]), "sm_name": ["x"], "other": [1]}, index=["r"])
    keys = row_keys(obs)
    assert list(keys.columns) == ["cell_type", "sm_name"] and list(keys.index) == [0]
    assert keys.iloc[0].tolist() == ["B cells", "x"]


def test_written_prediction_reads_back_aligned(de_test, tmp_path):
    id_map = read_id_map(DATA / "id_map.csv")
    y = np.asarray(de_test.layers[LAYER])
    write_prediction(y, id_map, de_test.var_names, "d", "m", tmp_path / "p.h5ad")
    pred = ad.read_h5ad(tmp_path / "p.h5ad")
    assert list(pred.obs_names) == [str(i) for i in id_map["id"]] and pred.uns["method_id"] == "m"
    _, _, truth, values = aligned_truth_prediction(DATA / "de_test.h5ad", LAYER, tmp_path / "p.h5ad")
    np.testing.assert_array_equal(values, truth)
    with pytest.raises(ValueError, match="prediction has shape"):
        write_prediction(y[:-1], id_map, de_test.var_names, "d", "m", tmp_path / "short.h5ad")


def test_alignment_by_gene_name_and_row_id(de_test, tmp_path):
    """The metrics read genes by name (de_test's genes) and rows by id."""
    y = np.asarray(de_test.layers[LAYER])
    pred = ad.AnnData(layers={"prediction": y[::-1, ::-1].copy()},
                      obs=pd.DataFrame(index=[str(i) for i in range(de_test.n_obs)][::-1]),
                      var=pd.DataFrame(index=de_test.var_names[::-1]), uns={"method_id": "m"})
    path = tmp_path / "p.h5ad"
    pred.write_h5ad(path)
    _, _, truth, values = aligned_truth_prediction(str(DATA / "de_test.h5ad"), LAYER, str(path))
    np.testing.assert_array_equal(values, truth)
    short = pred[:, pred.var_names[1:]].copy()
    short.write_h5ad(tmp_path / "short.h5ad")
    with pytest.raises(ValueError, match="short.h5ad: lacks 1 genes of de_test"):
        aligned_truth_prediction(str(DATA / "de_test.h5ad"), LAYER, str(tmp_path / "short.h5ad"))
    other_ids = pred.copy()
    other_ids.obs_names = [str(i + 1) for i in range(de_test.n_obs)]
    other_ids.write_h5ad(tmp_path / "ids.h5ad")
    with pytest.raises(ValueError, match=r"ids.h5ad: has \d+ rows with ids .*expected the \d+ ids 0\.\."):
        aligned_truth_prediction(DATA / "de_test.h5ad", LAYER, tmp_path / "ids.h5ad")


def test_read_half_cell_de_as_a_prediction(de_test, tmp_path):
    """The ceiling's input: id_map rows, de_train genes; an empty file fails with its reason."""
    id_map = read_id_map(DATA / "id_map.csv")
    de_train = ad.read_h5ad(DATA / "de_train.h5ad")
    genes = list(de_train.var_names[::-1])
    pred = read_half_cell_de(DATA / "de_test_half.h5ad", LAYER, id_map, genes)
    half = ad.read_h5ad(DATA / "de_test_half.h5ad")
    np.testing.assert_array_equal(pred, half[:, genes].layers[LAYER])
    assert not np.allclose(pred, de_test[:, genes].layers[LAYER])  # another estimate than the truth
    with pytest.raises(ValueError, match=r"de_test_half.h5ad: its \d+ rows are not the \d+ rows of id_map"):
        read_half_cell_de(DATA / "de_test_half.h5ad", LAYER, id_map.iloc[::-1], genes)
    with pytest.raises(ValueError, match=r"lacks 1 genes of de_train"):
        read_half_cell_de(DATA / "de_test_half.h5ad", LAYER, id_map, [*genes, "NOT_A_GENE"])
    no_half_cells(de_test, "no cells here").write_h5ad(tmp_path / "empty.h5ad")
    with pytest.raises(ValueError, match=r"empty.h5ad: no half-cell DE for this dataset: no cells here"):
        read_half_cell_de(tmp_path / "empty.h5ad", LAYER, id_map, genes)
