import logging

import anndata as ad
import numpy as np
import pandas as pd

from openpert import kg
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
if par["graph_scope"] not in ("full", "walks", "paths"):
    raise ValueError(f"--graph_scope {par['graph_scope']!r}: expected full, walks or paths")
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
    candidates = items
    if par["perturbations_in_graph_only"]:
        out_deg = pd.Series(np.bincount(graph.src, minlength=graph.n_nodes), index=graph.nodes)
        candidates = items[items["perturbation"].map(out_deg).fillna(0).to_numpy() > 0]
    keep = []
    for _, group in candidates.groupby("fold", sort=True):
        perts = np.sort(group["perturbation"].unique())
        keep.extend(rng.choice(perts, size=min(par["max_perturbations"], len(perts)), replace=False))
    items = items[items["perturbation"].isin(keep)]

paths = rp.reference_paths_for_items(items, graph, basal, thresholds)
items = items.join(paths)
if par["max_items_per_perturbation"] > 0:  # keep items with candidate paths first, then a seeded fill
    order = rng.permutation(len(items))
    ranked = items.iloc[order].assign(_has=lambda d: d["n_candidate_paths"] > 0)
    ranked = ranked.sort_values("_has", ascending=False, kind="stable")
    items = ranked.groupby(["cell", "perturbation"], sort=False).head(par["max_items_per_perturbation"])
    items = items.drop(columns="_has").sort_index()
if par["graph_scope"] == "walks":
    graph = rp.restrict_graph(graph, items["perturbation"].unique(), items["gene"].unique())
elif par["graph_scope"] == "paths":
    used = {(t[0], t[2]) for text in items["candidate_paths"] for path in rp.paths_from_json(text) for t in path}
    frame = graph.to_frame()
    graph = graph.subgraph(np.array([pair in used for pair in zip(frame["source"], frame["target"])]))
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
keys = ["cell", "perturbation", "perturbation_type", "gene"]
train = items[items["fold"].isin(["train", "valid"])].rename(columns={"fold": "split"})
test = items[items["fold"].isin(test_folds)]
ad.AnnData(obs=train[keys + ["split", "label", "candidate_paths", "reference_paths", "n_reference_paths"]],
           uns=uns).write_h5ad(par["output_train"], compression="gzip")
ad.AnnData(obs=test[keys + ["fold", "candidate_paths"]], uns=uns).write_h5ad(par["output_test"], compression="gzip")
ad.AnnData(obs=test[keys + ["fold", "label", "reference_paths", "n_reference_paths"]],
           uns=uns).write_h5ad(par["output_solution"], compression="gzip")

# Context: basal expression of every gene the items or the graph mention, thresholds, GO BP annotation.
genes = pd.Index(sorted(set(graph.nodes) | set(items["gene"]) | set(items["perturbation"])))
go = rp.GOProfiles.from_gene_sets(kg.gene_sets("go_bp"), genes=genes)
used = np.flatnonzero(np.asarray(go.membership.sum(axis=0)).ravel() > 0)
cells = sorted(items["cell"].unique())
context = ad.AnnData(
    X=basal.reindex(index=genes, columns=cells).T.to_numpy(dtype=float),
    obs=pd.DataFrame({"tau_low": thresholds.loc[cells, "tau_low"].to_numpy(),
                      "tau_high": thresholds.loc[cells, "tau_high"].to_numpy(),
                      "distribution": [ps.CELLS[c]["distribution"] for c in cells]}, index=pd.Index(cells, name="cell")),
    var=pd.DataFrame({"in_graph": genes.isin(graph.nodes)}, index=genes),
    varm={"go_bp": go.membership.tocsc()[:, used].tocsr()},
    uns={**uns, "go_bp_idf": go.idf[used], "go_bp_terms": np.asarray(list(kg.gene_sets("go_bp")), dtype=object)[used],
         "expression_scale": "log1p(NX), HPA v20", "n_hpa_genes": basal_stats["n_hpa_genes"],
         "n_mapped_genes": basal_stats["n_mapped"]},
)
context.write_h5ad(par["output_context"], compression="gzip")
graph.to_frame().to_csv(par["output_graph"], index=False)
log.info("wrote %d train and %d test items, %d genes of context, %d edges", len(train), len(test), len(genes), graph.n_edges)
