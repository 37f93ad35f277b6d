import sys

import pandas as pd

## VIASH START
par = {"input_train": "resources_test/perturbqa/k562/train.h5ad", "input_test": "resources_test/perturbqa/k562/test.h5ad",
       "input_kg_edges": "resources_test/perturbqa/k562/kg_edges.parquet",
       "input_gene_descriptions": "resources_test/perturbqa/k562/gene_descriptions.parquet",
       "output": "prediction.h5ad", "feature_dim": 64, "hidden": 64, "layers": 2, "ffn": 256, "dropout": 0.1,
       "epochs": 10, "batch_size": 2048, "lr": 1e-3, "weight_decay": 1e-6, "seed": 0, "threads": 1}
meta = {"resources_dir": "src/perturbqa", "name": "mlp"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbqa_lib.dataset_files import read_dataset, write_prediction  # noqa: E402
from perturbqa_lib.graph_models import pair_item_scores  # noqa: E402

train, test = read_dataset(par["input_train"], par["input_test"])
edges = pd.read_parquet(par["input_kg_edges"])
hyper = {k: par[k] for k in ("feature_dim", "hidden", "layers", "ffn", "dropout", "epochs", "batch_size", "lr",
                             "weight_decay", "seed", "threads")}
scores = pair_item_scores(train.obs, test.obs, edges, train.uns["sets"], kind="mlp", **hyper)
write_prediction(par["output"], test.obs, test.uns["dataset_id"], meta["name"], scores=scores if len(scores) else None)
