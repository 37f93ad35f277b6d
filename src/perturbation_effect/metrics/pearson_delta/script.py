import anndata as ad
import numpy as np
import pandas as pd

## VIASH START
par = {
    "input_solution": "resources_test/perturbation_effect/synthetic_simulation/solution.h5ad",
    "input_prediction": "resources_test/perturbation_effect/synthetic_simulation/prediction.h5ad",
    "output": "score.h5ad",
}
meta = {"name": "pearson_delta"}
## VIASH END

N_TOP = 1000


def rowwise_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row of a with the same row of b; 0 where either is constant."""
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    denom = np.sqrt((a**2).sum(axis=1) * (b**2).sum(axis=1))
    # A constant change (e.g. "no change") has no correlation with anything: count it 0.
    return np.divide((a * b).sum(axis=1), denom, out=np.zeros(len(a)), where=denom > 0)


solution = ad.read_h5ad(par["input_solution"])
prediction = ad.read_h5ad(par["input_prediction"])[solution.obs_names, solution.var_names]
control = solution.var["control_mean"].to_numpy(dtype=np.float64)
observed = np.asarray(solution.layers["expression"], dtype=np.float64) - control
predicted = np.asarray(prediction.layers["prediction"], dtype=np.float64) - control
top = np.argsort(-control, kind="stable")[:N_TOP]
per_item = pd.DataFrame({
    "pearson_delta": rowwise_pearson(predicted, observed),
    "pearson_delta_top1000": rowwise_pearson(predicted[:, top], observed[:, top]),
}, index=solution.obs_names)
uns = {"dataset_id": solution.uns["dataset_id"], "method_id": prediction.uns["method_id"],
       "metric_ids": list(per_item.columns), "metric_values": [float(per_item[c].mean()) for c in per_item.columns]}
ad.AnnData(obs=per_item, uns=uns).write_h5ad(par["output"])
