import sys

import anndata as ad
import numpy as np

## VIASH START
par = {"input_train": "resources_test/pertreasonqa/k562_rpe1_small/train.h5ad",
       "input_test": "resources_test/pertreasonqa/k562_rpe1_small/test.h5ad",
       "input_solution": "resources_test/pertreasonqa/k562_rpe1_small/solution.h5ad",
       "input_context": "resources_test/pertreasonqa/k562_rpe1_small/context.h5ad",
       "input_graph": "resources_test/pertreasonqa/k562_rpe1_small/graph.csv",
       "input_gene_descriptions": "resources_test/pertreasonqa/k562_rpe1_small/gene_descriptions.parquet", "output": "prediction.h5ad", "seed": 0}
meta = {"resources_dir": "src/pertreasonqa", "name": "random_answer"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib.answer_parsing import LABELS  # noqa: E402
from pertreasonqa_lib.control_answers import graph_paths  # noqa: E402
from pertreasonqa_lib.dataset_files import read_graph  # noqa: E402
from pertreasonqa_lib.prediction_files import write_prediction  # noqa: E402

rng = np.random.default_rng(par["seed"])
test = ad.read_h5ad(par["input_test"])
graph = read_graph(par["input_graph"])
answers = rng.choice(LABELS, size=test.n_obs)
triplets = []
for pert, gene in zip(test.obs["perturbation"].astype(str), test.obs["gene"].astype(str)):
    paths = graph_paths(graph, pert, gene)  # the mechanisms the graph offers; one drawn uniformly
    triplets.append(list(paths[rng.integers(len(paths))]) if paths else [])
write_prediction(par["output"], test, answers, triplets, meta["name"])
