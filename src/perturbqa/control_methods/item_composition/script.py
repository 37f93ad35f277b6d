import sys

## VIASH START
par = {"input_train": "resources_test/perturbqa/k562/train.h5ad", "input_test": "resources_test/perturbqa/k562/test.h5ad",
       "input_kg_edges": "resources_test/perturbqa/k562/kg_edges.parquet",
       "input_gene_descriptions": "resources_test/perturbqa/k562/gene_descriptions.parquet",
       "input_solution": "resources_test/perturbqa/k562/solution.h5ad", "output": "prediction.h5ad"}
meta = {"resources_dir": "src/perturbqa", "name": "item_composition"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbqa_lib.dataset_files import read_dataset, write_prediction  # noqa: E402
from perturbqa_lib.training_prevalence import item_composition_scores  # noqa: E402

train, test = read_dataset(par["input_train"], par["input_test"])
write_prediction(par["output"], test.obs, test.uns["dataset_id"], meta["name"],
                 scores=item_composition_scores(train.obs, test.obs))
