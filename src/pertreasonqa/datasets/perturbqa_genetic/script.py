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
    "dataset_id": "pertreasonqa_genetic", "fold": "all", "n_clusters": 30, "seed": 0, "max_perturbations": 3,
    "max_items_per_perturbation": 30, "perturbations_in_graph_only": True, "graph_scope": "paths",
}
meta = {"resources_dir": "src/pertreasonqa", "name": "perturbqa_genetic"}
## VIASH END

sys.path.append(meta["resources_dir"])
from pertreasonqa_lib import dataset_files, dataset_selection, genetic_items  # noqa: E402
from pertreasonqa_lib.basal_expression import load_basal_expression, log1p_nx  # noqa: E402
from pertreasonqa_lib.cell_state import cell_thresholds  # noqa: E402
from pertreasonqa_lib.signed_graph import load_signed_graph  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger(meta["name"])
if not par["shared_data"]:
    raise ValueError("--shared_data: the shared data folder (PerturbQA labels, HPA, knowledge graphs) is required")
data_dir = Path(par["shared_data"])
kg_dir = data_dir / "knowledge_graphs"
test_folds = dataset_selection.folds_to_test(par["fold"], par["graph_scope"])
rng = np.random.default_rng(par["seed"])

# Items of K562 and RPE1 split by functional clusters (B.1); basal expression on the log1p(NX) scale.
graph = load_signed_graph(kg_dir)
items, _ = genetic_items.genetic_items(graph.to_frame(), data_dir, n_clusters=par["n_clusters"], seed=par["seed"])
basal, profile, basal_stats = load_basal_expression(data_dir)
basal, profile = log1p_nx(basal), log1p_nx(profile)  # the pipeline's scale: log1p(NX)
# tau_low from training labels only (train and valid folds); OOD cells read them at their own basal values.
training = items[items["fold"].isin(["train", "valid"])]
thresholds = cell_thresholds(training, basal, profile, cells=sorted(items["cell"].unique()))
log.info("graph: %d genes, %d edges; thresholds (NX): %s", graph.n_nodes, graph.n_edges,
         np.expm1(thresholds[["tau_low", "tau_high"]]).round(2).to_dict("index"))

# Candidate and reference paths (B.2) of the kept items, searched on the whole graph.
sampling = {k: par[k] for k in ("max_perturbations", "max_items_per_perturbation", "perturbations_in_graph_only", "graph_scope")}
items, graph = dataset_selection.items_with_paths(items, graph, basal, thresholds, test_folds, rng, **sampling)
log.info("items per fold and label:\n%s", items.groupby(["fold", "label"]).size().unstack(fill_value=0))

uns = genetic_items.dataset_uns(par["dataset_id"], par["fold"], test_folds, basal_stats)
counts = dataset_files.write_dataset(
    items, graph, basal, thresholds, genetic_items.CELLS, uns, test_folds, {k: par[f"output_{k}"] for k in dataset_files.OUTPUTS},
    go_sets=kg.gene_sets("go_bp", kg_dir), descriptions=kg.string_descriptions(kg_dir),
    basal_uns={"n_hpa_genes": basal_stats["n_hpa_genes"], "n_mapped_genes": basal_stats["n_mapped"]})
log.info("wrote %(n_train)d train and %(n_test)d test items, %(n_genes)d genes of context, %(n_edges)d edges", counts)
