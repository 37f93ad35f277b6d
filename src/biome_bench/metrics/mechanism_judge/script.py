import json
import sys

import numpy as np

from pertsci.llm import LLMConfigError, SamplingParams, client_from_params
from pertsci.text_metrics import cosine_similarity_texts

## VIASH START
par = {
    "input_solution": "resources_test/biome_bench/mmu_subset/solution.h5ad",
    "input_prediction": "resources_test/biome_bench/mmu_subset/prediction.h5ad",
    "output": "score.h5ad",
    "llm_base_url": None, "llm_model": None, "llm_api_key": None, "llm_backend": None, "llm_cache_dir": None,
    "llm_max_concurrency": 8, "temperature": 0.0, "max_tokens": 4096, "seed": 0,
}
meta = {"resources_dir": "src/biome_bench", "name": "mechanism_judge"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib import biome  # noqa: E402


def mean_or_nan(values) -> float:
    """Mean of the finite values; NaN (not a warning) when there are none."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else float("nan")


solution, uns = biome.read_items(par["input_solution"])
prediction, pred_uns = biome.read_items(par["input_prediction"])
try:
    client = client_from_params(par)
except LLMConfigError as err:
    raise SystemExit(f"{meta['name']} needs a judge model and scores nothing without one: {err}") from None
sampling = SamplingParams(temperature=par["temperature"], max_tokens=par["max_tokens"], seed=par["seed"])

items = solution[solution["task"] == biome.TASK_MECHANISM]
explanations = prediction.loc[items.index, "answer"].tolist()
judged, n_bad_judge = biome.judge_explanations(client, items["prompt"].tolist(), items["target_phenotypes"].tolist(),
                                               items["mechanism"].tolist(), explanations, sampling)
if len(items) and n_bad_judge == len(items):
    raise SystemExit(f"none of the {len(items)} judge answers holds readable scores: check the judge model")
triples = [json.loads(s) for s in items["reference_kg"]]
coverage, n_bad_kg = biome.kg_coverage(client, explanations, triples, sampling)
similarity = cosine_similarity_texts([biome.strip_think(e) for e in explanations], items["mechanism"].tolist())

relation = solution[solution["task"] == biome.TASK_RELATION]
task_a = biome.relation_scores(relation["relation"].tolist(),
                               [biome.extract_relation(a) for a in prediction.loc[relation.index, "answer"]])
values = {dim: mean_or_nan(judged[dim]) for dim in biome.JUDGE_DIMENSIONS}
values["kg_coverage"] = mean_or_nan(coverage)
values["normalised_average"] = biome.normalised_average(
    accuracy=task_a["accuracy"], macro_f1=task_a["macro_f1"], judge={d: values[d] for d in biome.JUDGE_DIMENSIONS},
    similarity=mean_or_nan(similarity) if len(items) else None, coverage=values["kg_coverage"],
)
print(f"{len(items)} Task B items ({n_bad_judge} unreadable judge answers, {n_bad_kg} unreadable coverage answers, "
      f"{int(np.isfinite(coverage).sum())} with a coverage); {values}")
per_item = judged.set_axis(items.index)
per_item["kg_coverage"] = coverage
biome.write_score(par["output"], dataset_id=uns["dataset_id"], method_id=pred_uns["method_id"], values=values,
                  per_item=per_item,
                  extra_uns={"n_items": int(len(items)), "n_unreadable_judge": int(n_bad_judge),
                             "n_unreadable_coverage": int(n_bad_kg), "judge_model": client.resolved_model(),
                             "similarity": mean_or_nan(similarity), "accuracy": task_a["accuracy"],
                             "macro_f1": task_a["macro_f1"]})
