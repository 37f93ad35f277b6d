import sys

import anndata as ad

## VIASH START
par = {
    "input_train": "resources_test/perturbation_effect/synthetic_simulation/train.h5ad",
    "input_test": "resources_test/perturbation_effect/synthetic_simulation/test.h5ad",
    "output": "prediction.h5ad",
}
meta = {"resources_dir": "src/perturbation_effect", "name": "{{name}}"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_effect_lib import prediction_files, profile_baselines  # noqa: E402

train = ad.read_h5ad(par["input_train"])
test = ad.read_h5ad(par["input_test"])
# FILL IN: replace the mean training profile with your model's prediction, one row per test
# perturbation (test.obs) and one column per gene (train.var).
prediction = profile_baselines.mean_prediction(train.X, test.n_obs)
prediction_files.write_prediction(par["output"], prediction, obs=test.obs[[]], var=train.var[[]],
                                  dataset_id=test.uns["dataset_id"], method_id=meta["name"])
