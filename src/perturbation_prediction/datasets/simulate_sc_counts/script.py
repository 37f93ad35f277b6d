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

from openpert import op3_sim  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger(meta["name"])

try:
    op3 = op3_sim.load_op3_metadata()
except FileNotFoundError as err:
    # Without the real metadata the design keeps its shape but uses made-up names.
    log.warning("%s; simulating with made-up compound and gene names", err)
    op3 = op3_sim.synthetic_metadata(n_genes=max(par["n_genes"], 200), n_compounds=max(par["n_compounds"], 12))
sc = op3_sim.simulate_op3(
    op3,
    n_genes=par["n_genes"] or None,
    n_compounds=par["n_compounds"] or None,
    n_test_compounds=par["n_test_compounds"] or None,
    n_donors=par["n_donors"],
    plates_per_donor=par["plates_per_donor"],
    dmso_wells_per_plate=par["dmso_wells"],
    cells_per_well=par["cells_per_well"],
    mean_library_size=par["mean_library_size"],
    seed=par["seed"],
)
sc.uns["dataset_id"] = par["dataset_id"]
log.info("simulated %d cells x %d genes (%d non-zero counts)", sc.n_obs, sc.n_vars, sc.X.nnz)
sc.write_h5ad(par["output"], compression="gzip")
