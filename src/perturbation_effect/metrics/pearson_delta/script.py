import sys

import anndata as ad
import numpy as np
import pandas as pd

## VIASH START
par = {
    "input_solution": "resources_test/perturbation_effect/synthetic_simulation/solution.h5ad",
    "input_prediction": "resources_test/perturbation_effect/synthetic_simulation/prediction.h5ad",
    "output": "score.h5ad",
}
meta = {"resources_dir": "src/perturbation_effect", "name": "pearson_delta"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_effect_lib import effect_metrics  # noqa: E402

solution = ad.read_h5ad(par["input_solution"])
prediction = ad.read_h5ad(par["input_prediction"])[solution.obs_names, solution.var_names]
control = solution.var["control_mean"].to_numpy(dtype=np.float64)
observed = np.asarray(solution.layers["expression"], dtype=np.float64) - control
predicted = np.asarray(prediction.layers["prediction"], dtype=np.float64) - control
top = effect_metrics.top_expressed_genes(control)
top1000 = effect_metrics.rowwise_pearson(predicted[:, top], observed[:, top])
single = (solution.obs["n_targets"] == 1).to_numpy()
# The paper's headline: the top-1,000 genes, single perturbations and combinations apart (its
# linear model is one of single perturbations; combinations are the additive model's ground).
per_item = pd.DataFrame({
    "pearson_delta_top1000_single": np.where(single, top1000, np.nan),
    "pearson_delta_top1000_combo": np.where(~single, top1000, np.nan),
    "pearson_delta_top1000": top1000,
    "pearson_delta": effect_metrics.rowwise_pearson(predicted, observed),
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
