import sys

import anndata as ad

## VIASH START
par = {"input_train": "resources_test/pertreasonqa/k562_rpe1_small/train.h5ad",
       "input_test": "resources_test/pertreasonqa/k562_rpe1_small/test.h5ad",
       "input_solution": "resources_test/pertreasonqa/k562_rpe1_small/solution.h5ad",
       "input_context": "resources_test/pertreasonqa/k562_rpe1_small/context.h5ad",
       "input_graph": "resources_test/pertreasonqa/k562_rpe1_small/graph.csv",
       "input_gene_descriptions": "resources_test/pertreasonqa/k562_rpe1_small/gene_descriptions.parquet", "output": "prediction.h5ad"}
meta = {"resources_dir": "src/pertreasonqa", "name": "all_nearby_edges"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib.control_answers import nearby_edges  # noqa: E402
from pertreasonqa_lib.dataset_files import read_graph  # noqa: E402
from pertreasonqa_lib.prediction_files import write_prediction  # noqa: E402

test = ad.read_h5ad(par["input_test"])
graph = read_graph(par["input_graph"])
triplets = [nearby_edges(graph, str(p), str(g)) for p, g in zip(test.obs["perturbation"], test.obs["gene"])]
write_prediction(par["output"], test, ["unchanged"] * test.n_obs, triplets, meta["name"])
