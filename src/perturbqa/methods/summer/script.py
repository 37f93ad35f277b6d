import pandas as pd

from openpert.llm import SamplingParams, client_from_params
from openpert.perturbqa_labels import read_dataset, write_prediction
from openpert.retrieval import llm_prediction

## VIASH START
par = {"input_train": "resources_test/perturbqa/k562/train.h5ad", "input_test": "resources_test/perturbqa/k562/test.h5ad",
       "input_kg_edges": "resources_test/perturbqa/k562/kg_edges.parquet",
       "input_gene_descriptions": "resources_test/perturbqa/k562/gene_descriptions.parquet",
       "output": "prediction.h5ad", "k": 10, "per_criterion": 5, "n_samples": 3, "temperature": 0.6, "top_p": 0.9,
       "max_tokens": 1024, "seed": 0, "llm_base_url": "http://127.0.0.1:8000/v1", "llm_model": None, "llm_api_key": None,
       "llm_backend": None, "llm_cache_dir": None, "llm_max_concurrency": 8}
meta = {"name": "summer"}
## VIASH END

train, test = read_dataset(par["input_train"], par["input_test"])
edges = pd.read_parquet(par["input_kg_edges"])
descriptions = pd.read_parquet(par["input_gene_descriptions"])
client = client_from_params(par)
# Appendix A.3: several samples per question; summaries are written once per gene and role.
answers = SamplingParams(temperature=par["temperature"], top_p=par["top_p"], max_tokens=par["max_tokens"],
                         n=par["n_samples"], seed=par["seed"])
summaries = SamplingParams(temperature=par["temperature"], top_p=par["top_p"], max_tokens=par["max_tokens"],
                           n=1, seed=par["seed"])
scores, texts, stats = llm_prediction("summer", client, train, test, edges, descriptions, sampling=answers,
                                      summary_sampling=summaries, seed=par["seed"], k=par["k"], per_criterion=par["per_criterion"], gene_sets=True)
for subtask, counts in stats.items():
    print(f"{subtask}: {counts}")
print(f"LLM client: {client.stats}")
write_prediction(par["output"], test.obs, test.uns["dataset_id"], meta["name"], scores=scores, texts=texts or None)
