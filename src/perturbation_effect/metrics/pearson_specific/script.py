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
meta = {"resources_dir": "src/perturbation_effect", "name": "pearson_specific"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_effect_lib import effect_metrics  # noqa: E402

solution = ad.read_h5ad(par["input_solution"])
if "training_mean" not in solution.var:
    raise ValueError(f"{par['input_solution']}: no var['training_mean'] (the mean training profile, the reference of "
                     "the perturbation-specific correlation); rebuild the dataset with the current dataset components")
prediction = ad.read_h5ad(par["input_prediction"])[solution.obs_names, solution.var_names]
reference = solution.var["training_mean"].to_numpy(dtype=np.float64)
observed = np.asarray(solution.layers["expression"], dtype=np.float64)
predicted = np.asarray(prediction.layers["prediction"], dtype=np.float64)
top = effect_metrics.top_expressed_genes(solution.var["control_mean"].to_numpy(dtype=np.float64))
top1000 = effect_metrics.perturbation_specific_pearson(predicted[:, top], observed[:, top], reference[top])
single = (solution.obs["n_targets"] == 1).to_numpy()
# The gene sets and subsets of Pearson delta (the paper's headline: top 1,000 genes, singles and
# combinations apart), measured from the average perturbation instead of control (Systema).
per_item = pd.DataFrame({
    "pearson_specific_top1000_single": np.where(single, top1000, np.nan),
    "pearson_specific_top1000_combo": np.where(~single, top1000, np.nan),
    "pearson_specific_top1000": top1000,
    "pearson_specific": effect_metrics.perturbation_specific_pearson(predicted, observed, reference),
}, index=solution.obs_names)
scored = {"pearson_specific_top1000_single": single, "pearson_specific_top1000_combo": ~single,
          "pearson_specific_top1000": np.ones(len(single), bool), "pearson_specific": np.ones(len(single), bool)}
uns = {"dataset_id": solution.uns["dataset_id"], "method_id": prediction.uns["method_id"],
       "metric_ids": list(per_item.columns),
       # Mean of the defined values; NaN when there are none (no item of the kind, or all undefined).
       "metric_values": [float(per_item[c].mean()) if per_item[c].notna().any() else float("nan") for c in per_item.columns],
       # Items a metric applies to whose correlation is undefined: shown, never counted as 0.
       "n_undefined": [int(per_item[c][scored[c]].isna().sum()) for c in per_item.columns]}
ad.AnnData(obs=per_item, uns=uns).write_h5ad(par["output"])
