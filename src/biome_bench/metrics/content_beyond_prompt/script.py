import sys

import numpy as np
import pandas as pd

from pertsci.text_metrics import rouge1_beyond_context

## VIASH START
par = {
    "input_solution": "resources_test/biome_bench/mmu_subset/solution.h5ad",
    "input_prediction": "resources_test/biome_bench/mmu_subset/prediction.h5ad",
    "output": "score.h5ad",
}
meta = {"resources_dir": "src/biome_bench", "name": "content_beyond_prompt"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib.answer_extraction import strip_think  # noqa: E402
from biome_bench_lib.item_files import read_items, write_score  # noqa: E402
from biome_bench_lib.vocabulary import TASK_MECHANISM  # noqa: E402

solution, uns = read_items(par["input_solution"])
prediction, pred_uns = read_items(par["input_prediction"])
items = solution[solution["task"] == TASK_MECHANISM]
explanations = [strip_think(a) for a in prediction.loc[items.index, "answer"]]
# (precision, recall, f1) per item, on the words outside the item's own prompt.
scores = np.array([rouge1_beyond_context(e, r, p) for e, r, p in zip(explanations, items["mechanism"], items["prompt"])],
                  dtype=float).reshape(-1, 3)
f1 = float(scores[:, 2].mean()) if len(items) else float("nan")
recall = float(scores[:, 1].mean()) if len(items) else float("nan")
print(f"{len(items)} Task B items: ROUGE-1 beyond the prompt F1 {f1:.4f}, recall {recall:.4f}")
write_score(par["output"], dataset_id=uns["dataset_id"], method_id=pred_uns["method_id"],
            values={"rouge1_beyond_prompt": f1, "recall_beyond_prompt": recall},
            per_item=pd.DataFrame({"rouge1_beyond_prompt": scores[:, 2], "recall_beyond_prompt": scores[:, 1]}, index=items.index),
            extra_uns={"n_items": int(len(items)), "n_empty": int(sum(not e for e in explanations))})
