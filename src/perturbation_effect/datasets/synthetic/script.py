import sys
from pathlib import Path

from pertsci import knowledge_graphs as kg

## VIASH START
par = {
    "dataset_id": "synthetic_simulation", "n_genes": 600, "n_perturbations": 40, "n_combinations": 8,
    "n_programs": 4, "program_min_size": 8, "program_max_size": 40, "frac_unassigned": 0.2,
    "cells_per_perturbation": 20, "n_control_cells": 200, "seed": 0, "gene_source": "k562",
    "split": "simulation", "lsft_fraction": 0.0, "logo_source": "go_bp", "logo_class": "auto", "split_seed": 1, "val_gene_set_size": 0.9,
    "shared_data": "../shared/data", "output_train": "train.h5ad", "output_test": "test.h5ad",
    "output_solution": "solution.h5ad", "output_gene_knowledge": "gene_knowledge.parquet",
}
meta = {"resources_dir": "src/perturbation_effect", "name": "synthetic"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_effect_lib import embeddings, gene_knowledge, pseudobulk  # noqa: E402
from perturbation_effect_lib import holdout_splits as splits  # noqa: E402
from perturbation_effect_lib import perturbseq_simulation as perturb_sim  # noqa: E402

real = par["gene_source"] == "k562"
if real and par["shared_data"] is None:
    raise ValueError("--gene_source k562 reads the K562 baseline and GO terms: --shared_data (the shared data folder) is required")
shared = Path(par["shared_data"]) if par["shared_data"] is not None else None
kg_dir = shared / "knowledge_graphs" if shared is not None else None
screen = perturb_sim.simulate_screen(
    n_genes=par["n_genes"], n_perturbations=par["n_perturbations"], n_combinations=par["n_combinations"],
    n_programs=par["n_programs"], program_size=(par["program_min_size"], par["program_max_size"]),
    frac_unassigned=par["frac_unassigned"], cells_per_perturbation=par["cells_per_perturbation"],
    n_control_cells=par["n_control_cells"], seed=par["seed"],
    baseline=perturb_sim.load_baseline(shared / perturb_sim.GASPERINI_BASELINE, kg.ensembl_to_symbol(shared / "perturbqa" / "k562_gw_mapping_full.json")) if real else None,
    gene_sets=kg.gene_sets("go_bp", kg_dir) if real else None,
)
profiles, control = pseudobulk.pseudobulk(screen.cells)
# A random half of each perturbation's cells: the ceiling control's prediction.
half = pseudobulk.half_pseudobulk(screen.cells, profiles, seed=par["seed"])
profiles.obs["functional_class"] = screen.functional_class.reindex(profiles.obs_names).to_numpy()
print(f"simulated {screen.cells.n_obs} cells, {profiles.n_obs} perturbations x {profiles.n_vars} genes", flush=True)

setting = par["split"] + (f", LSFT {par['lsft_fraction']:.0%}" if par["lsft_fraction"] else "")
if par["split"] == "logo":
    setting += f" ({par['logo_source']})"
# The label heads table columns: at most 30 characters ("Synthetic, simulation, LSFT 10%" is the longest setting).
label = f"Synth. {setting}"
if len(label) > 30:
    raise ValueError(f"dataset label {label!r} is longer than 30 characters")
uns = {
    "dataset_id": par["dataset_id"],
    "dataset_name": label,
    "dataset_summary": f"Synthetic K562 Perturb-seq, {setting}: a simulated CRISPRi screen with gene programs and real K562 count statistics.",
    "dataset_description": (
        f"{par['n_perturbations']} single and {par['n_combinations']} combined perturbations of "
        f"{par['n_genes']} genes in {par['n_programs']} programs ({'GO BP terms, Gasperini 2019 K562 baseline' if real else 'synthetic genes'}); "
        f"evaluation setting: {setting}; simulation seed {par['seed']}, split seed {par['split_seed']}."
    ),
    "dataset_organism": "homo_sapiens",
    "dataset_reference": "10.1038/s41592-025-02772-6",
    "dataset_license": "Synthetic. Gene parameters: perturbplan (MIT) from Gasperini et al. 2019; programs: GO BP 2021 (CC BY 4.0).",
}
train, test, solution = splits.split_profiles(
    profiles, control, split=par["split"], lsft_fraction=par["lsft_fraction"],
    logo_source=par["logo_source"] if real else "functional_class", logo_class=par["logo_class"],
    seed=par["split_seed"], val_gene_set_size=par["val_gene_set_size"], uns=uns, data_dir=shared, half_profiles=half,
)
# Prior knowledge of the screen's genes (measured genes and targets) for the methods that embed by it.
knowledge = gene_knowledge.build_gene_knowledge(kg_dir, embeddings.genes_to_embed(profiles.var_names, profiles.obs_names),
                                                 gene_map=shared / "perturbqa" / "k562_gw_mapping_full.json" if shared else None)
print(f"{train.n_obs} training, {train.uns['n_test']} test and {train.uns['n_validation']} validation perturbations; held-out class: {train.uns.get('heldout_class', '-')}")
train.write_h5ad(par["output_train"], compression="gzip")
test.write_h5ad(par["output_test"], compression="gzip")
solution.write_h5ad(par["output_solution"], compression="gzip")
knowledge.to_parquet(par["output_gene_knowledge"], index=False)
