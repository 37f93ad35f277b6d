import sys

## VIASH START
par = {
    "de_train": "resources_test/perturbation_prediction/op3_synthetic/de_train.h5ad",
    "de_test": "resources_test/perturbation_prediction/op3_synthetic/de_test.h5ad",
    "id_map": "resources_test/perturbation_prediction/op3_synthetic/id_map.csv",
    "layer": "clipped_sign_log10_pval",
    "output": "prediction.h5ad",
    "factor": 0.5,
}
meta = {"name": "mean_scaled_down", "resources_dir": "src/perturbation_prediction"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_prediction_lib.adversarial import scaled_training_mean  # noqa: E402
from perturbation_prediction_lib.de_files import read_de, read_id_map, write_prediction  # noqa: E402

# Every row: the mean training row, scaled (the correlations of the mean, other errors).
de_train, values = read_de(par["de_train"], par["layer"])
id_map = read_id_map(par["id_map"])
pred = scaled_training_mean(values, len(id_map), par["factor"])
write_prediction(pred, id_map, de_train.var_names, de_train.uns["dataset_id"], meta["name"], par["output"])
