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
from biome_bench_lib.item_files import read_items, write_prediction  # noqa: E402
from biome_bench_lib.vocabulary import TASK_RELATION, random_relations  # noqa: E402

# Negative control: a uniformly random relation for each Task A item, an empty explanation for each Task B item.
test, uns = read_items(par["input_test"])
answers = np.where(test["task"] == TASK_RELATION, random_relations(len(test), par["seed"]), "")
write_prediction(par["output"], test.index, answers, dataset_id=uns["dataset_id"], method_id=meta["name"])
