import logging
import sys
from pathlib import Path

import numpy as np

## VIASH START
par = {
    "shared_data": "../shared/data",
    "output_items": "items.parquet", "output_network": "network.parquet", "output_cells": "cells.h5ad",
    "n_clusters": 30, "seed": 0, "n_compounds": 16, "plates_per_donor": 1, "dmso_wells": 4, "cells_per_well": 40.0,
    "min_detection": 0.05, "max_changed": 100, "max_unchanged": 100,
}
meta = {"resources_dir": "src/pertreasonqa", "name": "op3_chemical", "cpus": None}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib import chemical_items, dataset_builds  # noqa: E402
from pertreasonqa_lib.basal_expression import load_blood_basal, log1p_nx  # noqa: E402
from pertreasonqa_lib.cell_state import cell_thresholds  # noqa: E402
from pertreasonqa_lib.signed_graph import load_signed_graph  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger(meta["name"])
if not par["shared_data"]:
    raise ValueError("--shared_data: the shared data folder (OP3 metadata, HPA, knowledge graphs) is required")
data_dir = Path(par["shared_data"])

# Simulate the compound screen, label its outcomes against DMSO (section 2.2) and split the compounds
# by their targets' functional clusters (B.1); the targets become drug-target edges of the graph.
genes_graph = load_signed_graph(data_dir / "knowledge_graphs")
simulation = chemical_items.simulation_design(par["n_compounds"], par["plates_per_donor"], par["dmso_wells"], par["cells_per_well"], par["seed"])
built = chemical_items.chemical_items(
    genes_graph.nodes, genes_graph.to_frame(), data_dir, simulation=simulation, n_clusters=par["n_clusters"], seed=par["seed"],
    label_params={"seed": par["seed"], "n_threads": meta.get("cpus") or 1,
                  **{k: par[k] for k in ("min_detection", "max_changed", "max_unchanged")}})
items, graph = built["items"], genes_graph.with_drug_targets(built["targets"], chemical_items.TARGET_DATABASE)
log.info("compounds per distribution and split:\n%s", built["splits"].groupby(["distribution", "split"]).size())
basal, profile, basal_stats = load_blood_basal(data_dir)
basal, profile = log1p_nx(basal), log1p_nx(profile)  # the pipeline's scale: log1p(NX)
# tau_low from training labels only (train and valid folds); OOD cells read them at their own basal values.
training = items[items["fold"].isin(["train", "valid"])]
thresholds = cell_thresholds(training, basal, profile, cells=sorted(items["cell"].unique()))
log.info("thresholds (NX): %s", np.expm1(thresholds[["tau_low", "tau_high"]]).round(2).to_dict("index"))

facts = {"modality": "chemical", "n_compounds": par["n_compounds"], "seed": par["seed"], "n_cells": built["n_cells"],
         "basal_stats": basal_stats}
dataset_builds.write_build(dataset_builds.Build(items, graph, basal, thresholds, chemical_items.CELLS, facts),
                           {k: par[f"output_{k}"] for k in dataset_builds.BUILD_OUTPUTS})
log.info("built %d items of %d cells, a graph of %d edges", len(items), thresholds.shape[0], graph.n_edges)
