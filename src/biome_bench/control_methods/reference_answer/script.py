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
from biome_bench_lib.item_files import read_items, write_prediction  # noqa: E402
from biome_bench_lib.vocabulary import TASK_RELATION  # noqa: E402

# Positive control: the gold relation (Task A) or the reference mechanism text (Task B) of each item.
test, uns = read_items(par["input_test"])
solution, _ = read_items(par["input_solution"])
solution = solution.loc[test.index]
answers = np.where(solution["task"] == TASK_RELATION, solution["relation"], solution["mechanism"])
write_prediction(par["output"], test.index, answers, dataset_id=uns["dataset_id"], method_id=meta["name"])
