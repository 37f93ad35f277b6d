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
meta = {"resources_dir": "src/biome_bench", "name": "grader_injection"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib.adversarial_answers import adversarial_answers  # noqa: E402
from biome_bench_lib.item_files import read_items, write_prediction  # noqa: E402
from biome_bench_lib.vocabulary import TASK_RELATION, random_relations  # noqa: E402

# Adversarial control, from the question alone (never the solution): Task B talks to the grader; Task A is the
# negative control's uniformly random relation, drawn the same way.
test, uns = read_items(par["input_test"])
answers = np.where(test["task"] == TASK_RELATION, random_relations(len(test), par["seed"]), np.asarray(adversarial_answers(test, "grader_injection"), dtype=object))
write_prediction(par["output"], test.index, answers, dataset_id=uns["dataset_id"], method_id=meta["name"])
