import sys

## VIASH START
par = {
    "de_train": "resources_test/perturbation_prediction/op3_synthetic/de_train.h5ad",
    "de_test": "resources_test/perturbation_prediction/op3_synthetic/de_test.h5ad",
    "id_map": "resources_test/perturbation_prediction/op3_synthetic/id_map.csv",
    "layer": "clipped_sign_log10_pval",
    "output": "prediction.h5ad",
}
meta = {"name": "mean_across_celltypes", "resources_dir": "src/perturbation_prediction/utils"}
## VIASH END

sys.path.append(meta["resources_dir"])
import op3_utils as u  # noqa: E402

de_train, values = u.read_de(par["de_train"], par["layer"])
id_map = u.read_id_map(par["id_map"])
keys = u.key_of(de_train.obs)
pred = u.target_encode(keys["cell_type"].to_numpy(), values, id_map["cell_type"].astype(str).to_numpy(), values.mean(axis=0))
u.write_prediction(pred, id_map, de_train.var_names, de_train.uns["dataset_id"], meta["name"], par["output"])
