import json
import sys

import numpy as np

from pertsci.llm import LLMConfigError, SamplingParams, client_from_arguments
from pertsci.llm_usage import AnswerTally, failure_notes, usage_record
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
from biome_bench_lib.answer_extraction import extract_relation, strip_think  # noqa: E402
from biome_bench_lib.graded_text import instruction_like  # noqa: E402
from biome_bench_lib.item_files import read_items, write_score  # noqa: E402
from biome_bench_lib.llm_calls import judge_explanations, kg_coverage  # noqa: E402
from biome_bench_lib.metric_averages import finite_mean, normalised_average  # noqa: E402
from biome_bench_lib.relation_scores import relation_scores  # noqa: E402
from biome_bench_lib.vocabulary import JUDGE_DIMENSIONS, TASK_MECHANISM, TASK_RELATION  # noqa: E402

solution, uns = read_items(par["input_solution"])
prediction, pred_uns = read_items(par["input_prediction"])
try:
    client = client_from_arguments(**{k: v for k, v in par.items() if k.startswith("llm_")})
except LLMConfigError as err:
    raise SystemExit(f"{meta['name']} needs a judge model and scores nothing without one: {err}") from None
sampling = SamplingParams(temperature=par["temperature"], max_tokens=par["max_tokens"], seed=par["seed"])

# Task B: the judge's four scores, knowledge-graph coverage and embedding similarity of each explanation.
items = solution[solution["task"] == TASK_MECHANISM]
explanations = prediction.loc[items.index, "answer"].tolist()
judged, n_bad_judge = judge_explanations(client, items["prompt"].tolist(), items["target_phenotypes"].tolist(),
                                         items["mechanism"].tolist(), explanations, sampling, items.index)
if len(items) and n_bad_judge == len(items):
    # The judge model's failure, not the method's: its dimensions stay missing (never a score), and every
    # grading counts as a judge abstention, which the results flag beside the method.
    print(f"none of the {len(items)} judge answers holds readable scores: the judge's dimensions are missing "
          f"(check the judge model, {client.resolved_model()})")
# Text addressed to the grader rather than explaining biology: the items are still graded, and counted, so
# that a score the answer may have talked up is reported as such.
suspect = {item: found for item, e in zip(items.index, explanations) if (found := instruction_like(strip_think(e)))}
if suspect:
    print(f"QC: {len(suspect)} of {len(items)} explanations of {pred_uns['method_id']} hold instruction-like text "
          f"addressed to the grader: " + "; ".join(f"{item} ({', '.join(found)})" for item, found in list(suspect.items())[:5]))
reference_kgs = [json.loads(s) for s in items["reference_kg"]]  # parsed once: the coverage and its count read them
coverage, n_bad_kg = kg_coverage(client, explanations, reference_kgs, sampling, items.index)
similarity = cosine_similarity_texts([strip_think(e) for e in explanations], items["mechanism"].tolist())
# Task A, for the paper's average over both tasks.
relation = solution[solution["task"] == TASK_RELATION]
task_a = relation_scores(relation["relation"].tolist(), [extract_relation(a) for a in prediction.loc[relation.index, "answer"]])

values = {dim: finite_mean(judged[dim]) for dim in JUDGE_DIMENSIONS}
values["kg_coverage"] = finite_mean(coverage)
values["normalised_average"] = normalised_average(
    accuracy=task_a["accuracy"], macro_f1=task_a["macro_f1"], judge={d: values[d] for d in JUDGE_DIMENSIONS},
    similarity=finite_mean(similarity) if len(items) else None, coverage=values["kg_coverage"],
)
print(f"{len(items)} Task B items ({n_bad_judge} unreadable judge answers, {n_bad_kg} unreadable coverage answers, "
      f"{int(np.isfinite(coverage).sum())} with a coverage); {values}")
# The judge's questions: one grading per explanation and one coverage extraction per explanation it was asked
# about; an unreadable answer leaves that item's value NaN, left out of the means.
tally = AnswerTally()
tally.add_counts(questions=len(items), samples=len(items), abstentions=n_bad_judge, fallbacks=n_bad_judge)
n_asked = int(sum(1 for e, kg in zip(explanations, reference_kgs) if kg and strip_think(e).strip()))
tally.add_counts(questions=n_asked, samples=n_asked, abstentions=n_bad_kg, fallbacks=n_bad_kg)
write_score(par["output"], dataset_id=uns["dataset_id"], method_id=pred_uns["method_id"], values=values,
            per_item=judged.set_axis(items.index).assign(kg_coverage=coverage),
            extra_uns={"llm_usage": usage_record(client.stats, tally), "llm_failures": failure_notes(client.failures),
                       "n_items": int(len(items)), "n_unreadable_judge": int(n_bad_judge),
                       "n_unreadable_coverage": int(n_bad_kg), "judge_model": client.resolved_model(),
                       "n_instruction_like": len(suspect), "instruction_like_items": np.asarray(list(suspect), dtype=str),
                       "similarity": finite_mean(similarity), "accuracy": task_a["accuracy"], "macro_f1": task_a["macro_f1"]})
