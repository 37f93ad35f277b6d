import sys

## VIASH START
par = {
    "de_train": "resources_test/perturbation_prediction/op3_synthetic/de_train.h5ad",
    "de_test": "resources_test/perturbation_prediction/op3_synthetic/de_test.h5ad",
    "id_map": "resources_test/perturbation_prediction/op3_synthetic/id_map.csv",
    "layer": "clipped_sign_log10_pval",
    "output": "prediction.h5ad",
}
meta = {"name": "de_count_prior", "resources_dir": "src/perturbation_prediction"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_prediction_lib.adversarial import de_count_prior  # noqa: E402
from perturbation_prediction_lib.de_files import read_de, read_id_map, row_keys, write_prediction  # noqa: E402

# Each row from DE counts alone: how often each gene is DE (signed), how many genes the compound changes.
de_train, values = read_de(par["de_train"], par["layer"])
_, is_de = read_de(par["de_train"], "is_de")
id_map = read_id_map(par["id_map"])
pred = de_count_prior(row_keys(de_train.obs)["sm_name"].to_numpy(), values, is_de, id_map["sm_name"].astype(str).to_numpy())
write_prediction(pred, id_map, de_train.var_names, de_train.uns["dataset_id"], meta["name"], par["output"])
