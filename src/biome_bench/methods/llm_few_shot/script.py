import sys

from pertsci.embeddings import embed
from pertsci.llm import LLMConfigError, SamplingParams, client_from_arguments
from pertsci.llm_usage import failure_notes

## VIASH START
par = {
    "input_train": "resources_test/biome_bench/mmu_subset/train.h5ad",
    "input_test": "resources_test/biome_bench/mmu_subset/test.h5ad",
    "output": "prediction.h5ad",
    "n_examples": 3,
    "llm_base_url": None, "llm_model": None, "llm_api_key": None, "llm_backend": None, "llm_cache_dir": None,
    "llm_max_concurrency": 8, "temperature": 0.0, "max_tokens": 4096, "seed": 0,
}
meta = {"resources_dir": "src/biome_bench", "name": "llm_few_shot"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib.item_files import read_items, write_prediction  # noqa: E402
from biome_bench_lib.llm_calls import answers_usage, generate_answers  # noqa: E402
from biome_bench_lib.prompts import few_shot_messages  # noqa: E402
from biome_bench_lib.similar_items import item_texts, nearest_neighbours  # noqa: E402
from biome_bench_lib.vocabulary import TASK_MECHANISM, TASK_RELATION  # noqa: E402

if par["n_examples"] < 1:
    raise SystemExit(f"--n_examples must be at least 1, got {par['n_examples']} (use llm_zero_shot for none)")
train, _ = read_items(par["input_train"])
test, uns = read_items(par["input_test"])
try:
    client = client_from_arguments(**{k: v for k, v in par.items() if k.startswith("llm_")})
except LLMConfigError as err:
    raise SystemExit(f"{meta['name']} needs a language model: {err}") from None
conversations: list = [None] * len(test)
for task, answer_column in ((TASK_RELATION, "relation"), (TASK_MECHANISM, "mechanism")):
    rows = [i for i, t in enumerate(test["task"]) if t == task]
    known = train[train["task"] == task]
    if not rows:
        continue
    if known.empty:
        raise SystemExit(f"{par['input_train']}: no training item of task {task!r} to use as an example")
    neighbours, _ = nearest_neighbours(embed(item_texts(test.iloc[rows])), embed(item_texts(known)), k=par["n_examples"])
    prompts, solved = known["prompt"].to_numpy(), known[answer_column].to_numpy()
    for row, picks in zip(rows, neighbours):
        # Most similar example last, next to the question.
        examples = [(prompts[j], solved[j]) for j in picks[::-1]]
        conversations[row] = few_shot_messages(test["prompt"].iloc[row], examples)
sampling = SamplingParams(temperature=par["temperature"], max_tokens=par["max_tokens"], seed=par["seed"])
answers = generate_answers(client, conversations, test["task"].tolist(), sampling, test.index)
usage = answers_usage(client, answers, test["task"].tolist())
print(f"{len(answers)} answers from {client.resolved_model()}; LLM usage: {usage}")
write_prediction(par["output"], test.index, answers, dataset_id=uns["dataset_id"], method_id=meta["name"],
                 uns={"llm_usage": usage, "llm_failures": failure_notes(client.failures)})
