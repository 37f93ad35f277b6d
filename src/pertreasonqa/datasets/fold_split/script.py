import logging
import sys
from pathlib import Path

import numpy as np

from pertsci import knowledge_graphs as kg

## VIASH START
par = {
    "input_items": "items.parquet", "input_network": "network.parquet", "input_cells": "cells.h5ad",
    "shared_data": "../shared/data",
    "output_train": "train.h5ad", "output_test": "test.h5ad", "output_solution": "solution.h5ad",
    "output_context": "context.h5ad", "output_graph": "graph.csv", "output_gene_descriptions": "gene_descriptions.parquet",
    "dataset_id": "pertreasonqa", "fold": "all", "seed": 0, "max_perturbations": 3, "max_items_per_perturbation": 30,
    "perturbations_in_graph_only": True, "graph_scope": "walks",
}
meta = {"resources_dir": "src/pertreasonqa", "name": "fold_split"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib import dataset_builds, dataset_files, dataset_selection  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger(meta["name"])
if not par["shared_data"]:
    raise ValueError("--shared_data: the shared data folder (GO BP, STRING descriptions) is required")
kg_dir = Path(par["shared_data"]) / "knowledge_graphs"
test_folds = dataset_selection.folds_to_test(par["fold"], par["graph_scope"])
build = dataset_builds.read_build(par["input_items"], par["input_network"], par["input_cells"])

# Candidate and reference paths (B.2) of the kept items, searched on the build's whole graph.
sampling = {k: par[k] for k in ("max_perturbations", "max_items_per_perturbation", "perturbations_in_graph_only", "graph_scope")}
items, graph = dataset_selection.items_with_paths(build.items, build.graph, build.basal, build.thresholds, test_folds,
                                                  np.random.default_rng(par["seed"]), **sampling)
log.info("items per fold and label:\n%s", items.groupby(["fold", "label"]).size().unstack(fill_value=0))

uns = dataset_builds.fold_uns(build.facts, par["dataset_id"], par["fold"], test_folds)
basal_stats = build.facts["basal_stats"]
counts = dataset_files.write_dataset(
    items, graph, build.basal, build.thresholds, build.cells, uns, test_folds,
    {k: par[f"output_{k}"] for k in dataset_files.OUTPUTS},
    go_sets=kg.gene_sets("go_bp", kg_dir), descriptions=kg.string_descriptions(kg_dir),
    basal_uns={"n_hpa_genes": basal_stats["n_hpa_genes"], "n_mapped_genes": basal_stats["n_mapped"]})
log.info("wrote %(n_train)d train and %(n_test)d test items, %(n_genes)d genes of context, %(n_edges)d edges", counts)
