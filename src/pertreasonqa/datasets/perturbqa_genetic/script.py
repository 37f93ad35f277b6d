import logging
import sys

import numpy as np

## VIASH START
par = {
    "output_train": "train.h5ad", "output_test": "test.h5ad", "output_solution": "solution.h5ad",
    "output_context": "context.h5ad", "output_graph": "graph.csv", "dataset_id": "pertreasonqa_genetic",
    "fold": "all", "n_clusters": 30, "seed": 0, "max_perturbations": 3, "max_items_per_perturbation": 30,
    "perturbations_in_graph_only": True, "graph_scope": "paths",
}
meta = {"resources_dir": "src/pertreasonqa", "name": "perturbqa_genetic"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib import dataset_files as pertreason_dataset  # noqa: E402
from pertreasonqa_lib import items_and_splits as ps  # noqa: E402
from pertreasonqa_lib import reasoning_paths as rp  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger(meta["name"])
test_folds = pertreason_dataset.test_folds(par["fold"], par["graph_scope"])
rng = np.random.default_rng(par["seed"])

graph = rp.load_signed_graph()
items, splits = ps.genetic_items(graph.to_frame(), n_clusters=par["n_clusters"], seed=par["seed"])
basal, profile, basal_stats = ps.load_basal_expression()
basal, profile = np.log1p(basal), np.log1p(profile)  # the pipeline's scale: log1p(NX)
thresholds = rp.cell_thresholds(items, basal, profile)  # every labelled item of each cell
log.info("graph: %d genes, %d edges; thresholds (NX): %s", graph.n_nodes, graph.n_edges,
         np.expm1(thresholds[["tau_low", "tau_high"]]).round(2).to_dict("index"))

sampling = {k: par[k] for k in ("max_perturbations", "max_items_per_perturbation", "perturbations_in_graph_only", "graph_scope")}
items, graph = pertreason_dataset.items_with_paths(items, graph, basal, thresholds, test_folds, rng, **sampling)
log.info("items per fold and label:\n%s", items.groupby(["fold", "label"]).size().unstack(fill_value=0))

uns = {
    "dataset_id": par["dataset_id"],
    "dataset_name": f"PerturbQA CRISPRi K562/RPE1 ({par['fold']})",
    "dataset_summary": "PerturbQA CRISPRi outcomes of K562 (ID) and RPE1 (OOD) with cell-conditioned reference paths.",
    "dataset_description": f"Test fold(s): {', '.join(test_folds)}. Training: K562 items of the train and valid "
                           f"perturbations. HPA v20: {basal_stats['n_mapped']} of {basal_stats['n_hpa_genes']} genes map to a symbol.",
    "dataset_reference": "10.1016/j.cell.2022.05.013",
    "dataset_url": "https://github.com/genentech/PerturbQA",
    "dataset_organism": "homo_sapiens",
    "dataset_license": "PerturbQA labels: Genentech non-commercial; HPA: CC BY-SA 3.0; benchmarking use only",
    "fold": par["fold"],
}
outputs = {k: par[f"output_{k}"] for k in ("train", "test", "solution", "context", "graph")}
counts = pertreason_dataset.write_dataset(items, graph, basal, thresholds, ps.CELLS, uns, test_folds, outputs,
                           basal_uns={"n_hpa_genes": basal_stats["n_hpa_genes"], "n_mapped_genes": basal_stats["n_mapped"]})
log.info("wrote %(n_train)d train and %(n_test)d test items, %(n_genes)d genes of context, %(n_edges)d edges", counts)
