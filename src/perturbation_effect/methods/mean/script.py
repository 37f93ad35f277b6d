import anndata as ad

from openpert import linear_model

## VIASH START
par = {
    "input_train": "resources_test/perturbation_effect/synthetic_simulation/train.h5ad",
    "input_test": "resources_test/perturbation_effect/synthetic_simulation/test.h5ad",
    "output": "prediction.h5ad",
}
meta = {"name": "mean"}
## VIASH END

train = ad.read_h5ad(par["input_train"])
test = ad.read_h5ad(par["input_test"])
prediction = linear_model.mean_prediction(train.X, test.n_obs)
uns = {"dataset_id": test.uns["dataset_id"], "method_id": meta["name"]}
ad.AnnData(obs=test.obs[[]], var=train.var[[]], layers={"prediction": prediction}, uns=uns).write_h5ad(par["output"], compression="gzip")
