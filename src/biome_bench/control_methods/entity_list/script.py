import sys

## VIASH START
par = {
    "input_train": "resources_test/biome_bench/mmu_subset/train.h5ad",
    "input_test": "resources_test/biome_bench/mmu_subset/test.h5ad",
    "input_solution": "resources_test/biome_bench/mmu_subset/solution.h5ad",
    "output": "prediction.h5ad",
}
meta = {"resources_dir": "src/biome_bench", "name": "entity_list"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib.adversarial_answers import adversarial_answers  # noqa: E402
from biome_bench_lib.item_files import read_items, write_prediction  # noqa: E402

# Adversarial control: built from the question alone (never the solution), to game text metrics.
test, uns = read_items(par["input_test"])
write_prediction(par["output"], test.index, adversarial_answers(test, "entity_list"), dataset_id=uns["dataset_id"], method_id=meta["name"])
