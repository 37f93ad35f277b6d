import sys

import anndata as ad

## VIASH START
par = {
    "input_train": "resources_test/perturbation_effect/synthetic_simulation/train.h5ad",
    "input_test": "resources_test/perturbation_effect/synthetic_simulation/test.h5ad",
    "output": "prediction.h5ad",
}
meta = {"resources_dir": "src/perturbation_effect", "name": "additive"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_effect_lib import linear_model  # noqa: E402

train = ad.read_h5ad(par["input_train"])
test = ad.read_h5ad(par["input_test"])
prediction = linear_model.additive_prediction(train.X, list(train.obs_names), list(test.obs_names), train.var["control_mean"].to_numpy())
uns = {"dataset_id": test.uns["dataset_id"], "method_id": meta["name"]}
ad.AnnData(obs=test.obs[[]], var=train.var[[]], layers={"prediction": prediction}, uns=uns).write_h5ad(par["output"], compression="gzip")
