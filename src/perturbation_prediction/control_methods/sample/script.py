import sys

import numpy as np

## VIASH START
par = {
    "de_train": "resources_test/perturbation_prediction/op3_synthetic/de_train.h5ad",
    "de_test": "resources_test/perturbation_prediction/op3_synthetic/de_test.h5ad",
    "id_map": "resources_test/perturbation_prediction/op3_synthetic/id_map.csv",
    "layer": "clipped_sign_log10_pval",
    "output": "prediction.h5ad", "seed": 0,
}
meta = {"name": "sample", "resources_dir": "src/perturbation_prediction"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_prediction_lib.de_files import read_de, read_id_map, write_prediction  # noqa: E402

# Every value drawn from the same gene's values in a random training row.
de_train, values = read_de(par["de_train"], par["layer"])
id_map = read_id_map(par["id_map"])
rng = np.random.default_rng(par["seed"])
rows = rng.integers(0, values.shape[0], size=(len(id_map), values.shape[1]))
pred = np.take_along_axis(values, rows, axis=0)
write_prediction(pred, id_map, de_train.var_names, de_train.uns["dataset_id"], meta["name"], par["output"])
