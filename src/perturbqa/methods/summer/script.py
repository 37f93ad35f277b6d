import dataclasses
import sys

import numpy as np
import pandas as pd

from pertsci.llm import SamplingParams, client_from_arguments
from pertsci.llm_usage import AnswerTally, failure_notes, usage_record

## VIASH START
par = {"input_train": "resources_test/perturbqa/k562/train.h5ad", "input_test": "resources_test/perturbqa/k562/test.h5ad",
       "input_kg_edges": "resources_test/perturbqa/k562/kg_edges.parquet",
       "input_gene_descriptions": "resources_test/perturbqa/k562/gene_descriptions.parquet",
       "output": "prediction.h5ad", "k": 10, "per_criterion": 5, "n_samples": 3, "temperature": 0.6, "top_p": 0.9,
       "max_tokens": 1024, "seed": 0, "llm_base_url": "http://127.0.0.1:8000/v1", "llm_model": None, "llm_api_key": None,
       "llm_backend": None, "llm_cache_dir": None, "llm_max_concurrency": 8}
meta = {"resources_dir": "src/perturbqa", "name": "summer"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbqa_lib.answer_parsing import ABSTAIN, parse_summer_answer, question_scores  # noqa: E402
from perturbqa_lib.dataset_files import read_dataset, write_prediction  # noqa: E402
from perturbqa_lib.gene_summaries import describe_clusters, summarise_entities  # noqa: E402
from perturbqa_lib.graph_retriever import Retriever  # noqa: E402
from perturbqa_lib.question_prompts import summer_prompt  # noqa: E402
from perturbqa_lib.task_items import cluster_members, training_pairs  # noqa: E402
from perturbqa_lib.training_prevalence import gene_prevalence  # noqa: E402

train, test = read_dataset(par["input_train"], par["input_test"])
edges, descriptions = pd.read_parquet(par["input_kg_edges"]), pd.read_parquet(par["input_gene_descriptions"])
cell_line, context, sets = str(train.uns["cell_line"]), str(train.uns["cell_line_description"]), train.uns["sets"]
client = client_from_arguments(**{k: v for k, v in par.items() if k.startswith("llm_")})
# Appendix A.3: several samples per question; summaries are written once per gene and role.
sampling = SamplingParams(temperature=par["temperature"], top_p=par["top_p"], max_tokens=par["max_tokens"],
                          n=par["n_samples"], seed=par["seed"])
summary_sampling = dataclasses.replace(sampling, n=1)
scores, texts = {}, {}
tally = AnswerTally()
for subtask in ("de", "dir"):
    items = test.obs[test.obs["subtask"] == subtask]
    if items.empty:
        continue
    perts, genes = items["pert"].astype(str).tolist(), items["gene"].astype(str).tolist()
    # Retrieve training pairs near (p, g) in the knowledge graph (section 4.2).
    retriever = Retriever(training_pairs(train.obs, subtask), edges, sets, k=par["k"], per_criterion=par["per_criterion"])
    retriever.prepare(perts, genes)
    rng = np.random.default_rng(par["seed"])
    examples = [retriever.retrieve(p, g, rng) for p, g in zip(perts, genes)]
    # Summarise every gene asked about or retrieved, as a perturbation and as a downstream gene (C.1).
    s_p = summarise_entities(client, perts + [e.pert for ex in examples for e in ex], "pert", descriptions, edges,
                             summary_sampling, sets)
    s_g = summarise_entities(client, genes + [e.gene for ex in examples for e in ex], "gene", descriptions, edges,
                             summary_sampling, sets)
    # Ask the chain-of-thought question with the examples and their outcomes (C.2), parse each sample.
    prompts = [summer_prompt(subtask, p, g, s_p[p], s_g[g], cell_line, context,
                             [(e.pert, e.gene, s_p[e.pert], s_g[e.gene], e.label) for e in ex])
               for p, g, ex in zip(perts, genes, examples)]
    answers = client.generate(prompts, sampling, labels=items.index)
    labels = [[parse_summer_answer(t, subtask, p, g, cell_line) for t in samples]
              for p, g, samples in zip(perts, genes, answers)]
    values, stats = question_scores(labels, genes, *gene_prevalence(train.obs, subtask))
    scores.update(zip(items.index, values))
    tally.add_questions(labels, ABSTAIN)
    print(f"{subtask}: {len(prompts)} prompts, {stats}")
# Gene-set enrichment: each cluster described from its members' summaries (hierarchical summarisation, C.1).
for subtask, role in (("gse_gene", "gene"), ("gse_pert", "pert")):
    items = test.obs[test.obs["subtask"] == subtask]
    if items.empty:
        continue
    clusters = cluster_members(items["members"])
    summaries = summarise_entities(client, [m for c in clusters for m in c], role, descriptions, edges, summary_sampling)
    texts.update(zip(items.index, describe_clusters(client, clusters, role, summaries, summary_sampling, items.index)))
    print(f"{subtask}: {len(clusters)} clusters")
usage = usage_record(client.stats, tally)
print(f"LLM usage: {usage}")
write_prediction(par["output"], test.obs, test.uns["dataset_id"], meta["name"], scores=pd.Series(scores, dtype=float),
                 texts=texts or None,
                 uns={"llm_usage": usage, "llm_failures": failure_notes(client.failures)})
