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
    "rounds": 2,
    "pseudo_weight": 0.5,
    "n_seeds": 2,
    "seed": 0,
    "output": "prediction.h5ad",
}
meta = {"name": "nn_pseudolabel", "resources_dir": "src/perturbation_prediction/utils", "cpus": None}
## VIASH END

sys.path.append(meta["resources_dir"])
import op3_utils as u  # noqa: E402

# Leave-one-out encoded features; the networks predict the targets' leading SVD components.
problem = u.encoded_problem(par["de_train"], par["layer"], par["id_map"], par["n_components"], par["n_targets"])
x_tr, x_q, targets = problem.x_train, problem.x_query, problem.targets


def fit_predict(x, targets, weights, round_no):
    preds = []
    for s in range(par["n_seeds"]):
        predict = u.train_mlp(x, targets, hidden=par["hidden"], layers=par["layers"], dropout=par["dropout"],
                              epochs=par["epochs"], lr=par["lr"], weight_decay=par["weight_decay"], sample_weight=weights,
                              seed=par["seed"] + 1000 * round_no + s, threads=meta.get("cpus"))
        preds.append(predict(x_q))
    return np.mean(preds, axis=0)


pseudo = fit_predict(x_tr, targets, None, 0)
for r in range(1, par["rounds"] + 1):
    # Retrain from scratch on the training rows plus the current pseudolabels of the test rows.
    x_all = np.vstack([x_tr, x_q])
    y_all = np.vstack([targets, pseudo])
    w_all = np.concatenate([np.ones(len(x_tr)), np.full(len(x_q), par["pseudo_weight"])])
    pseudo = fit_predict(x_all, y_all, w_all, r)
    print(f"round {r}: retrained on {len(x_tr)} training and {len(x_q)} pseudolabelled rows")
pred = problem.to_genes(pseudo)
u.write_prediction(pred, problem.id_map, problem.de_train.var_names, problem.de_train.uns["dataset_id"], meta["name"],
                  par["output"])
