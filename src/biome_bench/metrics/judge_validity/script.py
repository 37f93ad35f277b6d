import json
import sys

import numpy as np
import pandas as pd

from pertsci.llm import LLMConfigError, SamplingParams, client_from_params

## VIASH START
par = {
    "input_solution": "resources_test/biome_bench/mmu_subset/solution.h5ad",
    "input_prediction": "resources_test/biome_bench/mmu_subset/prediction.h5ad",
    "output": "score.h5ad",
    "max_items": 0,
    "llm_base_url": None, "llm_model": None, "llm_api_key": None, "llm_backend": None, "llm_cache_dir": None,
    "llm_max_concurrency": 8, "temperature": 0.0, "max_tokens": 4096, "seed": 0,
}
meta = {"resources_dir": "src/biome_bench", "name": "judge_validity"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib import biome  # noqa: E402

solution, uns = biome.read_items(par["input_solution"])
_, pred_uns = biome.read_items(par["input_prediction"])
try:
    client = client_from_params(par)
except LLMConfigError as err:
    raise SystemExit(f"{meta['name']} needs a judge model and checks nothing without one: {err}") from None
sampling = SamplingParams(temperature=par["temperature"], max_tokens=par["max_tokens"], seed=par["seed"])

items = solution[solution["task"] == biome.TASK_MECHANISM].sort_index()
if par["max_items"] > 0:
    items = items.iloc[: par["max_items"]]
# Entities that may be swapped: the observed ones and those of the paper's knowledge graph.
entity_lists = []
for observed, kg in zip(items["observed_entities"], items["reference_kg"]):
    names = [biome.entity_name_state(e)[0] for e in biome.split_entity_list(observed)]
    names += [t[k] for t in json.loads(kg) for k in ("source", "target")]
    entity_lists.append(names)
perturbed = [biome.perturb_mechanism(text, names) for text, names in zip(items["mechanism"], entity_lists)]
usable = np.array([n_entities + n_words > 0 for _, n_entities, n_words in perturbed], dtype=bool)
checked = items[usable]
rewrites = biome.generate_answers(client, [biome.rewrite_messages(t) for t in checked["mechanism"]],
                                  [biome.TASK_MECHANISM] * len(checked), sampling)
corrupted = [p[0] for p, keep in zip(perturbed, usable) if keep]


def judge(texts: list[str]) -> pd.DataFrame:
    scores, n_bad = biome.judge_explanations(client, checked["prompt"].tolist(), checked["target_phenotypes"].tolist(),
                                             checked["mechanism"].tolist(), texts, sampling)
    if len(texts) and n_bad == len(texts):
        raise SystemExit(f"none of the {len(texts)} judge answers holds readable scores: check the judge model")
    return scores.set_axis(checked.index)


rewrite_scores, perturb_scores = judge(rewrites), judge(corrupted)
rewrite_item, perturb_item = rewrite_scores.mean(axis=1), perturb_scores.mean(axis=1)
rewrite_mean, perturb_mean = float(rewrite_item.mean()), float(perturb_item.mean())
values = {"validity_rewrite_score": rewrite_mean, "validity_perturb_score": perturb_mean,
          "validity_relative_drop": 1.0 - perturb_mean / rewrite_mean if rewrite_mean > 0 else float("nan")}
per_dimension = {}
for dim in biome.JUDGE_DIMENSIONS:
    r, p = float(rewrite_scores[dim].mean()), float(perturb_scores[dim].mean())
    per_dimension[dim] = [r, p, 1.0 - p / r if r > 0 else float("nan")]
print(f"{len(checked)} of {len(items)} references perturbed "
      f"({sum(p[1] for p in perturbed)} entity swaps, {sum(p[2] for p in perturbed)} inverted words); {values}; "
      f"per dimension [rewrite, perturb, drop]: {per_dimension}")
biome.write_score(
    par["output"], dataset_id=uns["dataset_id"], method_id=pred_uns["method_id"], values=values,
    per_item=pd.DataFrame({"validity_rewrite_score": rewrite_item, "validity_perturb_score": perturb_item,
                           "validity_relative_drop": 1.0 - perturb_item / rewrite_item}),
    extra_uns={"n_items": int(len(items)), "n_checked": int(len(checked)), "dimensions": list(biome.JUDGE_DIMENSIONS),
               **{f"{dim}_rewrite_perturb_drop": v for dim, v in per_dimension.items()}},
)
