import sys

import anndata as ad

## VIASH START
par = {"input_train": "resources_test/perturbqa/k562/train.h5ad", "input_test": "resources_test/perturbqa/k562/test.h5ad",
       "input_kg_edges": "resources_test/perturbqa/k562/kg_edges.parquet",
       "input_gene_descriptions": "resources_test/perturbqa/k562/gene_descriptions.parquet",
       "input_solution": "resources_test/perturbqa/k562/solution.h5ad", "output": "prediction.h5ad"}
meta = {"resources_dir": "src/perturbqa", "name": "ground_truth"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbqa_lib.dataset_files import write_prediction  # noqa: E402

test = ad.read_h5ad(par["input_test"])
solution = ad.read_h5ad(par["input_solution"]).obs
pairs = solution["subtask"].isin(["de", "dir"])
# Decoy pairs of the test file (unlabelled, not in the solution, never scored) get the lowest score, 0.
test_pairs = test.obs.index[test.obs["subtask"].isin(["de", "dir"])]
scores = solution.loc[pairs, "label"].reindex(test_pairs).fillna(0.0)
write_prediction(par["output"], test.obs, test.uns["dataset_id"], meta["name"],
                 scores=scores, texts=solution.loc[~pairs, "annotation"])
