import sys

import anndata as ad
import pandas as pd

## VIASH START
par = {"input_train": "resources_test/pertreasonqa/k562_rpe1_small/train.h5ad",
       "input_test": "resources_test/pertreasonqa/k562_rpe1_small/test.h5ad",
       "input_solution": "resources_test/pertreasonqa/k562_rpe1_small/solution.h5ad",
       "input_context": "resources_test/pertreasonqa/k562_rpe1_small/context.h5ad",
       "input_graph": "resources_test/pertreasonqa/k562_rpe1_small/graph.csv",
       "input_gene_descriptions": "resources_test/pertreasonqa/k562_rpe1_small/gene_descriptions.parquet", "output": "prediction.h5ad"}
meta = {"resources_dir": "src/pertreasonqa", "name": "majority_per_gene"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib.prediction_files import write_prediction  # noqa: E402

train = ad.read_h5ad(par["input_train"]).obs
test = ad.read_h5ad(par["input_test"])
overall = train["label"].astype(str).value_counts()
rank = {label: i for i, label in enumerate(overall.index)}  # ties: the label more frequent overall
counts = pd.crosstab(train["gene"].astype(str), train["label"].astype(str))
majority = {gene: max(row.index, key=lambda label: (row[label], -rank[label])) for gene, row in counts.iterrows()}
answers = [majority.get(g, overall.index[0]) for g in test.obs["gene"].astype(str)]
write_prediction(par["output"], test, answers, [[] for _ in answers], meta["name"])
