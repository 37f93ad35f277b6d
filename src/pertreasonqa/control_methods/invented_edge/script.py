import sys

import anndata as ad

## VIASH START
par = {"input_train": "resources_test/pertreasonqa/k562_rpe1_small/train.h5ad",
       "input_test": "resources_test/pertreasonqa/k562_rpe1_small/test.h5ad",
       "input_solution": "resources_test/pertreasonqa/k562_rpe1_small/solution.h5ad",
       "input_context": "resources_test/pertreasonqa/k562_rpe1_small/context.h5ad",
       "input_graph": "resources_test/pertreasonqa/k562_rpe1_small/graph.csv",
       "input_gene_descriptions": "resources_test/pertreasonqa/k562_rpe1_small/gene_descriptions.parquet", "output": "prediction.h5ad"}
meta = {"resources_dir": "src/pertreasonqa", "name": "invented_edge"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib.prediction_files import write_prediction  # noqa: E402

train = ad.read_h5ad(par["input_train"]).obs
test = ad.read_h5ad(par["input_test"])
majority = train["label"].astype(str).value_counts().index[0]
triplets = [[(str(p) if kind.lower() == "chemical" else str(p).split("+")[0], 1, str(g))]
            for p, kind, g in zip(test.obs["perturbation"], test.obs["perturbation_type"].astype(str), test.obs["gene"])]
write_prediction(par["output"], test, [majority] * test.n_obs, triplets, meta["name"])
