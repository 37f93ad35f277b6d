import anndata as ad
import numpy as np

## VIASH START
par = {
    "input_train": "resources_test/perturbation_effect/synthetic_simulation/train.h5ad",
    "input_test": "resources_test/perturbation_effect/synthetic_simulation/test.h5ad",
    "input_solution": "resources_test/perturbation_effect/synthetic_simulation/solution.h5ad",
    "output": "prediction.h5ad",
}
meta = {"name": "no_change"}
## VIASH END

train = ad.read_h5ad(par["input_train"])
test = ad.read_h5ad(par["input_test"])
prediction = np.tile(train.var["control_mean"].to_numpy(dtype=np.float64), (test.n_obs, 1))
uns = {"dataset_id": test.uns["dataset_id"], "method_id": meta["name"]}
ad.AnnData(obs=test.obs[[]], var=train.var[[]], layers={"prediction": prediction}, uns=uns).write_h5ad(par["output"], compression="gzip")
