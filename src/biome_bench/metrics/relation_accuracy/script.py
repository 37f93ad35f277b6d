import sys

import pandas as pd

## VIASH START
par = {
    "input_solution": "resources_test/biome_bench/mmu_subset/solution.h5ad",
    "input_prediction": "resources_test/biome_bench/mmu_subset/prediction.h5ad",
    "output": "score.h5ad",
    "n_boot": 1000,
}
meta = {"resources_dir": "src/biome_bench", "name": "relation_accuracy"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib import biome  # noqa: E402

solution, uns = biome.read_items(par["input_solution"])
prediction, pred_uns = biome.read_items(par["input_prediction"])
items = solution[solution["task"] == biome.TASK_RELATION]
answers = prediction.loc[items.index, "answer"]
extracted = [biome.extract_relation(a) for a in answers]
scores = biome.relation_scores(items["relation"].tolist(), extracted)
intervals = biome.macro_f1_bootstrap_ci(items["relation"].tolist(), extracted, n_boot=par["n_boot"], seed=0)
print(f"{len(items)} Task A items, {scores['n_unparseable']} unparseable answers; accuracy {scores['accuracy']:.4f}, "
      f"macro-F1 {scores['macro_f1']:.4f} {intervals['macro_f1']}, macro-F1 (all) {scores['macro_f1_all']:.4f}")
biome.write_score(
    par["output"], dataset_id=uns["dataset_id"], method_id=pred_uns["method_id"],
    values={"accuracy": scores["accuracy"], "macro_f1": scores["macro_f1"], "macro_f1_all": scores["macro_f1_all"]},
    # Only accuracy is a mean of per-item values; the macro-F1s get their intervals below.
    per_item=pd.DataFrame({"accuracy": scores["correct"]}, index=items.index),
    extra_uns={
        "n_items": scores["n_items"], "n_unparseable": scores["n_unparseable"],
        "macro_f1_ci": list(intervals["macro_f1"]), "macro_f1_all_ci": list(intervals["macro_f1_all"]),
        "per_class_f1": [scores["per_class_f1"][r] for r in biome.RELATIONS],
        "support": [scores["support"][r] for r in biome.RELATIONS], "relations": list(biome.RELATIONS),
    },
)
