import anndata as ad

## VIASH START
par = {
    "input_train": "resources_test/perturbation_effect/synthetic_simulation/train.h5ad",
    "input_test": "resources_test/perturbation_effect/synthetic_simulation/test.h5ad",
    "input_solution": "resources_test/perturbation_effect/synthetic_simulation/solution.h5ad",
    "output": "prediction.h5ad",
}
meta = {"name": "ground_truth"}
## VIASH END

test = ad.read_h5ad(par["input_test"])
solution = ad.read_h5ad(par["input_solution"])[test.obs_names]
uns = {"dataset_id": test.uns["dataset_id"], "method_id": meta["name"]}
ad.AnnData(obs=test.obs[[]], var=solution.var[[]], layers={"prediction": solution.layers["expression"]}, uns=uns).write_h5ad(par["output"], compression="gzip")
