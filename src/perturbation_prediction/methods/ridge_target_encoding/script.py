import sys

import numpy as np
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.preprocessing import StandardScaler

## VIASH START
par = {
    "de_train": "resources_test/perturbation_prediction/op3_synthetic/de_train.h5ad",
    "id_map": "resources_test/perturbation_prediction/op3_synthetic/id_map.csv",
    "layer": "clipped_sign_log10_pval",
    "model": "ridge",
    "alphas": "1,10,100,300,1000,3000,10000,100000",
    "gamma": 0.05,
    "n_components": 30,
    "n_folds": 5,
    "seed": 0,
    "output": "prediction.h5ad",
}
meta = {"name": "ridge_target_encoding", "resources_dir": "src/perturbation_prediction"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_prediction_lib.de_files import read_de, read_id_map, row_keys, write_prediction  # noqa: E402
from perturbation_prediction_lib.svd_compression import svd_basis  # noqa: E402
from perturbation_prediction_lib.target_encoding import one_hot, oof_encoding_features  # noqa: E402

de_train, y = read_de(par["de_train"], par["layer"])
id_map = read_id_map(par["id_map"])
train, query = row_keys(de_train.obs), row_keys(id_map)

# Out-of-fold target encodings in the space of the targets' leading SVD components, plus one-hot compounds.
mean, comps = svd_basis(y, par["n_components"])
x_tr_enc, x_q_enc = oof_encoding_features(train, query, (y - mean) @ comps.T, n_folds=par["n_folds"], seed=par["seed"])
compounds = sorted(set(train["sm_name"]))
x_tr = np.hstack([x_tr_enc, one_hot(train["sm_name"].to_numpy(), compounds)])
x_q = np.hstack([x_q_enc, one_hot(query["sm_name"].to_numpy(), compounds)])
scaler = StandardScaler().fit(x_tr)
x_tr, x_q = scaler.transform(x_tr), scaler.transform(x_q)
alphas = [float(a) for a in par["alphas"].split(",") if a.strip()]
if par["model"] == "ridge":
    # Efficient leave-one-out cross-validation of the penalty (one penalty for all genes).
    model = RidgeCV(alphas=alphas).fit(x_tr, y - mean)
    chosen = model.alpha_
else:
    search = GridSearchCV(KernelRidge(kernel="rbf", gamma=par["gamma"]), {"alpha": alphas},
                          cv=KFold(5, shuffle=True, random_state=par["seed"]), scoring="neg_mean_squared_error")
    model = search.fit(x_tr, y - mean).best_estimator_
    chosen = model.alpha
pred = model.predict(x_q) + mean
print(f"{par['model']}: alpha {chosen:g}, {x_tr.shape[1]} features, {len(train)} training rows, {len(query)} predicted")
write_prediction(pred, id_map, de_train.var_names, de_train.uns["dataset_id"], meta["name"], par["output"])
