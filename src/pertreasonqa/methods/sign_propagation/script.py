import sys

import anndata as ad

## VIASH START
par = {"input_train": "resources_test/pertreasonqa/k562_rpe1_small/train.h5ad",
       "input_test": "resources_test/pertreasonqa/k562_rpe1_small/test.h5ad",
       "input_context": "resources_test/pertreasonqa/k562_rpe1_small/context.h5ad",
       "input_graph": "resources_test/pertreasonqa/k562_rpe1_small/graph.csv",
       "input_gene_descriptions": "resources_test/pertreasonqa/k562_rpe1_small/gene_descriptions.parquet", "output": "prediction.h5ad",
       "max_hops": 4, "n_paths": 4, "ambiguity_budget": 1, "aggregation": "majority"}
meta = {"resources_dir": "src/pertreasonqa", "name": "sign_propagation"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib.dataset_files import read_context, read_graph  # noqa: E402
from pertreasonqa_lib.path_params import PathParams  # noqa: E402
from pertreasonqa_lib.path_serialisation import path_triplets  # noqa: E402
from pertreasonqa_lib.prediction_files import write_prediction  # noqa: E402
from pertreasonqa_lib.reference_paths import search_items  # noqa: E402
from pertreasonqa_lib.sign_filters import predict_from_paths  # noqa: E402

test = ad.read_h5ad(par["input_test"])
basal, thresholds, _ = read_context(ad.read_h5ad(par["input_context"]))
graph = read_graph(par["input_graph"])
params = PathParams(max_hops=par["max_hops"], n_paths=par["n_paths"], ambiguity_budget=par["ambiguity_budget"])
paths, features = search_items(test.obs, graph, basal, thresholds, params)

answers, triplets = [], []
for bag, state, kind in zip(paths, features["gene_state"], test.obs["perturbation_type"].astype(str)):
    answer, which = predict_from_paths([graph.sign[list(p)] for p in bag], kind, int(state),
                                          params.ambiguity_budget, par["aggregation"])
    answers.append(answer)
    triplets.append([] if which is None else [tuple(t) for t in path_triplets(graph, bag[which])])
write_prediction(par["output"], test, answers, triplets, meta["name"])
