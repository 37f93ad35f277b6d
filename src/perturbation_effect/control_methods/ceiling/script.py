import sys

import anndata as ad
import numpy as np

## VIASH START
par = {
    "input_train": "resources_test/perturbation_effect/synthetic_simulation/train.h5ad",
    "input_test": "resources_test/perturbation_effect/synthetic_simulation/test.h5ad",
    "input_solution": "resources_test/perturbation_effect/synthetic_simulation/solution.h5ad",
    "output": "prediction.h5ad",
}
meta = {"resources_dir": "src/perturbation_effect", "name": "ceiling"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_effect_lib import prediction_files  # noqa: E402

train = ad.read_h5ad(par["input_train"])
test = ad.read_h5ad(par["input_test"])
solution = ad.read_h5ad(par["input_solution"])[test.obs_names, train.var_names]
if "expression_half" not in solution.layers:
    raise ValueError(f"{par['input_solution']}: no layers['expression_half'] (the mean of half of each perturbation's cells); "
                     "the dataset was made without single cells, so it has no ceiling")
prediction = np.asarray(solution.layers["expression_half"], dtype=np.float64)
prediction_files.write_prediction(par["output"], prediction, obs=test.obs[[]], var=train.var[[]],
                                  dataset_id=test.uns["dataset_id"], method_id=meta["name"])
