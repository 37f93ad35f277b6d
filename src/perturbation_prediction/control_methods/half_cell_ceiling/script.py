import sys

import anndata as ad

## VIASH START
par = {
    "de_train": "resources_test/perturbation_prediction/op3_synthetic/de_train.h5ad",
    "de_test": "resources_test/perturbation_prediction/op3_synthetic/de_test.h5ad",
    "id_map": "resources_test/perturbation_prediction/op3_synthetic/id_map.csv",
    "layer": "clipped_sign_log10_pval",
    "output": "prediction.h5ad",
    "de_test_half": "resources_test/perturbation_prediction/op3_synthetic/de_test_half.h5ad",
}
meta = {"name": "half_cell_ceiling", "resources_dir": "src/perturbation_prediction"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_prediction_lib.de_files import read_half_cell_de, read_id_map, write_prediction  # noqa: E402

# The test rows' DE from half of every sample's cells: the best the data's own noise allows.
de_train = ad.read_h5ad(par["de_train"], backed="r")
id_map = read_id_map(par["id_map"])
pred = read_half_cell_de(par["de_test_half"], par["layer"], id_map, de_train.var_names)
write_prediction(pred, id_map, de_train.var_names, de_train.uns["dataset_id"], meta["name"], par["output"])
