import sys

## VIASH START
par = {"input_train": "resources_test/perturbqa/k562/train.h5ad", "input_test": "resources_test/perturbqa/k562/test.h5ad",
       "input_kg_edges": "resources_test/perturbqa/k562/kg_edges.parquet",
       "input_gene_descriptions": "resources_test/perturbqa/k562/gene_descriptions.parquet",
       "input_solution": "resources_test/perturbqa/k562/solution.h5ad", "output": "prediction.h5ad"}
meta = {"resources_dir": "src/perturbqa", "name": "member_list"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbqa_lib.dataset_files import read_dataset, write_prediction  # noqa: E402
from perturbqa_lib.task_items import CLUSTER_SUBTASKS, cluster_members  # noqa: E402

train, test = read_dataset(par["input_train"], par["input_test"])
clusters = test.obs[test.obs["subtask"].isin(CLUSTER_SUBTASKS)]
texts = dict(zip(clusters.index, (" ".join(m) for m in cluster_members(clusters["members"]))))
write_prediction(par["output"], test.obs, test.uns["dataset_id"], meta["name"], texts=texts)
