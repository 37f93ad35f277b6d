import sys

import anndata as ad

## VIASH START
par = {"input_solution": "resources_test/pertreasonqa/k562_rpe1_small/solution.h5ad",
       "input_prediction": "resources_test/pertreasonqa/k562_rpe1_small/prediction.h5ad",
       "input_context": "resources_test/pertreasonqa/k562_rpe1_small/context.h5ad",
       "input_graph": "resources_test/pertreasonqa/k562_rpe1_small/graph.csv", "output": "score.h5ad"}
meta = {"resources_dir": "src/pertreasonqa", "name": "faithfulness"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib.dataset_files import read_context, read_graph  # noqa: E402
from pertreasonqa_lib.faithfulness import FAITHFULNESS_METRICS, faithfulness_table  # noqa: E402

solution = ad.read_h5ad(par["input_solution"])
prediction = ad.read_h5ad(par["input_prediction"])
_, _, go = read_context(ad.read_h5ad(par["input_context"]))
table = faithfulness_table(solution.obs, prediction.obs, read_graph(par["input_graph"]), go, where=par["input_prediction"])
scored = table[table["has_reference"]]
if scored.empty:
    raise ValueError(f"{par['input_solution']}: no test item has a reference path; faithfulness is undefined")
ids = list(FAITHFULNESS_METRICS)
uns = {"dataset_id": solution.uns["dataset_id"], "method_id": prediction.uns["method_id"],
       "metric_ids": ids, "metric_values": [float(scored[m].mean()) for m in ids]}
ad.AnnData(obs=scored[ids].astype(float), uns=uns).write_h5ad(par["output"])
