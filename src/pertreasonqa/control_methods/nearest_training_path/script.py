import sys

import anndata as ad

## VIASH START
par = {"input_train": "resources_test/pertreasonqa/k562_rpe1_small/train.h5ad",
       "input_test": "resources_test/pertreasonqa/k562_rpe1_small/test.h5ad",
       "input_solution": "resources_test/pertreasonqa/k562_rpe1_small/solution.h5ad",
       "input_context": "resources_test/pertreasonqa/k562_rpe1_small/context.h5ad",
       "input_graph": "resources_test/pertreasonqa/k562_rpe1_small/graph.csv",
       "input_gene_descriptions": "resources_test/pertreasonqa/k562_rpe1_small/gene_descriptions.parquet", "output": "prediction.h5ad"}
meta = {"resources_dir": "src/pertreasonqa", "name": "nearest_training_path"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib.control_answers import nearest_training_items  # noqa: E402
from pertreasonqa_lib.dataset_files import read_graph  # noqa: E402
from pertreasonqa_lib.path_serialisation import paths_from_json, unique_triplets  # noqa: E402
from pertreasonqa_lib.prediction_files import write_prediction  # noqa: E402

train = ad.read_h5ad(par["input_train"]).obs
test = ad.read_h5ad(par["input_test"])
graph = read_graph(par["input_graph"])
source = train.loc[nearest_training_items(train, test.obs, graph).to_numpy()]
triplets = [unique_triplets(paths_from_json(str(text), f"{par['input_train']}: reference_paths of {item}"))
            for item, text in zip(source.index, source["reference_paths"])]
write_prediction(par["output"], test, source["label"].astype(str).tolist(), triplets, meta["name"])
