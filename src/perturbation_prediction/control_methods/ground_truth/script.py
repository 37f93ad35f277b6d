import sys

import anndata as ad
import pandas as pd

## VIASH START
par = {
    "de_train": "resources_test/perturbation_prediction/op3_synthetic/de_train.h5ad",
    "de_test": "resources_test/perturbation_prediction/op3_synthetic/de_test.h5ad",
    "id_map": "resources_test/perturbation_prediction/op3_synthetic/id_map.csv",
    "layer": "clipped_sign_log10_pval",
    "output": "prediction.h5ad",
}
meta = {"name": "ground_truth", "resources_dir": "src/perturbation_prediction"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_prediction_lib.de_files import read_de, read_id_map, row_keys, write_prediction  # noqa: E402

# The true values of the test rows, over the genes of de_train: the best possible prediction.
de_train = ad.read_h5ad(par["de_train"], backed="r")
id_map = read_id_map(par["id_map"])
de_test, values = read_de(par["de_test"], par["layer"])
keys = row_keys(de_test.obs)
if not (keys["cell_type"].to_numpy() == id_map["cell_type"].astype(str).to_numpy()).all() or \
        not (keys["sm_name"].to_numpy() == id_map["sm_name"].astype(str).to_numpy()).all():
    raise ValueError(f"{par['de_test']}: rows are not in the order of {par['id_map']}")
genes = list(de_train.var_names)
pred = pd.DataFrame(values, columns=de_test.var_names)[genes].to_numpy()
write_prediction(pred, id_map, genes, de_train.uns["dataset_id"], meta["name"], par["output"])
