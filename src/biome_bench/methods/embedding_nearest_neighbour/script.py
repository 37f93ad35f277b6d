import sys

import numpy as np

from pertsci.embeddings import embed

## VIASH START
par = {
    "input_train": "resources_test/biome_bench/mmu_subset/train.h5ad",
    "input_test": "resources_test/biome_bench/mmu_subset/test.h5ad",
    "output": "prediction.h5ad",
}
meta = {"resources_dir": "src/biome_bench", "name": "embedding_nearest_neighbour"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib.item_files import read_items, write_prediction  # noqa: E402
from biome_bench_lib.similar_items import item_texts, nearest_neighbours  # noqa: E402
from biome_bench_lib.vocabulary import TASK_MECHANISM, TASK_RELATION  # noqa: E402

train, _ = read_items(par["input_train"])
test, uns = read_items(par["input_test"])
answers = np.full(len(test), "", dtype=object)
for task, answer_column in ((TASK_RELATION, "relation"), (TASK_MECHANISM, "mechanism")):
    wanted = (test["task"] == task).to_numpy()
    if not wanted.any():
        continue
    known = train[train["task"] == task]
    if known.empty:
        raise SystemExit(f"{par['input_train']}: no training item of task {task!r} to copy an answer from")
    neighbour, _ = nearest_neighbours(embed(item_texts(test[wanted])), embed(item_texts(known)), k=1)
    answers[wanted] = known[answer_column].to_numpy()[neighbour[:, 0]]
    print(f"{task}: {wanted.sum()} test items answered from {len(known)} training items")
write_prediction(par["output"], test.index, answers, dataset_id=uns["dataset_id"], method_id=meta["name"])
