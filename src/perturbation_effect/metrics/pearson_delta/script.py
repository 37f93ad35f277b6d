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
    """Pearson correlation of each row of a with the same row of b; NaN where either is constant."""
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    denom = np.sqrt((a**2).sum(axis=1) * (b**2).sum(axis=1))
    # A constant change (e.g. "no change") has no correlation with anything: it stays undefined
    # (NaN), so it is left out of means, intervals and tests instead of counting as 0.
    return np.divide((a * b).sum(axis=1), denom, out=np.full(len(a), np.nan), where=denom > 0)


solution = ad.read_h5ad(par["input_solution"])
prediction = ad.read_h5ad(par["input_prediction"])[solution.obs_names, solution.var_names]
control = solution.var["control_mean"].to_numpy(dtype=np.float64)
observed = np.asarray(solution.layers["expression"], dtype=np.float64) - control
predicted = np.asarray(prediction.layers["prediction"], dtype=np.float64) - control
top = np.argsort(-control, kind="stable")[:N_TOP]
top1000 = rowwise_pearson(predicted[:, top], observed[:, top])
single = (solution.obs["n_targets"] == 1).to_numpy()
# The paper's headline: the top-1,000 genes, single perturbations and combinations apart (its
# linear model is one of single perturbations; combinations are the additive model's ground).
per_item = pd.DataFrame({
    "pearson_delta_top1000_single": np.where(single, top1000, np.nan),
    "pearson_delta_top1000_combo": np.where(~single, top1000, np.nan),
    "pearson_delta_top1000": top1000,
    "pearson_delta": rowwise_pearson(predicted, observed),
}, index=solution.obs_names)


def mean_or_nan(values: pd.Series) -> float:
    """Mean of the defined values; NaN when there are none (no item of the kind, or all undefined)."""
    return float(values.mean()) if values.notna().any() else float("nan")


scored = {"pearson_delta_top1000_single": single, "pearson_delta_top1000_combo": ~single,
          "pearson_delta_top1000": np.ones(len(single), bool), "pearson_delta": np.ones(len(single), bool)}
uns = {"dataset_id": solution.uns["dataset_id"], "method_id": prediction.uns["method_id"],
       "metric_ids": list(per_item.columns), "metric_values": [mean_or_nan(per_item[c]) for c in per_item.columns],
       # Items a metric applies to whose correlation is undefined: shown, never counted as 0.
       "n_undefined": [int(per_item[c][scored[c]].isna().sum()) for c in per_item.columns]}
ad.AnnData(obs=per_item, uns=uns).write_h5ad(par["output"])
