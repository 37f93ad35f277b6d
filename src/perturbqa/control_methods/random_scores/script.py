import sys

import anndata as ad
import numpy as np
import pandas as pd

## VIASH START
par = {"input_train": "resources_test/perturbqa/k562/train.h5ad", "input_test": "resources_test/perturbqa/k562/test.h5ad",
       "input_kg_edges": "resources_test/perturbqa/k562/kg_edges.parquet",
       "input_gene_descriptions": "resources_test/perturbqa/k562/gene_descriptions.parquet",
       "input_solution": "resources_test/perturbqa/k562/solution.h5ad", "output": "prediction.h5ad", "seed": 0}
meta = {"resources_dir": "src/perturbqa", "name": "random_scores"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbqa_lib.dataset_files import write_prediction  # noqa: E402

rng = np.random.default_rng(par["seed"])
test = ad.read_h5ad(par["input_test"])
solution = ad.read_h5ad(par["input_solution"]).obs
# Every pair item of the test file, decoys included, gets a score; clusters take the solution's annotations.
test_pairs = test.obs.index[test.obs["subtask"].isin(["de", "dir"])]
scores = pd.Series(rng.random(len(test_pairs)), index=test_pairs)
clusters = solution[~solution["subtask"].isin(["de", "dir"])]
texts = {}
for _, group in clusters.groupby("subtask"):
    # A random cyclic shift of a random order: no cluster keeps its own annotation.
    order = rng.permutation(len(group))
    shifted = np.roll(order, 1) if len(group) > 1 else order
    texts.update(dict(zip(group.index[order], group["annotation"].to_numpy()[shifted])))
write_prediction(par["output"], test.obs, test.uns["dataset_id"], meta["name"], scores=scores, texts=texts)
