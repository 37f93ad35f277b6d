import logging
import sys
from pathlib import Path

import numpy as np

## VIASH START
par = {
    "shared_data": "../shared/data",
    "output_items": "items.parquet", "output_network": "network.parquet", "output_cells": "cells.h5ad",
    "n_clusters": 30, "seed": 0,
}
meta = {"resources_dir": "src/pertreasonqa", "name": "perturbqa_genetic"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib import dataset_builds, genetic_items  # noqa: E402
from pertreasonqa_lib.basal_expression import load_basal_expression, log1p_nx  # noqa: E402
from pertreasonqa_lib.cell_state import cell_thresholds  # noqa: E402
from pertreasonqa_lib.signed_graph import load_signed_graph  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger(meta["name"])
if not par["shared_data"]:
    raise ValueError("--shared_data: the shared data folder (PerturbQA labels, HPA, knowledge graphs) is required")
data_dir = Path(par["shared_data"])

# Items of K562 and RPE1 split by functional clusters (B.1); basal expression on the log1p(NX) scale.
graph = load_signed_graph(data_dir / "knowledge_graphs")
items, _ = genetic_items.genetic_items(graph.to_frame(), data_dir, n_clusters=par["n_clusters"], seed=par["seed"])
basal, profile, basal_stats = load_basal_expression(data_dir)
basal, profile = log1p_nx(basal), log1p_nx(profile)  # the pipeline's scale: log1p(NX)
# tau_low from training labels only (train and valid folds); OOD cells read them at their own basal values.
training = items[items["fold"].isin(["train", "valid"])]
thresholds = cell_thresholds(training, basal, profile, cells=sorted(items["cell"].unique()))
log.info("graph: %d genes, %d edges; thresholds (NX): %s", graph.n_nodes, graph.n_edges,
         np.expm1(thresholds[["tau_low", "tau_high"]]).round(2).to_dict("index"))

dataset_builds.write_build(
    dataset_builds.Build(items, graph, basal, thresholds, genetic_items.CELLS, {"modality": "genetic", "basal_stats": basal_stats}),
    {k: par[f"output_{k}"] for k in dataset_builds.BUILD_OUTPUTS})
log.info("built %d items of %d cells", len(items), thresholds.shape[0])
