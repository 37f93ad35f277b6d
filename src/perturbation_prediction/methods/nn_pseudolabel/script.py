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
meta = {"name": "nn_pseudolabel", "resources_dir": "src/perturbation_prediction", "cpus": None}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_prediction_lib.de_files import read_de, read_id_map, row_keys, write_prediction  # noqa: E402
from perturbation_prediction_lib.mlp_regression import encoded_problem, train_mlp  # noqa: E402

de_train, y = read_de(par["de_train"], par["layer"])
id_map = read_id_map(par["id_map"])
# Leave-one-out encoded features; the networks predict the targets' leading SVD components.
problem = encoded_problem(y, row_keys(de_train.obs), row_keys(id_map), n_components=par["n_components"],
                          n_targets=par["n_targets"])
x_tr, x_q = problem.x_train, problem.x_query


def fit_predict(x, targets, weights, round_no):
    """The test rows predicted by networks of several seeds, averaged."""
    preds = []
    for s in range(par["n_seeds"]):
        predict = train_mlp(x, targets, hidden=par["hidden"], layers=par["layers"], dropout=par["dropout"],
                            epochs=par["epochs"], lr=par["lr"], weight_decay=par["weight_decay"], sample_weight=weights,
                            seed=par["seed"] + 1000 * round_no + s, threads=meta.get("cpus"))
        preds.append(predict(x_q))
    return np.mean(preds, axis=0)


pseudo = fit_predict(x_tr, problem.targets, None, 0)
for r in range(1, par["rounds"] + 1):
    # Retrain from scratch on the training rows plus the current pseudolabels of the test rows.
    x_all = np.vstack([x_tr, x_q])
    y_all = np.vstack([problem.targets, pseudo])
    w_all = np.concatenate([np.ones(len(x_tr)), np.full(len(x_q), par["pseudo_weight"])])
    pseudo = fit_predict(x_all, y_all, w_all, r)
    print(f"round {r}: retrained on {len(x_tr)} training and {len(x_q)} pseudolabelled rows")
write_prediction(problem.to_genes(pseudo), id_map, de_train.var_names, de_train.uns["dataset_id"], meta["name"],
                 par["output"])
