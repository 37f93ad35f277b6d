import anndata as ad

from openpert import linear_model

## VIASH START
par = {
    "input_train": "resources_test/perturbation_effect/synthetic_simulation/train.h5ad",
    "input_test": "resources_test/perturbation_effect/synthetic_simulation/test.h5ad",
    "output": "prediction.h5ad", "n_components": 10, "ridge": 0.1, "lsft_fraction": None,
}
meta = {"name": "linear_go"}
## VIASH END

train = ad.read_h5ad(par["input_train"])
test = ad.read_h5ad(par["input_test"])
prediction, hardness = linear_model.predict_task(
    train, test, gene_embedding="pca", pert_embedding="go_bp", n_components=par["n_components"],
    ridge=par["ridge"], lsft_fraction=par["lsft_fraction"],
)
uns = {"dataset_id": test.uns["dataset_id"], "method_id": meta["name"]}
ad.AnnData(obs=hardness, var=train.var[[]], layers={"prediction": prediction}, uns=uns).write_h5ad(par["output"], compression="gzip")
