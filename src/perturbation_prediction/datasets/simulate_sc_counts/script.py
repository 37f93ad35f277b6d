import logging

## VIASH START
par = {
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

from pertsci import op3_simulation as op3_sim  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger(meta["name"])

op3, params = op3_sim.setup_from_params(par)
sc = op3_sim.simulate_op3(op3, **params)
sc.uns["dataset_id"] = par["dataset_id"]
log.info("simulated %d cells x %d genes (%d non-zero counts)", sc.n_obs, sc.n_vars, sc.X.nnz)
sc.write_h5ad(par["output"], compression="gzip")
