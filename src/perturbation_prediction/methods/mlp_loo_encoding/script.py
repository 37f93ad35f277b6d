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
meta = {"name": "mlp_loo_encoding", "resources_dir": "src/perturbation_prediction/utils", "cpus": None}
## VIASH END

sys.path.append(meta["resources_dir"])
import op3_utils as u  # noqa: E402

# Leave-one-out encoded features; the networks predict the targets' leading SVD components.
problem = u.encoded_problem(par["de_train"], par["layer"], par["id_map"], par["n_components"], par["n_targets"])
x_tr, x_q, targets = problem.x_train, problem.x_query, problem.targets
preds = []
for s in range(par["n_seeds"]):
    predict = u.train_mlp(x_tr, targets, hidden=par["hidden"], layers=par["layers"], dropout=par["dropout"],
                          epochs=par["epochs"], lr=par["lr"], weight_decay=par["weight_decay"],
                          seed=par["seed"] + s, threads=meta.get("cpus"))
    preds.append(predict(x_q))
pred = problem.to_genes(np.mean(preds, axis=0))
print(f"MLP: {x_tr.shape[1]} features, {len(problem.train)} training rows, {par['n_seeds']} seeds")
u.write_prediction(pred, problem.id_map, problem.de_train.var_names, problem.de_train.uns["dataset_id"], meta["name"],
                  par["output"])
