import inspect
import sys

import anndata as ad
import lightgbm as lgb
import numpy as np
import pandas as pd

## VIASH START
par = {"input_train": "resources_test/pertreasonqa/k562_rpe1_small/train.h5ad",
       "input_test": "resources_test/pertreasonqa/k562_rpe1_small/test.h5ad",
       "input_context": "resources_test/pertreasonqa/k562_rpe1_small/context.h5ad",
       "input_graph": "resources_test/pertreasonqa/k562_rpe1_small/graph.csv",
       "input_gene_descriptions": "resources_test/pertreasonqa/k562_rpe1_small/gene_descriptions.parquet", "output": "prediction.h5ad",
       "n_estimators": 300, "learning_rate": 0.05, "num_leaves": 31, "early_stopping_rounds": 30, "seed": 0}
meta = {"name": "lightgbm", "resources_dir": "src/pertreasonqa/methods/lightgbm"}
## VIASH END

sys.path.append(meta["resources_dir"])
from features import CLASSES, gene_priors, item_features  # noqa: E402
from pertreasonqa_lib.dataset_files import read_context, read_graph  # noqa: E402
from pertreasonqa_lib.path_serialisation import path_triplets  # noqa: E402
from pertreasonqa_lib.prediction_files import write_prediction  # noqa: E402

train = ad.read_h5ad(par["input_train"]).obs
test = ad.read_h5ad(par["input_test"])
basal, thresholds, _ = read_context(ad.read_h5ad(par["input_context"]))
graph = read_graph(par["input_graph"])

# Basal, network and path features (appendix B.2's search with the paper's hyperparameters), plus gene priors.
x_train = item_features(train, graph, basal, thresholds)[0].join(gene_priors(train, seed=par["seed"]))
x_test, test_paths, test_votes = item_features(test.obs, graph, basal, thresholds)
x_test = x_test.join(gene_priors(train, test.obs))
y = train["label"].astype(str).map({c: i for i, c in enumerate(CLASSES)}).to_numpy()

is_valid = (train["split"].astype(str) == "valid").to_numpy()
early_stop = is_valid.any() and (~is_valid).any() and len(np.unique(y[is_valid])) > 1
# LightGBM's multiclass objective refuses a fit on two classes: a small fold may hold only two.
n_fit_classes = len(np.unique(y[~is_valid] if early_stop else y))
model = lgb.LGBMClassifier(objective="multiclass" if n_fit_classes > 2 else None, n_estimators=par["n_estimators"], learning_rate=par["learning_rate"],
                           num_leaves=par["num_leaves"], class_weight="balanced", random_state=par["seed"],
                           n_jobs=int(meta.get("cpus") or 1), verbose=-1)
if early_stop:
    # LightGBM >= 4.6 names the validation data eval_X/eval_y; older versions take eval_set.
    valid = ({"eval_X": (x_train[is_valid],), "eval_y": (y[is_valid],)}
             if "eval_X" in inspect.signature(model.fit).parameters else {"eval_set": [(x_train[is_valid], y[is_valid])]})
    model.fit(x_train[~is_valid], y[~is_valid], callbacks=[lgb.early_stopping(par["early_stopping_rounds"], verbose=False)], **valid)
else:
    model.fit(x_train, y)
proba = model.predict_proba(x_test)
answers = [CLASSES[model.classes_[i]] for i in proba.argmax(axis=1)]

# The mechanism: the cheapest path whose own vote agrees with the answer, else the cheapest path.
triplets = []
for answer, bag, votes in zip(answers, test_paths, test_votes):
    agree = [i for i, v in enumerate(votes) if v == answer]
    which = agree[0] if agree else (0 if bag else None)
    triplets.append([] if which is None else [tuple(t) for t in path_triplets(graph, bag[which])])
write_prediction(par["output"], test, answers, triplets, meta["name"])
print(pd.Series(model.feature_importances_, index=x_train.columns).sort_values(ascending=False).head(10).to_string())
