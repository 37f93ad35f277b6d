import sys

## VIASH START
par = {
    "input_train": "resources_test/perturbqa/k562/train.h5ad",
    "input_test": "resources_test/perturbqa/k562/test.h5ad",
    "input_kg_edges": "resources_test/perturbqa/k562/kg_edges.parquet",
    "input_gene_descriptions": "resources_test/perturbqa/k562/gene_descriptions.parquet",
    "output": "prediction.h5ad",
}
meta = {"resources_dir": "src/perturbqa", "name": "{{name}}"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbqa_lib.dataset_files import read_dataset, write_prediction  # noqa: E402
from perturbqa_lib.training_prevalence import prevalence_scores  # noqa: E402

train, test = read_dataset(par["input_train"], par["input_test"])
# FILL IN: replace the training prevalence of each item's gene with your model's score per pair
# item (par["input_kg_edges"] and par["input_gene_descriptions"] hold the knowledge it may use).
scores = prevalence_scores(train.obs, test.obs)
write_prediction(par["output"], test.obs, test.uns["dataset_id"], meta["name"], scores=scores)
