from openpert import linear_model

## VIASH START
par = {
    "input_train": "resources_test/perturbation_effect/synthetic_simulation/train.h5ad",
    "input_test": "resources_test/perturbation_effect/synthetic_simulation/test.h5ad",
    "output": "prediction.h5ad", "n_components": 10, "ridge": 0.1, "lsft_fraction": None,
}
meta = {"name": "linear_go"}
## VIASH END

linear_model.run_component(par, meta["name"], gene_embedding="pca", pert_embedding="go_bp")
