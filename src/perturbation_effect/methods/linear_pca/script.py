import sys

import anndata as ad

## VIASH START
par = {
    "input_train": "resources_test/perturbation_effect/synthetic_simulation/train.h5ad",
    "input_test": "resources_test/perturbation_effect/synthetic_simulation/test.h5ad",
    "output": "prediction.h5ad", "n_components": 10, "ridge": 0.1, "pca_convention": "authors", "lsft_fraction": None,
}
meta = {"resources_dir": "src/perturbation_effect", "name": "linear_pca"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_effect_lib import lsft, prediction_files  # noqa: E402

train = ad.read_h5ad(par["input_train"])
test = ad.read_h5ad(par["input_test"])

# A: gene scores of the top principal components of the training conditions (see --pca_convention); B: each
# perturbation's target-gene rows of A. Both are recomputed on the neighbours in every LSFT refit.

result = lsft.predict_test_perturbations(
    prediction_files.training_profiles(train), train.obs_names, test.obs_names, train.var_names,
    gene_embedding="pca", pert_embedding="pca", n_components=par["n_components"], ridge=par["ridge"],
    lsft_fraction=prediction_files.lsft_fraction(train, par["lsft_fraction"]),
    pca_convention=par["pca_convention"], control=train.var["control_mean"].to_numpy(),
)
prediction_files.write_prediction(par["output"], result.predictions, obs=result.hardness, var=train.var[[]],
                                  dataset_id=test.uns["dataset_id"], method_id=meta["name"],
                                  uns=prediction_files.fit_summary(result.excluded, par["pca_convention"]))
