import logging
import sys
from pathlib import Path

import numpy as np

from pertsci import knowledge_graphs as kg

## VIASH START
par = {
    "shared_data": "../shared/data",
    "output_train": "train.h5ad", "output_test": "test.h5ad", "output_solution": "solution.h5ad",
    "output_context": "context.h5ad", "output_graph": "graph.csv", "output_gene_descriptions": "gene_descriptions.parquet",
    "dataset_id": "pertreasonqa_chemical", "fold": "all", "n_clusters": 30, "seed": 0, "n_compounds": 16,
    "plates_per_donor": 1, "dmso_wells": 4, "cells_per_well": 40.0, "min_detection": 0.05, "max_changed": 100,
    "max_unchanged": 100, "max_perturbations": 2, "max_items_per_perturbation": 20, "perturbations_in_graph_only": True,
    "graph_scope": "paths",
}
meta = {"resources_dir": "src/pertreasonqa", "name": "op3_chemical", "cpus": None}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib import chemical_items, dataset_files, dataset_selection  # noqa: E402
from pertreasonqa_lib.basal_expression import load_blood_basal, log1p_nx  # noqa: E402
from pertreasonqa_lib.cell_state import cell_thresholds  # noqa: E402
from pertreasonqa_lib.signed_graph import load_signed_graph  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger(meta["name"])
if not par["shared_data"]:
    raise ValueError("--shared_data: the shared data folder (OP3 metadata, HPA, knowledge graphs) is required")
data_dir = Path(par["shared_data"])
kg_dir = data_dir / "knowledge_graphs"
test_folds = dataset_selection.folds_to_test(par["fold"], par["graph_scope"])
rng = np.random.default_rng(par["seed"])

# Simulate the compound screen, label its outcomes against DMSO (section 2.2) and split the compounds
# by their targets' functional clusters (B.1); the targets become drug-target edges of the graph.
genes_graph = load_signed_graph(kg_dir)
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

# Candidate and reference paths from the compound through its targets (B.2.3), on the whole graph.
sampling = {k: par[k] for k in ("max_perturbations", "max_items_per_perturbation", "perturbations_in_graph_only", "graph_scope")}
items, graph = dataset_selection.items_with_paths(items, graph, basal, thresholds, test_folds, rng, **sampling)
log.info("items per fold and label:\n%s", items.groupby(["fold", "label"]).size().unstack(fill_value=0))

uns = chemical_items.dataset_uns(par["dataset_id"], par["fold"], test_folds, par["n_compounds"], par["seed"], built["n_cells"], basal_stats)
counts = dataset_files.write_dataset(
    items, graph, basal, thresholds, chemical_items.CELLS, uns, test_folds, {k: par[f"output_{k}"] for k in dataset_files.OUTPUTS},
    go_sets=kg.gene_sets("go_bp", kg_dir), descriptions=kg.string_descriptions(kg_dir),
    basal_uns={"n_hpa_genes": basal_stats["n_hpa_genes"], "n_mapped_genes": basal_stats["n_mapped"]})
log.info("wrote %(n_train)d train and %(n_test)d test items, %(n_genes)d genes of context, %(n_edges)d edges", counts)
