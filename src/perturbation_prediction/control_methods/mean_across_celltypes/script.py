import sys

## VIASH START
par = {
    "de_train": "resources_test/perturbation_prediction/op3_synthetic/de_train.h5ad",
    "de_test": "resources_test/perturbation_prediction/op3_synthetic/de_test.h5ad",
    "id_map": "resources_test/perturbation_prediction/op3_synthetic/id_map.csv",
    "layer": "clipped_sign_log10_pval",
    "output": "prediction.h5ad",
}
meta = {"name": "mean_across_celltypes", "resources_dir": "src/perturbation_prediction"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_prediction_lib.de_files import read_de, read_id_map, row_keys, write_prediction  # noqa: E402
from perturbation_prediction_lib.target_encoding import target_encode  # noqa: E402

# Each row: the mean training response of its cell type (over all compounds); unseen: the overall mean.
de_train, values = read_de(par["de_train"], par["layer"])
id_map = read_id_map(par["id_map"])
keys = row_keys(de_train.obs)
pred = target_encode(keys["cell_type"].to_numpy(), values, id_map["cell_type"].astype(str).to_numpy(), values.mean(axis=0))
write_prediction(pred, id_map, de_train.var_names, de_train.uns["dataset_id"], meta["name"], par["output"])
