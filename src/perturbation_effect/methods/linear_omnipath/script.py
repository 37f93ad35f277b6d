import sys

## VIASH START
par = {
    "input_train": "resources_test/perturbation_effect/synthetic_simulation/train.h5ad",
    "input_test": "resources_test/perturbation_effect/synthetic_simulation/test.h5ad",
    "output": "prediction.h5ad", "n_components": 10, "ridge": 0.1, "lsft_fraction": None,
}
meta = {"resources_dir": "src/perturbation_effect", "name": "linear_omnipath"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_effect_lib import linear_model  # noqa: E402

linear_model.run_component(par, meta["name"], gene_embedding="pca", pert_embedding="omnipath")
