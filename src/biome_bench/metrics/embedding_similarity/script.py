import sys

import numpy as np
import pandas as pd

from pertsci.text_metrics import cosine_similarity_texts

## VIASH START
par = {
    "input_solution": "resources_test/biome_bench/mmu_subset/solution.h5ad",
    "input_prediction": "resources_test/biome_bench/mmu_subset/prediction.h5ad",
    "output": "score.h5ad",
}
meta = {"resources_dir": "src/biome_bench", "name": "embedding_similarity"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib.answer_extraction import strip_think  # noqa: E402
from biome_bench_lib.item_files import read_items, write_score  # noqa: E402
from biome_bench_lib.vocabulary import TASK_MECHANISM  # noqa: E402

solution, uns = read_items(par["input_solution"])
prediction, pred_uns = read_items(par["input_prediction"])
items = solution[solution["task"] == TASK_MECHANISM]
explanations = [strip_think(a) for a in prediction.loc[items.index, "answer"]]
similarity = cosine_similarity_texts(explanations, items["mechanism"].tolist())
value = float(similarity.mean()) if len(items) else float("nan")
print(f"{len(items)} Task B items ({sum(not e for e in explanations)} empty explanations): similarity {value:.4f}")
write_score(par["output"], dataset_id=uns["dataset_id"], method_id=pred_uns["method_id"],
                  values={"similarity": value}, per_item=pd.DataFrame({"similarity": similarity}, index=items.index),
                  extra_uns={"n_items": int(len(items)), "n_empty": int(np.sum([not e for e in explanations]))})
