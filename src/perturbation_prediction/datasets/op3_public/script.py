import logging
import sys
from pathlib import Path

## VIASH START
par = {
    "source": "kaggle",
    "input_de_train": None,
    "input_de_test": None,
    "input_de_train_parquet": "resources_test/perturbation_prediction/public_formats/kaggle_de_train.parquet",
    "input_test_values": None,
    "input_id_map": "resources_test/perturbation_prediction/public_formats/kaggle_id_map.csv",
    "url_base": "",
    "holdout_cell_types": "B cells,Myeloid cells",
    "holdout_fraction": 0.5,
    "seed": 0,
    "dataset_id": "",
    "output_de_train": "de_train.h5ad",
    "output_de_test": "de_test.h5ad",
    "output_id_map": "id_map.csv",
    "output_de_test_half": "de_test_half.h5ad",
}
meta = {"name": "op3_public", "resources_dir": "src/perturbation_prediction", "temp_dir": "/tmp"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_prediction_lib import public_data  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
download_dir = Path(meta.get("temp_dir") or ".") / "downloads"

if par["source"] == "openproblems":
    # Open Problems' DE files, from its public bucket when not given.
    files = public_data.fetch_missing({"de_train.h5ad": par["input_de_train"], "de_test.h5ad": par["input_de_test"],
                                       "id_map.csv": par["input_id_map"]},
                                      par["url_base"] or public_data.OPENPROBLEMS_URL, download_dir)
    de_train, de_test, id_map = public_data.load_openproblems(
        files["de_train.h5ad"], files["de_test.h5ad"], files["id_map.csv"],
        dataset_uns=public_data.openproblems_uns(par["dataset_id"]))
else:
    # The competition's files (a Kaggle account is needed to download them). Their test rows have no
    # published values: unless given, rows of the held-out cell types become the test rows.
    files = public_data.fetch_missing({"de_train.parquet": par["input_de_train_parquet"], "id_map.csv": par["input_id_map"]},
                                      par["url_base"] or public_data.KAGGLE_URL, download_dir, auth=public_data.kaggle_auth())
    held_out = None if par["input_test_values"] else (
        f"{par['holdout_cell_types']} of {par['holdout_fraction']:.0%} of the compounds that have them (seed {par['seed']})")
    de_train, de_test, id_map = public_data.load_kaggle(
        files["de_train.parquet"], files["id_map.csv"], test_values_path=par["input_test_values"],
        holdout_cell_types=tuple(s.strip() for s in par["holdout_cell_types"].split(",") if s.strip()),
        holdout_fraction=par["holdout_fraction"], seed=par["seed"],
        dataset_uns=public_data.kaggle_uns(par["dataset_id"], held_out))

print(f"de_train {de_train.shape}, de_test {de_test.shape}, {len(id_map)} test rows")
de_train.write_h5ad(par["output_de_train"], compression="gzip")
de_test.write_h5ad(par["output_de_test"], compression="gzip")
id_map.to_csv(par["output_id_map"], index=False)
# The published files hold no single cells, so there is no half-cell DE: the ceiling control reads why.
public_data.no_half_cells(de_test, "the published OP3 files hold no single cells to split in half: "
                                   "no half-cell ceiling for this dataset").write_h5ad(par["output_de_test_half"])
