import sys

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy import stats

from pertsci.multiple_testing import benjamini_hochberg

## VIASH START
par = {"input_train": "resources_test/perturbqa/k562/train.h5ad", "input_test": "resources_test/perturbqa/k562/test.h5ad",
       "input_kg_edges": "resources_test/perturbqa/k562/kg_edges.parquet",
       "input_gene_descriptions": "resources_test/perturbqa/k562/gene_descriptions.parquet",
       "output": "prediction.h5ad", "libraries": "go_bp,pathway,complex", "top_k": 10, "alpha": 0.05}
meta = {"resources_dir": "src/perturbqa", "name": "ora"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbqa_lib.dataset_files import read_dataset, write_prediction  # noqa: E402
from perturbqa_lib.knowledge_text import set_display_name  # noqa: E402

train, test = read_dataset(par["input_train"], par["input_test"])
edges = pd.read_parquet(par["input_kg_edges"])
libraries = [x.strip() for x in par["libraries"].split(",") if x.strip()]
unknown = sorted(set(libraries) - {"go_bp", "pathway", "complex"})
if unknown:
    raise ValueError(f"--libraries: unknown relations {unknown}; use go_bp, pathway, complex")
members = edges[edges["relation"].isin(libraries)].drop_duplicates(["source", "target", "relation"])
set_index = pd.Index(pd.unique(members["target"] + "\t" + members["relation"]))
universe = pd.Index(pd.unique(members["source"]))
membership = sp.csr_matrix((np.ones(len(members)), (set_index.get_indexer(members["target"] + "\t" + members["relation"]),
                                                     universe.get_indexer(members["source"]))),
                           shape=(len(set_index), len(universe)))
set_sizes = np.asarray(membership.sum(axis=1)).ravel()
names = [set_display_name(*key.split("\t")) for key in set_index]
print(f"{len(set_index)} gene sets over a universe of {len(universe)} genes")

texts = {}
items = test.obs[test.obs["subtask"].isin(["gse_gene", "gse_pert"])]
for item, joined in zip(items.index, items["members"]):
    genes = universe.get_indexer(pd.unique(np.array([g for g in joined.split(";") if g], dtype=object)))
    genes = genes[genes >= 0]
    if genes.size == 0:
        texts[item] = ""
        continue
    x = np.zeros(len(universe))
    x[genes] = 1
    overlap = membership @ x
    # P(X >= overlap) for X ~ Hypergeometric(universe, set size, cluster size).
    pvals = stats.hypergeom.sf(overlap - 1, len(universe), set_sizes, genes.size)
    padj = benjamini_hochberg(pvals)
    hits = np.flatnonzero((padj < par["alpha"]) & (overlap > 0))
    order = hits[np.lexsort((pvals[hits], -overlap[hits]))][: par["top_k"]]
    texts[item] = "; ".join(names[i] for i in order)
print(f"{len(items)} clusters, {sum(1 for t in texts.values() if t)} with significant sets")
write_prediction(par["output"], test.obs, test.uns["dataset_id"], meta["name"], texts=texts)
