import sys

import numpy as np

## VIASH START
par = {
    "input_train": "resources_test/biome_bench/mmu_subset/train.h5ad",
    "input_test": "resources_test/biome_bench/mmu_subset/test.h5ad",
    "input_solution": "resources_test/biome_bench/mmu_subset/solution.h5ad",
    "output": "prediction.h5ad",
    "seed": 0,
}
meta = {"resources_dir": "src/biome_bench", "name": "random_or_empty"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib import biome  # noqa: E402

test, uns = biome.read_items(par["input_test"])
rng = np.random.default_rng(par["seed"])
random_relations = np.asarray(biome.RELATIONS)[rng.integers(0, len(biome.RELATIONS), size=len(test))]
answers = np.where(test["task"] == biome.TASK_RELATION, random_relations, "")
biome.write_prediction(par["output"], test.index, answers, dataset_id=uns["dataset_id"], method_id=meta["name"])
