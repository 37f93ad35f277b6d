import logging
import sys

## VIASH START
par = {
    "source": "kaggle",
    "input_de_train": None,
    "input_de_test": None,
    "input_de_train_parquet": "resources_test/perturbation_prediction/public_formats/kaggle_de_train.parquet",
    "input_test_values": None,
    "input_id_map": "resources_test/perturbation_prediction/public_formats/kaggle_id_map.csv",
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

# The loader reads given files only (a benchmark's data store fetches them before the job).
needed = (["input_de_train", "input_de_test", "input_id_map"] if par["source"] == "openproblems"
          else ["input_de_train_parquet", "input_id_map"])
missing = [f"--{name}" for name in needed if not par[name]]
if missing:
    sys.exit(f"op3_public --source {par['source']}: {', '.join(missing)} not given; this source reads "
             + ", ".join(f"--{name}" for name in needed))

if par["source"] == "openproblems":
    de_train, de_test, id_map = public_data.load_openproblems(
        par["input_de_train"], par["input_de_test"], par["input_id_map"],
        dataset_uns=public_data.openproblems_uns(par["dataset_id"]))
else:
    # The competition's files. Their test rows have no published values: unless given, rows of
    # the held-out cell types become the test rows.
    held_out = None if par["input_test_values"] else (
        f"{par['holdout_cell_types']} of {par['holdout_fraction']:.0%} of the compounds that have them (seed {par['seed']})")
    de_train, de_test, id_map = public_data.load_kaggle(
        par["input_de_train_parquet"], par["input_id_map"], test_values_path=par["input_test_values"],
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
