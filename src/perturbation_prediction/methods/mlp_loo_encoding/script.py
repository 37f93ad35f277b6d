import sys

import numpy as np

## VIASH START
par = {
    "de_train": "resources_test/perturbation_prediction/op3_synthetic/de_train.h5ad",
    "id_map": "resources_test/perturbation_prediction/op3_synthetic/id_map.csv",
    "layer": "clipped_sign_log10_pval",
    "n_components": 32,
    "n_targets": 64,
    "hidden": 512,
    "layers": 2,
    "dropout": 0.2,
    "epochs": 150,
    "lr": 0.001,
    "weight_decay": 0.0001,
    "n_seeds": 3,
    "seed": 0,
    "output": "prediction.h5ad",
}
meta = {"name": "mlp_loo_encoding", "resources_dir": "src/perturbation_prediction", "cpus": None}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_prediction_lib.de_files import read_de, read_id_map, row_keys, write_prediction  # noqa: E402
from perturbation_prediction_lib.mlp_regression import encoded_problem, train_mlp  # noqa: E402

de_train, y = read_de(par["de_train"], par["layer"])
id_map = read_id_map(par["id_map"])
# Leave-one-out encoded features; the networks predict the targets' leading SVD components.
problem = encoded_problem(y, row_keys(de_train.obs), row_keys(id_map), n_components=par["n_components"],
                          n_targets=par["n_targets"])
preds = []
for s in range(par["n_seeds"]):
    predict = train_mlp(problem.x_train, problem.targets, hidden=par["hidden"], layers=par["layers"],
                        dropout=par["dropout"], epochs=par["epochs"], lr=par["lr"], weight_decay=par["weight_decay"],
                        seed=par["seed"] + s, threads=meta.get("cpus"))
    preds.append(predict(problem.x_query))
pred = problem.to_genes(np.mean(preds, axis=0))
print(f"MLP: {problem.x_train.shape[1]} features, {de_train.n_obs} training rows, {par['n_seeds']} seeds")
write_prediction(pred, id_map, de_train.var_names, de_train.uns["dataset_id"], meta["name"], par["output"])
