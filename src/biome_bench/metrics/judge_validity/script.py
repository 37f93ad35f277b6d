import json
import sys

import numpy as np
import pandas as pd

from pertsci.llm import LLMConfigError, SamplingParams, client_from_arguments
from pertsci.llm_usage import AnswerTally, failure_notes, usage_record

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
from biome_bench_lib.item_files import read_items, write_score  # noqa: E402
from biome_bench_lib.judge_validity import perturb_mechanism, swappable_entities, validity_scores  # noqa: E402
from biome_bench_lib.llm_calls import generate_answers, judge_explanations  # noqa: E402
from biome_bench_lib.prompts import rewrite_messages  # noqa: E402
from biome_bench_lib.vocabulary import JUDGE_DIMENSIONS, TASK_MECHANISM  # noqa: E402

solution, uns = read_items(par["input_solution"])
_, pred_uns = read_items(par["input_prediction"])
try:
    client = client_from_arguments(**{k: v for k, v in par.items() if k.startswith("llm_")})
except LLMConfigError as err:
    raise SystemExit(f"{meta['name']} needs a judge model and checks nothing without one: {err}") from None
sampling = SamplingParams(temperature=par["temperature"], max_tokens=par["max_tokens"], seed=par["seed"])

items = solution[solution["task"] == TASK_MECHANISM].sort_index()
if par["max_items"] > 0:
    items = items.iloc[: par["max_items"]]
# Corrupt each reference: swap its observed and knowledge-graph entities, invert its regulation words.
perturbed = [perturb_mechanism(text, swappable_entities(observed, json.loads(kg)))
             for text, observed, kg in zip(items["mechanism"], items["observed_entities"], items["reference_kg"])]
usable = np.array([n_entities + n_words > 0 for _, n_entities, n_words in perturbed], dtype=bool)
checked = items[usable]
rewrites = generate_answers(client, [rewrite_messages(t) for t in checked["mechanism"]],
                            [TASK_MECHANISM] * len(checked), sampling, [f"{i} (rewrite)" for i in checked.index])
corrupted = [p[0] for p, keep in zip(perturbed, usable) if keep]


tally = AnswerTally()


def judge(texts: list[str], version: str) -> pd.DataFrame:
    scores, n_bad = judge_explanations(client, checked["prompt"].tolist(), checked["target_phenotypes"].tolist(),
                                       checked["mechanism"].tolist(), texts, sampling,
                                       [f"{i} (judging the {version})" for i in checked.index])
    # An unreadable grading leaves that item out of the validity scores.
    tally.add_counts(questions=len(texts), samples=len(texts), abstentions=n_bad, fallbacks=n_bad)
    if len(texts) and n_bad == len(texts):
        # The validity then stays missing (never a score) and every grading counts as a judge abstention.
        print(f"none of the {len(texts)} judge answers on the {version} holds readable scores: the validity is "
              f"missing (check the judge model, {client.resolved_model()})")
    return scores.set_axis(checked.index)


values, per_item, per_dimension = validity_scores(judge(rewrites, "rewrite"), judge(corrupted, "perturbed reference"))
print(f"{len(checked)} of {len(items)} references perturbed "
      f"({sum(p[1] for p in perturbed)} entity swaps, {sum(p[2] for p in perturbed)} inverted words); {values}; "
      f"per dimension [rewrite, perturb, drop]: {per_dimension}")
write_score(par["output"], dataset_id=uns["dataset_id"], method_id=pred_uns["method_id"], values=values, per_item=per_item,
            extra_uns={"llm_usage": usage_record(client.stats, tally), "llm_failures": failure_notes(client.failures),
                       "n_items": int(len(items)), "n_checked": int(len(checked)), "dimensions": list(JUDGE_DIMENSIONS),
                       **{f"{dim}_rewrite_perturb_drop": v for dim, v in per_dimension.items()}})
