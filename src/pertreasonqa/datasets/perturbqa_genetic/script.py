import logging

import numpy as np

from openpert import pertreason_dataset
from openpert import pertreason_splits as ps
from openpert import reasoning_paths as rp

## VIASH START
par = {
    "output_train": "train.h5ad", "output_test": "test.h5ad", "output_solution": "solution.h5ad",
    "output_context": "context.h5ad", "output_graph": "graph.csv", "dataset_id": "pertreasonqa_genetic",
    "fold": "all", "n_clusters": 30, "seed": 0, "max_perturbations": 3, "max_items_per_perturbation": 30,
    "perturbations_in_graph_only": True, "graph_scope": "paths",
}
meta = {"name": "perturbqa_genetic"}
## VIASH END

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger(meta["name"])
if par["graph_scope"] not in pertreason_dataset.GRAPH_SCOPES:
    raise ValueError(f"--graph_scope {par['graph_scope']!r}: expected one of {', '.join(pertreason_dataset.GRAPH_SCOPES)}")
if par["fold"] != "all" and par["fold"] not in ps.FOLDS:
    raise ValueError(f"--fold {par['fold']!r}: expected 'all' or one of {', '.join(ps.FOLDS)}")
test_folds = list(ps.FOLDS) if par["fold"] == "all" else [par["fold"]]
rng = np.random.default_rng(par["seed"])

graph = rp.load_signed_graph()
items, splits = ps.genetic_items(graph.to_frame(), n_clusters=par["n_clusters"], seed=par["seed"])
basal, profile, basal_stats = ps.load_basal_expression()
basal, profile = np.log1p(basal), np.log1p(profile)  # the pipeline's scale: log1p(NX)
thresholds = rp.cell_thresholds(items, basal, profile)  # every labelled item of each cell
log.info("graph: %d genes, %d edges; thresholds (NX): %s", graph.n_nodes, graph.n_edges,
         np.expm1(thresholds[["tau_low", "tau_high"]]).round(2).to_dict("index"))

items = items[items["fold"].isin(["train", "valid", *test_folds])]
if par["max_perturbations"] > 0:  # small resources: a seeded sample of perturbations per split
    items = pertreason_dataset.sample_perturbations(items, graph, par["max_perturbations"], rng, par["perturbations_in_graph_only"])
items = items.join(rp.reference_paths_for_items(items, graph, basal, thresholds))
if par["max_items_per_perturbation"] > 0:
    items = pertreason_dataset.sample_items(items, par["max_items_per_perturbation"], rng)
graph = pertreason_dataset.scope_graph(graph, items, par["graph_scope"])
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
