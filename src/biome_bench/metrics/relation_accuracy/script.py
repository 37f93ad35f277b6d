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
from biome_bench_lib.answer_extraction import extract_relation  # noqa: E402
from biome_bench_lib.item_files import read_items, write_score  # noqa: E402
from biome_bench_lib.relation_scores import macro_f1_bootstrap_ci, relation_scores  # noqa: E402
from biome_bench_lib.vocabulary import RELATIONS, TASK_RELATION  # noqa: E402

solution, uns = read_items(par["input_solution"])
prediction, pred_uns = read_items(par["input_prediction"])
items = solution[solution["task"] == TASK_RELATION]
answers = prediction.loc[items.index, "answer"]
extracted = [extract_relation(a) for a in answers]
scores = relation_scores(items["relation"].tolist(), extracted)
intervals = macro_f1_bootstrap_ci(items["relation"].tolist(), extracted, n_boot=par["n_boot"], seed=0)
print(f"{len(items)} Task A items, {scores['n_unparseable']} unparseable answers; accuracy {scores['accuracy']:.4f}, "
      f"macro-F1 {scores['macro_f1']:.4f} {intervals['macro_f1']}, macro-F1 (all) {scores['macro_f1_all']:.4f}")
write_score(
    par["output"], dataset_id=uns["dataset_id"], method_id=pred_uns["method_id"],
    values={"accuracy": scores["accuracy"], "macro_f1": scores["macro_f1"], "macro_f1_all": scores["macro_f1_all"]},
    # Only accuracy is a mean of per-item values; the macro-F1s get their intervals below.
    per_item=pd.DataFrame({"accuracy": scores["correct"]}, index=items.index),
    extra_uns={
        "n_items": scores["n_items"], "n_unparseable": scores["n_unparseable"],
        "macro_f1_ci": list(intervals["macro_f1"]), "macro_f1_all_ci": list(intervals["macro_f1_all"]),
        "per_class_f1": [scores["per_class_f1"][r] for r in RELATIONS],
        "support": [scores["support"][r] for r in RELATIONS], "relations": list(RELATIONS),
    },
)
