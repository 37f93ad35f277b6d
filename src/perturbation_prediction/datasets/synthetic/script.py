import logging

## VIASH START
par = {
    "shared_data": "../shared/data",
    "dataset_id": "op3_synthetic",
    "seed": 0,
    "n_genes": 150,
    "n_compounds": 10,
    "n_test_compounds": 4,
    "n_donors": 3,
    "plates_per_donor": 1,
    "dmso_wells": 3,
    "cells_per_well": 15.0,
    "mean_library_size": 2500.0,
    "min_cells": 3,
    "optional_layers": True,
    "half_cells_seed": 0,
    "output_de_train": "de_train.h5ad",
    "output_de_test": "de_test.h5ad",
    "output_id_map": "id_map.csv",
    "output_de_test_half": "de_test_half.h5ad",
}
meta = {"name": "synthetic"}
## VIASH END

from pertsci import op3_processing, op3_simulation  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger(meta["name"])

# The real OP3 design (compounds, cell types, genes, test rows, GRNs) from the shared data folder;
# without it, the same shape with made-up names.
op3, params = op3_simulation.simulation_design(
    par["shared_data"], n_genes=par["n_genes"], n_compounds=par["n_compounds"],
    n_test_compounds=par["n_test_compounds"], n_donors=par["n_donors"], plates_per_donor=par["plates_per_donor"],
    dmso_wells=par["dmso_wells"], cells_per_well=par["cells_per_well"], mean_library_size=par["mean_library_size"],
    seed=par["seed"])
# Wells are summed as they are drawn: the memory of the pseudobulk matrix suffices, also at full size.
# A random half of every sample's cells is summed too, for the half-cell ceiling.
pb = op3_simulation.simulate_op3_pseudobulk(op3, min_cells=par["min_cells"], half_seed=par["half_cells_seed"], **params)
n_cells = int(pb.obs["n_cells"].sum())
size = "full-size" if par["n_genes"] == 0 and par["n_compounds"] == 0 else "reduced"
uns = {
    "dataset_id": par["dataset_id"],
    "dataset_name": f"OP3 synthetic ({size})",
    "dataset_summary": "Simulated OP3-shaped PBMC compound screen processed with pseudobulk limma-voom.",
    "dataset_description": (
        f"Negative binomial counts of about {n_cells} cells x {pb.n_vars} genes simulated with the real OP3 design "
        f"({op3.source}): {pb.obs['sm_name'].nunique() - 1} compounds, {pb.obs['plate_name'].nunique()} plates, "
        f"{pb.obs['donor_id'].nunique()} donors, seed {par['seed']}. Compound effects act through shared, "
        "cell-type-specific mechanisms (pertsci.op3_simulation)."),
    "dataset_url": "https://github.com/openproblems-bio/task_perturbation_prediction",
    "dataset_reference": "szalata2024benchmark", "dataset_organism": "homo_sapiens",
    "dataset_license": "CC BY 4.0 (metadata: Open Problems OP3)",
}
log.info("%d pseudobulk samples from %d cells", pb.n_obs, n_cells)
# Pseudobulk limma-voom DE of every (cell type, compound) against DMSO; test rows in the real id_map's order.
de_train, de_test, id_map = op3_processing.process_pseudobulk(
    pb, dataset_uns=uns, min_cells=par["min_cells"], optional_layers=par["optional_layers"],
    test_row_order=(pb.uns.get("simulation") or {}).get("test_rows"), where="simulated counts")
log.info("de_train %s, de_test %s, %d test rows", de_train.shape, de_test.shape, len(id_map))
# The test rows' DE from half the cells: the ceiling control's prediction (a solution file).
de_test_half = op3_processing.half_cell_de(pb, de_test, where="simulated counts")
de_test_half.uns["half_cells_seed"] = par["half_cells_seed"]
de_test_half.write_h5ad(par["output_de_test_half"], compression="gzip")
de_train.write_h5ad(par["output_de_train"], compression="gzip")
de_test.write_h5ad(par["output_de_test"], compression="gzip")
id_map.to_csv(par["output_id_map"], index=False)
