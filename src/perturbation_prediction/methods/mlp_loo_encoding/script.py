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

de_train, y = u.read_de(par["de_train"], par["layer"])
id_map = u.read_id_map(par["id_map"])
train, query = u.key_of(de_train.obs), u.key_of(id_map)

mean, comps = u.svd_basis(y, par["n_components"])
x_tr, x_q = u.encoding_features(train, query, (y - mean) @ comps.T, mode="loo")
# The network predicts the targets' leading SVD components, mapped back to genes.
_, basis = u.svd_basis(y, par["n_targets"])
targets = (y - mean) @ basis.T
preds = []
for s in range(par["n_seeds"]):
    predict = u.train_mlp(x_tr, targets, hidden=par["hidden"], layers=par["layers"], dropout=par["dropout"],
                          epochs=par["epochs"], lr=par["lr"], weight_decay=par["weight_decay"],
                          seed=par["seed"] + s, threads=meta.get("cpus"))
    preds.append(predict(x_q))
pred = mean + np.mean(preds, axis=0) @ basis
print(f"MLP: {x_tr.shape[1]} features, {len(train)} training rows, {par['n_seeds']} seeds")
u.write_prediction(pred, id_map, de_train.var_names, de_train.uns["dataset_id"], meta["name"], par["output"])
