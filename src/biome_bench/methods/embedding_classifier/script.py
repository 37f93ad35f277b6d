import sys

import numpy as np
from sklearn.linear_model import LogisticRegression, Ridge

from pertsci.embeddings import embed

## VIASH START
par = {
    "input_train": "resources_test/biome_bench/mmu_subset/train.h5ad",
    "input_test": "resources_test/biome_bench/mmu_subset/test.h5ad",
    "output": "prediction.h5ad",
    "C": 1.0,
    "class_weight": "balanced",
    "max_iter": 2000,
    "ridge_alpha": 1.0,
}
meta = {"resources_dir": "src/biome_bench", "name": "embedding_classifier"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib.item_files import read_items, write_prediction  # noqa: E402
from biome_bench_lib.similar_items import item_texts, nearest_neighbours  # noqa: E402
from biome_bench_lib.vocabulary import TASK_MECHANISM, TASK_RELATION  # noqa: E402

if par["class_weight"] not in ("balanced", "none"):
    raise SystemExit(f"--class_weight must be 'balanced' or 'none', got {par['class_weight']!r}")
train, _ = read_items(par["input_train"])
test, uns = read_items(par["input_test"])
answers = np.full(len(test), "", dtype=object)
for task in (TASK_RELATION, TASK_MECHANISM):
    wanted = (test["task"] == task).to_numpy()
    known = train[train["task"] == task]
    if not wanted.any():
        continue
    if known.empty:
        raise SystemExit(f"{par['input_train']}: no training item of task {task!r} to learn from")
    x_train, x_test = embed(item_texts(known)), embed(item_texts(test[wanted]))
    if task == TASK_RELATION:
        labels = known["relation"].to_numpy()
        if len(set(labels)) == 1:
            answers[wanted] = labels[0]  # one class seen: nothing to discriminate
            continue
        model = LogisticRegression(C=par["C"], max_iter=par["max_iter"],
                                   class_weight=None if par["class_weight"] == "none" else "balanced")
        answers[wanted] = model.fit(x_train, labels).predict(x_test)
    else:
        targets = embed(known["mechanism"].tolist())
        predicted = Ridge(alpha=par["ridge_alpha"]).fit(x_train, targets).predict(x_test)
        closest, _ = nearest_neighbours(predicted, targets, k=1)
        answers[wanted] = known["mechanism"].to_numpy()[closest[:, 0]]
    print(f"{task}: {wanted.sum()} test items, {len(known)} training items")
write_prediction(par["output"], test.index, answers, dataset_id=uns["dataset_id"], method_id=meta["name"])
