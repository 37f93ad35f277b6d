import sys

import numpy as np

## VIASH START
par = {
    "input_train": "resources_test/biome_bench/mmu_subset/train.h5ad",
    "input_test": "resources_test/biome_bench/mmu_subset/test.h5ad",
    "input_solution": "resources_test/biome_bench/mmu_subset/solution.h5ad",
    "output": "prediction.h5ad",
}
meta = {"resources_dir": "src/biome_bench", "name": "reference_answer"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib import biome  # noqa: E402

test, uns = biome.read_items(par["input_test"])
solution, _ = biome.read_items(par["input_solution"])
solution = solution.loc[test.index]
answers = np.where(solution["task"] == biome.TASK_RELATION, solution["relation"], solution["mechanism"])
biome.write_prediction(par["output"], test.index, answers, dataset_id=uns["dataset_id"], method_id=meta["name"])
