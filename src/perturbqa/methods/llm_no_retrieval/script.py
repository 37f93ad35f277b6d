import dataclasses
import sys

import pandas as pd

from pertsci.llm import SamplingParams, client_from_arguments
from pertsci.llm_usage import AnswerTally, failure_notes, usage_record

## VIASH START
par = {"input_train": "resources_test/perturbqa/k562/train.h5ad", "input_test": "resources_test/perturbqa/k562/test.h5ad",
       "input_kg_edges": "resources_test/perturbqa/k562/kg_edges.parquet",
       "input_gene_descriptions": "resources_test/perturbqa/k562/gene_descriptions.parquet",
       "output": "prediction.h5ad", "n_samples": 3, "temperature": 0.6, "top_p": 0.9,
       "max_tokens": 1024, "seed": 0, "llm_base_url": "http://127.0.0.1:8000/v1", "llm_model": None, "llm_api_key": None,
       "llm_backend": None, "llm_cache_dir": None, "llm_max_concurrency": 8}
meta = {"resources_dir": "src/perturbqa", "name": "llm_no_retrieval"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbqa_lib.answer_parsing import ABSTAIN, parse_option_answer, question_scores  # noqa: E402
from perturbqa_lib.dataset_files import read_dataset, write_prediction  # noqa: E402
from perturbqa_lib.gene_summaries import summarise_entities  # noqa: E402
from perturbqa_lib.question_prompts import no_retrieval_prompt  # noqa: E402
from perturbqa_lib.training_prevalence import gene_prevalence  # noqa: E402

train, test = read_dataset(par["input_train"], par["input_test"])
edges, descriptions = pd.read_parquet(par["input_kg_edges"]), pd.read_parquet(par["input_gene_descriptions"])
context, sets = str(train.uns["cell_line_description"]), train.uns["sets"]
client = client_from_arguments(**{k: v for k, v in par.items() if k.startswith("llm_")})
# Appendix A.3: several samples per question; summaries are written once per gene and role.
sampling = SamplingParams(temperature=par["temperature"], top_p=par["top_p"], max_tokens=par["max_tokens"],
                          n=par["n_samples"], seed=par["seed"])
summary_sampling = dataclasses.replace(sampling, n=1)
scores = {}
tally = AnswerTally()
for subtask in ("de", "dir"):
    items = test.obs[test.obs["subtask"] == subtask]
    if items.empty:
        continue
    perts, genes = items["pert"].astype(str).tolist(), items["gene"].astype(str).tolist()
    # Genes enter the prompt as SUMMER's summaries (C.1); no training example is shown.
    s_p = summarise_entities(client, perts, "pert", descriptions, edges, summary_sampling, sets)
    s_g = summarise_entities(client, genes, "gene", descriptions, edges, summary_sampling, sets)
    # Each answer option in turn as the hypothesis to support or refute (C.2); a question's samples are both.
    prompts = [no_retrieval_prompt(subtask, s_p[p], s_g[g], context, hypothesis)
               for p, g in zip(perts, genes) for hypothesis in (0, 1)]
    answers = client.generate(prompts, sampling,
                              labels=[f"{item} (hypothesis {h})" for item in items.index for h in (0, 1)])
    labels = [[parse_option_answer(t, subtask) for samples in answers[2 * i : 2 * i + 2] for t in samples]
              for i in range(len(perts))]
    values, stats = question_scores(labels, genes, *gene_prevalence(train.obs, subtask))
    scores.update(zip(items.index, values))
    tally.add_questions(labels, ABSTAIN)
    print(f"{subtask}: {len(prompts)} prompts, {stats}")
usage = usage_record(client.stats, tally)
print(f"LLM usage: {usage}")
write_prediction(par["output"], test.obs, test.uns["dataset_id"], meta["name"], scores=pd.Series(scores, dtype=float),
                 uns={"llm_usage": usage, "llm_failures": failure_notes(client.failures)})
