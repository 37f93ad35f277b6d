import sys

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from pertsci.embeddings import embed

## VIASH START
par = {"input_train": "resources_test/perturbqa/k562/train.h5ad", "input_test": "resources_test/perturbqa/k562/test.h5ad",
       "input_kg_edges": "resources_test/perturbqa/k562/kg_edges.parquet",
       "input_gene_descriptions": "resources_test/perturbqa/k562/gene_descriptions.parquet",
       "output": "prediction.h5ad", "C": 1.0, "max_iter": 2000, "seed": 0}
meta = {"resources_dir": "src/perturbqa", "name": "genept_lr"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbqa_lib.dataset_files import read_dataset, write_prediction  # noqa: E402
from perturbqa_lib.knowledge_text import describe_gene  # noqa: E402
from perturbqa_lib.task_items import training_pairs  # noqa: E402

train, test = read_dataset(par["input_train"], par["input_test"])
descriptions = pd.read_parquet(par["input_gene_descriptions"]).drop_duplicates("gene").set_index("gene")["description"]
sets = train.uns["sets"]
pairs = test.obs[test.obs["subtask"].isin(["de", "dir"])]

# Embed every gene that occurs (members of downstream sets included), once.
genes = set(train.obs["pert"]) | set(pairs["pert"]) | set(train.obs["gene"]) | set(pairs["gene"])
genes = sorted((genes - set(sets)) | {m for v in sets.values() for m in v})
described = [g for g in genes if g in descriptions.index and descriptions[g]]
vectors = dict(zip(described, embed([describe_gene(g, descriptions[g]) for g in described])))
print(f"{len(described)} of {len(genes)} genes have a description")


def features(names: pd.Series, fallback: np.ndarray) -> np.ndarray:
    """Embedding per entity: its own, its set members' mean, or the fallback."""
    out = np.empty((len(names), fallback.size), dtype=np.float32)
    cache: dict[str, np.ndarray] = {}
    for i, name in enumerate(names):
        if name not in cache:
            members = [m for m in sets.get(name, [name]) if m in vectors]
            cache[name] = np.mean([vectors[m] for m in members], axis=0) if members else fallback
        out[i] = cache[name]
    return out


scores = {}
for subtask in ("de", "dir"):
    items = pairs[pairs["subtask"] == subtask]
    if items.empty:
        continue
    tr = training_pairs(train.obs, subtask)
    # Unknown genes get the mean embedding of the training perturbations / genes (appendix A.4).
    known_p = [vectors[p] for p in pd.unique(tr["pert"]) if p in vectors]
    known_g = [vectors[g] for g in pd.unique(tr["gene"]) if g in vectors]
    mean_p = np.mean(known_p, axis=0) if known_p else np.zeros(384, np.float32)
    mean_g = np.mean(known_g, axis=0) if known_g else np.zeros(384, np.float32)
    # Fitted in float64 to a tight tolerance: the optimum, not where the solver happened to stop, so
    # the scores do not depend on the CPU's BLAS kernel (float32 products and a loose stop did, by 0.02).
    X_train = np.hstack([features(tr["pert"], mean_p), features(tr["gene"], mean_g)]).astype(np.float64)
    X_test = np.hstack([features(items["pert"], mean_p), features(items["gene"], mean_g)]).astype(np.float64)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=par["C"], max_iter=par["max_iter"], tol=1e-10,
                                                               random_state=par["seed"]))
    model.fit(X_train, tr["label"].to_numpy())
    scores.update(zip(items.index, model.predict_proba(X_test)[:, 1]))
    print(f"{subtask}: trained on {len(tr)} pairs, predicted {len(items)}")
write_prediction(par["output"], test.obs, test.uns["dataset_id"], meta["name"], scores=pd.Series(scores, dtype=float))
