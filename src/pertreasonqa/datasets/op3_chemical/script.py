import logging
import sys

import numpy as np

## VIASH START
par = {
    "output_train": "train.h5ad", "output_test": "test.h5ad", "output_solution": "solution.h5ad",
    "output_context": "context.h5ad", "output_graph": "graph.csv", "dataset_id": "pertreasonqa_chemical",
    "fold": "all", "n_clusters": 30, "seed": 0, "n_compounds": 16, "plates_per_donor": 1, "dmso_wells": 4,
    "cells_per_well": 40.0, "min_detection": 0.05, "max_changed": 100, "max_unchanged": 100,
    "max_perturbations": 2, "max_items_per_perturbation": 20, "perturbations_in_graph_only": True, "graph_scope": "paths",
}
meta = {"resources_dir": "src/pertreasonqa", "name": "op3_chemical"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib import chemical_items as pc  # noqa: E402
from pertreasonqa_lib import dataset_files as pertreason_dataset  # noqa: E402
from pertreasonqa_lib import reasoning_paths as rp  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger(meta["name"])
test_folds = pertreason_dataset.test_folds(par["fold"], par["graph_scope"])
rng = np.random.default_rng(par["seed"])

genes_graph = rp.load_signed_graph()
simulation = {"n_compounds": par["n_compounds"] or None, "plates_per_donor": par["plates_per_donor"],
              "dmso_wells_per_plate": par["dmso_wells"], "cells_per_well": par["cells_per_well"], "seed": par["seed"]}
if simulation["n_compounds"] is not None:
    simulation["n_test_compounds"] = max(1, simulation["n_compounds"] // 3)
built = pc.chemical_items(genes_graph.nodes, genes_graph.to_frame(), simulation=simulation, n_clusters=par["n_clusters"],
                          seed=par["seed"], label_params={"min_detection": par["min_detection"], "seed": par["seed"],
                                                          "max_changed": par["max_changed"], "max_unchanged": par["max_unchanged"]})
items, splits, targets = built["items"], built["splits"], built["targets"]
graph = genes_graph.with_drug_targets(targets, pc.TARGET_DATABASE)
log.info("compounds per distribution and split:\n%s", splits.groupby(["distribution", "split"]).size())
basal, profile, basal_stats = pc.load_blood_basal()
basal, profile = np.log1p(basal), np.log1p(profile)  # the pipeline's scale: log1p(NX)
thresholds = rp.cell_thresholds(items, basal, profile)  # every labelled item of each cell
log.info("thresholds (NX): %s", np.expm1(thresholds[["tau_low", "tau_high"]]).round(2).to_dict("index"))

sampling = {k: par[k] for k in ("max_perturbations", "max_items_per_perturbation", "perturbations_in_graph_only", "graph_scope")}
items, graph = pertreason_dataset.items_with_paths(items, graph, basal, thresholds, test_folds, rng, **sampling)
log.info("items per fold and label:\n%s", items.groupby(["fold", "label"]).size().unstack(fill_value=0))

size = "full-size" if par["n_compounds"] == 0 else f"{par['n_compounds']} compounds"
uns = {
    "dataset_id": par["dataset_id"],
    "dataset_name": f"OP3 synthetic compounds, PBMC ({par['fold']})",
    "dataset_summary": "Compound outcomes of the synthetic OP3 experiment with drug-target-anchored, cell-conditioned reference paths.",
    "dataset_description": f"Test fold(s): {', '.join(test_folds)}. Simulation ({size}, seed {par['seed']}): "
                           f"{built['n_cells']} cells. Training: B, myeloid and NK cell items of the train and valid "
                           f"compounds. HPA v20 blood: {basal_stats['n_mapped']} of {basal_stats['n_hpa_genes']} genes map to a symbol.",
    "dataset_reference": "szalata2024benchmark",
    "dataset_url": "https://github.com/openproblems-bio/task_perturbation_prediction",
    "dataset_organism": "homo_sapiens",
    "dataset_license": "CC BY 4.0 (OP3 metadata); HPA: CC BY-SA 3.0",
    "fold": par["fold"],
}
outputs = {k: par[f"output_{k}"] for k in ("train", "test", "solution", "context", "graph")}
counts = pertreason_dataset.write_dataset(
    items, graph, basal, thresholds, pc.CELLS, uns, test_folds, outputs,
    basal_uns={"n_hpa_genes": basal_stats["n_hpa_genes"], "n_mapped_genes": basal_stats["n_mapped"]})
log.info("wrote %(n_train)d train and %(n_test)d test items, %(n_genes)d genes of context, %(n_edges)d edges", counts)
