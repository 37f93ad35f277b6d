import sys

import anndata as ad

## VIASH START
par = {
    "input_train": "resources_test/pertreasonqa/k562_rpe1_small/train.h5ad",
    "input_test": "resources_test/pertreasonqa/k562_rpe1_small/test.h5ad",
    "input_context": "resources_test/pertreasonqa/k562_rpe1_small/context.h5ad",
    "input_graph": "resources_test/pertreasonqa/k562_rpe1_small/graph.csv",
    "input_gene_descriptions": "resources_test/pertreasonqa/k562_rpe1_small/gene_descriptions.parquet",
    "output": "prediction.h5ad",
}
meta = {"resources_dir": "src/pertreasonqa", "name": "{{name}}"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib.prediction_files import write_prediction  # noqa: E402

train = ad.read_h5ad(par["input_train"])
test = ad.read_h5ad(par["input_test"])
# FILL IN: replace the most frequent training label with your model's answer per test item, and
# the empty lists with the graph triplets that support each answer (par["input_graph"]).
majority = train.obs["label"].astype(str).value_counts().index[0]
answers = [majority] * test.n_obs
write_prediction(par["output"], test, answers, [[] for _ in answers], meta["name"])
