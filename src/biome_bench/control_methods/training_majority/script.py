import sys

import numpy as np

from pertsci.embeddings import embed

## VIASH START
par = {
    "input_train": "resources_test/biome_bench/mmu_subset/train.h5ad",
    "input_test": "resources_test/biome_bench/mmu_subset/test.h5ad",
    "input_solution": "resources_test/biome_bench/mmu_subset/solution.h5ad",
    "output": "prediction.h5ad",
}
meta = {"resources_dir": "src/biome_bench", "name": "training_majority"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib.item_files import read_items, write_prediction  # noqa: E402
from biome_bench_lib.vocabulary import RELATIONS, TASK_MECHANISM, TASK_RELATION  # noqa: E402

train, _ = read_items(par["input_train"])
test, uns = read_items(par["input_test"])
answers = np.full(len(test), "", dtype=object)
for task in (TASK_RELATION, TASK_MECHANISM):
    wanted = (test["task"] == task).to_numpy()
    known = train[train["task"] == task]
    if not wanted.any():
        continue
    if known.empty:
        raise SystemExit(f"{par['input_train']}: no training item of task {task!r}, but the test split has {wanted.sum()}")
    if task == TASK_RELATION:
        counts = known["relation"].value_counts()
        # Ties go to the first relation in vocabulary order, so the answer does not depend on row order.
        answers[wanted] = next(r for r in RELATIONS if counts.get(r, 0) == counts.max())
    else:
        texts = known["mechanism"].tolist()
        vectors = embed(texts)
        similarity = vectors @ vectors.T
        mean_to_others = (similarity.sum(axis=1) - np.diag(similarity)) / max(len(texts) - 1, 1)
        answers[wanted] = texts[int(np.argmax(mean_to_others))]
write_prediction(par["output"], test.index, answers, dataset_id=uns["dataset_id"], method_id=meta["name"])
