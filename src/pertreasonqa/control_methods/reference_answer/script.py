import sys

import anndata as ad

## VIASH START
par = {"input_train": "resources_test/pertreasonqa/k562_rpe1_small/train.h5ad",
       "input_test": "resources_test/pertreasonqa/k562_rpe1_small/test.h5ad",
       "input_solution": "resources_test/pertreasonqa/k562_rpe1_small/solution.h5ad",
       "input_context": "resources_test/pertreasonqa/k562_rpe1_small/context.h5ad",
       "input_graph": "resources_test/pertreasonqa/k562_rpe1_small/graph.csv",
       "input_gene_descriptions": "resources_test/pertreasonqa/k562_rpe1_small/gene_descriptions.parquet", "output": "prediction.h5ad"}
meta = {"resources_dir": "src/pertreasonqa", "name": "reference_answer"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib.path_serialisation import paths_from_json, unique_triplets  # noqa: E402
from pertreasonqa_lib.prediction_files import write_prediction  # noqa: E402

test = ad.read_h5ad(par["input_test"])
solution = ad.read_h5ad(par["input_solution"])[test.obs_names]
triplets = [unique_triplets(paths_from_json(text, f"{par['input_solution']}: reference_paths"))
            for text in solution.obs["reference_paths"].astype(str)]
write_prediction(par["output"], test, solution.obs["label"].astype(str).tolist(), triplets, meta["name"])
