import logging

import anndata as ad

## VIASH START
par = {
    "input": "resources_test/perturbation_prediction/sc_counts/sc_counts.h5ad",
    "dataset_id": "op3_sc_counts",
    "dataset_name": "OP3 single-cell counts",
    "dataset_summary": "Single-cell counts of a compound screen, processed with pseudobulk limma-voom.",
    "dataset_description": "Pseudobulk limma-voom differential expression of every (cell type, compound) against DMSO.",
    "dataset_url": "",
    "dataset_reference": "",
    "dataset_organism": "homo_sapiens",
    "train_splits": "control,train,public_test",
    "test_splits": "test,private_test",
    "control_compound": "Dimethyl Sulfoxide",
    "min_cells": 3,
    "optional_layers": True,
    "half_cells_seed": 0,
    "output_de_train": "de_train.h5ad",
    "output_de_test": "de_test.h5ad",
    "output_id_map": "id_map.csv",
    "output_de_test_half": "de_test_half.h5ad",
}
meta = {"name": "process_sc_counts"}
## VIASH END

from pertsci import op3_processing  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

sc = ad.read_h5ad(par["input"])
uns = {k: par[k] for k in ("dataset_id", "dataset_name", "dataset_summary", "dataset_description", "dataset_url",
                           "dataset_reference", "dataset_organism") if par[k]}
de_train, de_test, id_map = op3_processing.process_sc_counts(
    sc,
    dataset_uns=uns,
    train_splits=[s.strip() for s in par["train_splits"].split(",") if s.strip()],
    test_splits=[s.strip() for s in par["test_splits"].split(",") if s.strip()],
    control=par["control_compound"],
    min_cells=par["min_cells"],
    optional_layers=par["optional_layers"],
    where=par["input"],
)
print(f"de_train {de_train.shape}, de_test {de_test.shape}, {len(id_map)} test rows")
# The test rows' DE from a random half of every sample's cells: the ceiling control's prediction.
de_test_half = op3_processing.half_cell_de_from_cells(sc, de_test, seed=par["half_cells_seed"], min_cells=par["min_cells"],
                                                      control=par["control_compound"], where=par["input"])
de_test_half.uns["half_cells_seed"] = par["half_cells_seed"]
de_test_half.write_h5ad(par["output_de_test_half"], compression="gzip")
de_train.write_h5ad(par["output_de_train"], compression="gzip")
de_test.write_h5ad(par["output_de_test"], compression="gzip")
id_map.to_csv(par["output_id_map"], index=False)
