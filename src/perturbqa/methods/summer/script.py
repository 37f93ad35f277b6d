import sys

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
from perturbqa_lib.retrieval import run_llm_method  # noqa: E402

run_llm_method(par, "summer", meta["name"], gene_sets=True)
