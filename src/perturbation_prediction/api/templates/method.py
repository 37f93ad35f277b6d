import sys

import numpy as np

## VIASH START
par = {
    "de_train": "resources_test/perturbation_prediction/op3_synthetic/de_train.h5ad",
    "id_map": "resources_test/perturbation_prediction/op3_synthetic/id_map.csv",
    "layer": "clipped_sign_log10_pval",
    "output": "prediction.h5ad",
}
meta = {"resources_dir": "src/perturbation_prediction", "name": "{{name}}"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_prediction_lib.de_files import read_de, read_id_map, write_prediction  # noqa: E402

de_train, values = read_de(par["de_train"], par["layer"])
id_map = read_id_map(par["id_map"])
# FILL IN: replace the mean training row with your model's prediction, one row per id_map row
# (its cell type and compound) and one column per gene of de_train.
prediction = np.tile(values.mean(axis=0), (len(id_map), 1))
write_prediction(prediction, id_map, de_train.var_names, de_train.uns["dataset_id"], meta["name"], par["output"])
