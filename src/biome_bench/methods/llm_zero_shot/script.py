import sys

from pertsci.llm import LLMConfigError, SamplingParams, client_from_arguments
from pertsci.llm_usage import failure_notes

## VIASH START
par = {
    "input_train": "resources_test/biome_bench/mmu_subset/train.h5ad",
    "input_test": "resources_test/biome_bench/mmu_subset/test.h5ad",
    "output": "prediction.h5ad",
    "llm_base_url": None, "llm_model": None, "llm_api_key": None, "llm_backend": None, "llm_cache_dir": None,
    "llm_max_concurrency": 8, "temperature": 0.0, "max_tokens": 4096, "seed": 0,
}
meta = {"resources_dir": "src/biome_bench", "name": "llm_zero_shot"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib.item_files import read_items, write_prediction  # noqa: E402
from biome_bench_lib.llm_calls import answers_usage, generate_answers  # noqa: E402

test, uns = read_items(par["input_test"])
try:
    client = client_from_arguments(**{k: v for k, v in par.items() if k.startswith("llm_")})
except LLMConfigError as err:
    raise SystemExit(f"{meta['name']} needs a language model: {err}") from None
sampling = SamplingParams(temperature=par["temperature"], max_tokens=par["max_tokens"], seed=par["seed"])
conversations = [[{"role": "user", "content": prompt}] for prompt in test["prompt"]]
answers = generate_answers(client, conversations, test["task"].tolist(), sampling, test.index)
usage = answers_usage(client, answers, test["task"].tolist())
print(f"{len(answers)} answers from {client.resolved_model()}; LLM usage: {usage}")
write_prediction(par["output"], test.index, answers, dataset_id=uns["dataset_id"], method_id=meta["name"],
                 uns={"llm_usage": usage, "llm_failures": failure_notes(client.failures)})
