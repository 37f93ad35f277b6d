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
meta = {"name": "ridge_target_encoding", "resources_dir": "src/perturbation_prediction/utils"}
## VIASH END

sys.path.append(meta["resources_dir"])
import op3_utils as u  # noqa: E402

de_train, y = u.read_de(par["de_train"], par["layer"])
id_map = u.read_id_map(par["id_map"])
train, query = u.key_of(de_train.obs), u.key_of(id_map)

# Target encodings live in the space of the leading SVD components of the targets.
mean, comps = u.svd_basis(y, par["n_components"])
scores = (y - mean) @ comps.T
x_tr_enc, x_q_enc = u.encoding_features(train, query, scores, mode="oof", n_folds=par["n_folds"], seed=par["seed"])
compounds = sorted(set(train["sm_name"]))
x_tr = np.hstack([x_tr_enc, u.one_hot(train["sm_name"].to_numpy(), compounds)])
x_q = np.hstack([x_q_enc, u.one_hot(query["sm_name"].to_numpy(), compounds)])
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
u.write_prediction(pred, id_map, de_train.var_names, de_train.uns["dataset_id"], meta["name"], par["output"])
