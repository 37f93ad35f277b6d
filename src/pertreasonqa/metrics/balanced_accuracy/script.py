import sys

import anndata as ad
import pandas as pd

## VIASH START
par = {"input_solution": "resources_test/pertreasonqa/k562_rpe1_small/solution.h5ad",
       "input_prediction": "resources_test/pertreasonqa/k562_rpe1_small/prediction.h5ad",
       "input_context": "resources_test/pertreasonqa/k562_rpe1_small/context.h5ad",
       "input_graph": "resources_test/pertreasonqa/k562_rpe1_small/graph.csv", "output": "score.h5ad"}
meta = {"resources_dir": "src/pertreasonqa", "name": "balanced_accuracy"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib.balanced_accuracy import balanced_accuracy_items  # noqa: E402
from pertreasonqa_lib.prediction_files import aligned_prediction  # noqa: E402

solution = ad.read_h5ad(par["input_solution"])
prediction = ad.read_h5ad(par["input_prediction"])
answers = aligned_prediction(solution.obs, prediction.obs, where=par["input_prediction"])["answer"]
per_item = balanced_accuracy_items(solution.obs["label"].astype(str), answers)
obs = pd.DataFrame({"balanced_accuracy": per_item}, index=solution.obs_names.copy())
uns = {"dataset_id": solution.uns["dataset_id"], "method_id": prediction.uns["method_id"],
       "metric_ids": ["balanced_accuracy"], "metric_values": [float(per_item.mean())]}
ad.AnnData(obs=obs, uns=uns).write_h5ad(par["output"])
