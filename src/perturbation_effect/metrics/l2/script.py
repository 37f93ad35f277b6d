import anndata as ad
import numpy as np
import pandas as pd

## VIASH START
par = {
    "input_solution": "resources_test/perturbation_effect/synthetic_simulation/solution.h5ad",
    "input_prediction": "resources_test/perturbation_effect/synthetic_simulation/prediction.h5ad",
    "output": "score.h5ad",
}
meta = {"name": "l2"}
## VIASH END

N_TOP = 1000

solution = ad.read_h5ad(par["input_solution"])
prediction = ad.read_h5ad(par["input_prediction"])[solution.obs_names, solution.var_names]
control = solution.var["control_mean"].to_numpy(dtype=np.float64)
error = np.asarray(prediction.layers["prediction"], dtype=np.float64) - np.asarray(solution.layers["expression"], dtype=np.float64)
top = np.argsort(-control, kind="stable")[:N_TOP]
top1000 = np.sqrt((error[:, top] ** 2).sum(axis=1))
single = (solution.obs["n_targets"] == 1).to_numpy()
# The paper's headline: the top-1,000 genes, single perturbations and combinations apart.
per_item = pd.DataFrame({
    "l2_top1000_single": np.where(single, top1000, np.nan),
    "l2_top1000_combo": np.where(~single, top1000, np.nan),
    "l2_top1000": top1000,
    "l2": np.sqrt((error**2).sum(axis=1)),
}, index=solution.obs_names)
# A subset without items (e.g. no combination in a LOGO split) has no mean: NaN, not 0.
uns = {"dataset_id": solution.uns["dataset_id"], "method_id": prediction.uns["method_id"],
       "metric_ids": list(per_item.columns),
       "metric_values": [float(per_item[c].mean()) if per_item[c].notna().any() else float("nan") for c in per_item.columns]}
ad.AnnData(obs=per_item, uns=uns).write_h5ad(par["output"])
