import sys
from pathlib import Path

## VIASH START
par = {
    "input": "resources_test/perturbation_effect/raw/gears_perturbseq.h5ad", "input_format": "auto", "obs_filter": None, "perturbable_genes": None,
    "dataset_id": "perturbseq", "dataset_name": "Perturb-seq screen", "dataset_reference": "", "dataset_license": "",
    "min_cells": 5, "n_top_genes": 0, "class_source": "go_bp", "split": "simulation", "lsft_fraction": 0.0,
    "logo_source": "functional_class", "logo_class": "auto", "split_seed": 1, "val_gene_set_size": 0.9,
    "shared_data": "../shared/data", "output_train": "train.h5ad", "output_test": "test.h5ad",
    "output_solution": "solution.h5ad", "output_gene_knowledge": "gene_knowledge.parquet",
}
meta = {"resources_dir": "src/perturbation_effect", "name": "perturbseq_h5ad"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_effect_lib import embeddings, gene_knowledge, pseudobulk  # noqa: E402
from perturbation_effect_lib import holdout_splits as splits  # noqa: E402

if len(par["dataset_name"]) > 30:
    raise ValueError(f"--dataset_name {par['dataset_name']!r} heads table columns: at most 30 characters (long text goes in the summary)")
if par["shared_data"] is None:
    raise ValueError("functional classes and gene knowledge come from the shared data: --shared_data is required")
shared = Path(par["shared_data"])

cells = pseudobulk.read_perturbseq(par["input"], par["input_format"], obs_filter=par["obs_filter"])
selected = f" (cells with {', '.join(cells.uns['obs_filter'])})" if cells.uns["obs_filter"] else ""
left_out = ""
if par["perturbable_genes"] is not None:
    # GEARS drops perturbations of genes outside its perturbation graph on loading, before it splits
    # (PertData.load); the paper's splits are drawn over what remains.
    cells, dropped = pseudobulk.keep_perturbable(cells, pseudobulk.read_gene_list(par["perturbable_genes"]))
    print(f"{len(dropped)} perturbations target genes outside --perturbable_genes and are left out: {dropped[:20]}", flush=True)
    left_out = f"; {len(dropped)} perturbations of genes outside GEARS's perturbation graph left out"
# The split is drawn over every perturbation of the file, as GEARS draws it, also those that
# --min_cells then drops.
universe = pseudobulk.perturbation_keys(cells)
profiles, control = pseudobulk.pseudobulk(cells, min_cells=par["min_cells"])
# A random half of each perturbation's cells: the ceiling control's prediction.
half_means, half_cells = pseudobulk.half_pseudobulk(cells, profiles, seed=par["split_seed"])
if par["n_top_genes"]:
    # Chosen on control cells only, so no test perturbation influences which genes are scored.
    keep = control.sort_values(ascending=False, kind="stable").index[: par["n_top_genes"]]
    keep = control.index[control.index.isin(keep)]
    columns = control.index.get_indexer(keep)
    profiles, control, half_means = profiles[:, keep].copy(), control[keep], half_means[:, columns]
profiles.obs["functional_class"] = splits.annotate_functional_class(list(profiles.obs_names), par["class_source"], data_dir=shared)
print(f"{cells.n_obs} cells ({cells.uns['layout']} layout){selected} -> {profiles.n_obs} perturbations x {profiles.n_vars} genes", flush=True)

uns = {
    "dataset_id": par["dataset_id"],
    "dataset_name": par["dataset_name"],
    "dataset_summary": f"Pseudobulk of a Perturb-seq screen ({profiles.n_obs} perturbations, {profiles.n_vars} genes).",
    "dataset_description": f"Read from {cells.uns['layout']} h5ad{selected}; split {par['split']} (seed {par['split_seed']}), LSFT fraction {par['lsft_fraction']}{left_out}.",
    "dataset_organism": "homo_sapiens",
    "dataset_reference": par["dataset_reference"],
    "dataset_license": par["dataset_license"],
}
train, test, solution = splits.split_profiles(
    profiles, control, split=par["split"], lsft_fraction=par["lsft_fraction"], logo_source=par["logo_source"],
    logo_class=par["logo_class"], seed=par["split_seed"], val_gene_set_size=par["val_gene_set_size"], uns=uns,
    data_dir=shared, half_profiles=(half_means, half_cells), universe=universe,
)
# Prior knowledge of the screen's genes (measured genes and targets) for the methods that embed by it.
knowledge = gene_knowledge.build_gene_knowledge(shared / "knowledge_graphs", embeddings.genes_to_embed(profiles.var_names, profiles.obs_names),
                                                 gene_map=shared / "perturbqa" / "k562_gw_mapping_full.json")
print(f"{train.n_obs} training and {test.n_obs} test perturbations; held-out class: {train.uns.get('heldout_class', '-')}")
train.write_h5ad(par["output_train"], compression="gzip")
test.write_h5ad(par["output_test"], compression="gzip")
solution.write_h5ad(par["output_solution"], compression="gzip")
knowledge.to_parquet(par["output_gene_knowledge"], index=False)
