import sys

import anndata as ad

from pertsci.llm import SamplingParams, client_from_arguments

## VIASH START
par = {"input_train": "resources_test/pertreasonqa/k562_rpe1_small/train.h5ad",
       "input_test": "resources_test/pertreasonqa/k562_rpe1_small/test.h5ad",
       "input_context": "resources_test/pertreasonqa/k562_rpe1_small/context.h5ad",
       "input_graph": "resources_test/pertreasonqa/k562_rpe1_small/graph.csv",
       "input_gene_descriptions": "resources_test/pertreasonqa/k562_rpe1_small/gene_descriptions.parquet", "output": "prediction.h5ad",
       "path_context": "cell_conditioned", "temperature": 0.7, "top_p": 0.8, "max_tokens": 1024, "seed": 0,
       "llm_base_url": None, "llm_model": None, "llm_api_key": None, "llm_backend": None, "llm_cache_dir": None,
       "llm_max_concurrency": 8}
meta = {"resources_dir": "src/pertreasonqa", "name": "llm_zero_shot"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib.cell_state import gene_states  # noqa: E402
from pertreasonqa_lib.dataset_files import read_context, read_graph  # noqa: E402
from pertreasonqa_lib.prediction_files import write_prediction  # noqa: E402
from pertreasonqa_lib.prompts import answer_with_llm, answers_uns, question_prompt  # noqa: E402
from pertreasonqa_lib.reference_paths import candidate_triplets  # noqa: E402
from pertreasonqa_lib.signed_graph import compound_targets  # noqa: E402

if par["path_context"] not in ("cell_conditioned", "none"):
    raise ValueError(f"--path_context {par['path_context']!r}: expected cell_conditioned or none")
test = ad.read_h5ad(par["input_test"])
basal, thresholds, _ = read_context(ad.read_h5ad(par["input_context"]))
graph = read_graph(par["input_graph"])  # a compound's targets are named in its question

# The paper's cell-conditioned pathway context: the label-free candidate paths, searched here (B.2.2-B.2.3).
candidates = None
if par["path_context"] == "cell_conditioned":
    candidates = dict(zip(test.obs_names, candidate_triplets(test.obs, graph, basal, thresholds)))
prompts = []
for item in test.obs.itertuples():
    paths = candidates[item.Index] if candidates is not None else None
    genes = {item.perturbation, item.gene} | {g for p in (paths or []) for t in p for g in (t[0], t[2])}
    states = gene_states(genes, str(item.cell), basal, thresholds)
    prompts.append(question_prompt(str(item.cell), str(item.perturbation), str(item.perturbation_type),
                                      str(item.gene), states, paths, targets=compound_targets(graph, str(item.perturbation))))

sampling = SamplingParams(temperature=par["temperature"], top_p=par["top_p"], max_tokens=par["max_tokens"], seed=par["seed"])
client = client_from_arguments(**{k: v for k, v in par.items() if k.startswith("llm_")})
table = answer_with_llm(client, prompts, sampling, test.obs_names)
uns = answers_uns(client, table)
usage = uns["llm_usage"]
print(f"{usage['abstentions']} of {len(table)} responses could not be parsed; LLM usage: {usage}")
write_prediction(par["output"], test, table["answer"], table["triplets"], meta["name"],
                    extra={"response": table["response"], "parse_error": table["parse_error"]},
                    uns=uns)
