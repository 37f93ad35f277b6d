import sys

import anndata as ad

## VIASH START
par = {"input_solution": "resources_test/pertreasonqa/k562_rpe1_small/solution.h5ad",
       "input_prediction": "resources_test/pertreasonqa/k562_rpe1_small/prediction.h5ad",
       "input_context": "resources_test/pertreasonqa/k562_rpe1_small/context.h5ad",
       "input_graph": "resources_test/pertreasonqa/k562_rpe1_small/graph.csv", "output": "score.h5ad", "edge_recall_threshold": 0.5}
meta = {"resources_dir": "src/pertreasonqa", "name": "failure_modes"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib.dataset_files import read_graph  # noqa: E402
from pertreasonqa_lib.faithfulness import failure_modes, faithfulness_table  # noqa: E402

solution = ad.read_h5ad(par["input_solution"])
prediction = ad.read_h5ad(par["input_prediction"])
table = faithfulness_table(solution.obs, prediction.obs, read_graph(par["input_graph"]), where=par["input_prediction"])
if not table["has_reference"].any():
    raise ValueError(f"{par['input_solution']}: no test item has a reference path; failure modes are undefined")
obs = failure_modes(table, par["edge_recall_threshold"])
uns = {"dataset_id": solution.uns["dataset_id"], "method_id": prediction.uns["method_id"],
       "metric_ids": list(obs.columns), "metric_values": [float(obs[c].mean()) for c in obs.columns]}
ad.AnnData(obs=obs, uns=uns).write_h5ad(par["output"])
