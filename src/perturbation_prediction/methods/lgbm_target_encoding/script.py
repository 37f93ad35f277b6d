import sys

import lightgbm as lgb
import numpy as np

## VIASH START
par = {
    "de_train": "resources_test/perturbation_prediction/op3_synthetic/de_train.h5ad",
    "id_map": "resources_test/perturbation_prediction/op3_synthetic/id_map.csv",
    "layer": "clipped_sign_log10_pval",
    "n_components": 32,
    "n_estimators": 300,
    "learning_rate": 0.03,
    "num_leaves": 15,
    "min_child_samples": 5,
    "subsample": 0.8,
    "colsample_bytree": 0.5,
    "n_folds": 5,
    "seed": 0,
    "output": "prediction.h5ad",
}
meta = {"name": "lgbm_target_encoding", "resources_dir": "src/perturbation_prediction", "cpus": None}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_prediction_lib.de_files import read_de, read_id_map, row_keys, write_prediction  # noqa: E402
from perturbation_prediction_lib.svd_compression import svd_basis  # noqa: E402
from perturbation_prediction_lib.target_encoding import oof_encoding_features  # noqa: E402

de_train, y = read_de(par["de_train"], par["layer"])
id_map = read_id_map(par["id_map"])
train, query = row_keys(de_train.obs), row_keys(id_map)

# Out-of-fold target encodings in the space of the targets' leading SVD components; one
# gradient-boosted model per component, mapped back to every gene.
mean, comps = svd_basis(y, par["n_components"])
scores = (y - mean) @ comps.T
x_tr, x_q = oof_encoding_features(train, query, scores, n_folds=par["n_folds"], seed=par["seed"])
pred_scores = np.zeros((len(query), comps.shape[0]))
for k in range(comps.shape[0]):
    model = lgb.LGBMRegressor(
        n_estimators=par["n_estimators"], learning_rate=par["learning_rate"], num_leaves=par["num_leaves"],
        min_child_samples=par["min_child_samples"], subsample=par["subsample"], subsample_freq=1,
        colsample_bytree=par["colsample_bytree"], random_state=par["seed"] + k, n_jobs=meta.get("cpus") or 1,
        verbose=-1,
    )
    model.fit(x_tr, scores[:, k])
    pred_scores[:, k] = model.predict(x_q)
pred = mean + pred_scores @ comps
print(f"LightGBM: {comps.shape[0]} components, {x_tr.shape[1]} features, {len(train)} training rows")
write_prediction(pred, id_map, de_train.var_names, de_train.uns["dataset_id"], meta["name"], par["output"])
