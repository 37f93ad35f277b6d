import sys

import anndata as ad
import numpy as np
import pandas as pd

## VIASH START
par = {"input_solution": "resources_test/perturbqa/k562/solution.h5ad",
       "input_prediction": "resources_test/perturbqa/k562/prediction.h5ad", "output": "score.h5ad"}
meta = {"name": "auroc", "resources_dir": "src/perturbqa/metrics/auroc"}
## VIASH END

sys.path.append(meta["resources_dir"])
from grouped_auroc import auroc, auroc_by_group  # noqa: E402

solution = ad.read_h5ad(par["input_solution"])
prediction = ad.read_h5ad(par["input_prediction"])
sol = solution.obs
pairs = sol[sol["subtask"].isin(["de", "dir"])]
if pairs["subtask"].nunique() > 1:
    raise ValueError(f"{par['input_solution']}: de and dir items in one dataset; AUROC is defined per subtask")
scores = prediction.obs["score"].reindex(pairs.index).to_numpy(dtype=float)
missing = np.isnan(scores)
per_gene = pd.Series(dtype=float)
if len(pairs) == 0 or missing.all():
    # No pair item, or a method that does not address this subtask: not applicable.
    macro = pooled = float("nan")
    reason = "no pair items" if len(pairs) == 0 else "the prediction gives no score to the pair items"
    print(f"AUROC not applicable: {reason}")
elif missing.any():
    raise ValueError(f"{par['input_prediction']}: {int(missing.sum())} of {len(pairs)} pair items have no score")
else:
    labels = pairs["label"].to_numpy(dtype=float)
    if np.isnan(labels).any() or not np.isin(labels, [0, 1]).all():
        raise ValueError(f"{par['input_solution']}: pair labels must be 0 or 1")
    per_gene = auroc_by_group(labels.astype(int), scores, pairs["gene"].to_numpy(dtype=str))
    macro = float(per_gene.mean()) if len(per_gene) else float("nan")
    pooled = auroc(labels.astype(int), scores)
    print(f"macro AUROC {macro:.4f} over {len(per_gene)} genes; pooled AUROC {pooled:.4f} over {len(pairs)} pairs")

obs = pd.DataFrame({"macro_auroc": per_gene.to_numpy()}, index=pd.Index(per_gene.index.astype(str), name="gene"))
uns = {"dataset_id": solution.uns["dataset_id"], "method_id": prediction.uns["method_id"],
       "metric_ids": ["macro_auroc", "pooled_auroc"], "metric_values": [macro, pooled]}
ad.AnnData(obs=obs, uns=uns).write_h5ad(par["output"])
