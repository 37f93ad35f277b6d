import itertools
import sys

import numpy as np
import pandas as pd

## VIASH START
par = {"input_train": "resources_test/perturbqa/k562/train.h5ad", "input_test": "resources_test/perturbqa/k562/test.h5ad",
       "input_kg_edges": "resources_test/perturbqa/k562/kg_edges.parquet",
       "input_gene_descriptions": "resources_test/perturbqa/k562/gene_descriptions.parquet",
       "output": "prediction.h5ad", "databases": "HuRI,CORUM"}
meta = {"resources_dir": "src/perturbqa", "name": "physical"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbqa_lib.dataset_files import read_dataset, write_prediction  # noqa: E402

train, test = read_dataset(par["input_train"], par["input_test"])
edges = pd.read_parquet(par["input_kg_edges"])
databases = {d.strip() for d in par["databases"].split(",") if d.strip()}
edges = edges[edges["database"].isin(databases)]

# Partners: direct physical interactions, and co-members of a complex.
partners: dict[str, set[str]] = {}
for a, b in edges.loc[edges["relation"] == "physical", ["source", "target"]].itertuples(index=False):
    partners.setdefault(a, set()).add(b)
    partners.setdefault(b, set()).add(a)
for _, members in edges[edges["relation"] == "complex"].groupby("target")["source"]:
    for a, b in itertools.permutations(set(members), 2):
        partners.setdefault(a, set()).add(b)

sets = train.uns["sets"]
items = test.obs[test.obs["subtask"] == "de"]


def score(pert: str, gene: str) -> float:
    mine = partners.get(pert, set())
    members = sets.get(gene, [gene])
    return float(np.mean([m in mine for m in members])) if members else 0.0


scores = pd.Series([score(p, g) for p, g in zip(items["pert"], items["gene"])], index=items.index, dtype=float)
print(f"{len(items)} de items, {int((scores > 0).sum())} with a physical interaction")
write_prediction(par["output"], test.obs, test.uns["dataset_id"], meta["name"], scores=scores)
