import logging

## VIASH START
par = {
    "shared_data": "../shared/data",
    "dataset_id": "op3_synthetic_sc",
    "seed": 0,
    "n_genes": 80,
    "n_compounds": 6,
    "n_test_compounds": 2,
    "n_donors": 3,
    "plates_per_donor": 1,
    "dmso_wells": 2,
    "cells_per_well": 10.0,
    "mean_library_size": 6000.0,
    "output": "sc_counts.h5ad",
}
meta = {"name": "simulate_sc_counts"}
## VIASH END

from pertsci import op3_simulation  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger(meta["name"])

# The real OP3 design (compounds, cell types, genes, test rows, GRNs) from the shared data folder;
# without it, the same shape with made-up names.
op3, params = op3_simulation.simulation_design(
    par["shared_data"], n_genes=par["n_genes"], n_compounds=par["n_compounds"],
    n_test_compounds=par["n_test_compounds"], n_donors=par["n_donors"], plates_per_donor=par["plates_per_donor"],
    dmso_wells=par["dmso_wells"], cells_per_well=par["cells_per_well"], mean_library_size=par["mean_library_size"],
    seed=par["seed"])
sc = op3_simulation.simulate_op3(op3, **params)
sc.uns["dataset_id"] = par["dataset_id"]
log.info("simulated %d cells x %d genes (%d non-zero counts)", sc.n_obs, sc.n_vars, sc.X.nnz)
sc.write_h5ad(par["output"], compression="gzip")
