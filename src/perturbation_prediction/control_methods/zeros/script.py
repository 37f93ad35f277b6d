import sys

import anndata as ad
import numpy as np

## VIASH START
par = {
    "de_train": "resources_test/perturbation_prediction/op3_synthetic/de_train.h5ad",
    "de_test": "resources_test/perturbation_prediction/op3_synthetic/de_test.h5ad",
    "id_map": "resources_test/perturbation_prediction/op3_synthetic/id_map.csv",
    "layer": "clipped_sign_log10_pval",
    "output": "prediction.h5ad",
}
meta = {"name": "zeros", "resources_dir": "src/perturbation_prediction"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_prediction_lib.de_files import read_id_map, write_prediction  # noqa: E402

# No effect anywhere.
de_train = ad.read_h5ad(par["de_train"], backed="r")
id_map = read_id_map(par["id_map"])
pred = np.zeros((len(id_map), de_train.n_vars))
write_prediction(pred, id_map, de_train.var_names, de_train.uns["dataset_id"], meta["name"], par["output"])
