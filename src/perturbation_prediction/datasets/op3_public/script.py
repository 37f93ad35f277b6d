import logging
import sys
from pathlib import Path

## VIASH START
par = {
    "source": "kaggle",
    "input_de_train": None,
    "input_de_test": None,
    "input_de_train_parquet": "resources_test/perturbation_prediction/public_formats/kaggle_de_train.parquet",
    "input_test_values": None,
    "input_id_map": "resources_test/perturbation_prediction/public_formats/kaggle_id_map.csv",
    "url_base": "",
    "holdout_cell_types": "B cells,Myeloid cells",
    "holdout_fraction": 0.5,
    "seed": 0,
    "dataset_id": "",
    "output_de_train": "de_train.h5ad",
    "output_de_test": "de_test.h5ad",
    "output_id_map": "id_map.csv",
}
meta = {"name": "op3_public", "resources_dir": "src/perturbation_prediction/datasets/op3_public", "temp_dir": "/tmp"}
## VIASH END

sys.path.append(meta["resources_dir"])
import public_data as pdata  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
download_dir = Path(meta.get("temp_dir") or ".") / "downloads"

if par["source"] == "openproblems":
    names = {"input_de_train": "de_train.h5ad", "input_de_test": "de_test.h5ad", "input_id_map": "id_map.csv"}
    missing = [name for arg, name in names.items() if not par[arg]]
    fetched = pdata.fetch(par["url_base"] or pdata.OPENPROBLEMS_URL, tuple(missing), download_dir) if missing else {}
    paths = {arg: par[arg] or fetched[name] for arg, name in names.items()}
    uns = {"dataset_id": par["dataset_id"] or "neurips-2023-data",
           "dataset_name": "NeurIPS 2023 scPerturb DGE (Open Problems)",
           "dataset_summary": "Real OP3 data: limma-voom DE of 146 compounds in PBMCs of three donors, Open Problems release.",
           "dataset_description": "Differential expression of (cell type, compound) pairs against DMSO from the OP3 single-cell "
                                  "perturbation screen, as published by Open Problems (public test merged into training).",
           "dataset_url": pdata.OPENPROBLEMS_URL, "dataset_reference": "szalata2024benchmark",
           "dataset_organism": "homo_sapiens", "dataset_license": "CC BY 4.0"}
    de_train, de_test, id_map = pdata.load_openproblems(paths["input_de_train"], paths["input_de_test"],
                                                        paths["input_id_map"], dataset_uns=uns)
else:
    names = {"input_de_train_parquet": "de_train.parquet", "input_id_map": "id_map.csv"}
    missing = [name for arg, name in names.items() if not par[arg]]
    fetched = pdata.fetch(par["url_base"] or pdata.KAGGLE_URL, tuple(missing), download_dir,
                          auth=pdata.kaggle_auth()) if missing else {}
    paths = {arg: par[arg] or fetched[name] for arg, name in names.items()}
    uns = {"dataset_id": par["dataset_id"] or "neurips-2023-kaggle",
           "dataset_name": "NeurIPS 2023 scPerturb DGE (Kaggle)",
           "dataset_summary": "Real OP3 data in the Kaggle competition layout (sign(logFC) * -log10(p) only).",
           "dataset_description": "The competition's de_train.parquet; "
                                  + ("its test rows' values were given." if par["input_test_values"] else
                                     f"held-out rows: {par['holdout_cell_types']} of {par['holdout_fraction']:.0%} of the "
                                     f"compounds that have them (seed {par['seed']})."),
           "dataset_url": "https://www.kaggle.com/competitions/open-problems-single-cell-perturbations",
           "dataset_reference": "szalata2024benchmark", "dataset_organism": "homo_sapiens",
           "dataset_license": "Kaggle competition data licence"}
    de_train, de_test, id_map = pdata.load_kaggle(
        paths["input_de_train_parquet"], paths["input_id_map"], test_values_path=par["input_test_values"],
        holdout_cell_types=tuple(s.strip() for s in par["holdout_cell_types"].split(",") if s.strip()),
        holdout_fraction=par["holdout_fraction"], seed=par["seed"], dataset_uns=uns)

print(f"de_train {de_train.shape}, de_test {de_test.shape}, {len(id_map)} test rows")
de_train.write_h5ad(par["output_de_train"], compression="gzip")
de_test.write_h5ad(par["output_de_test"], compression="gzip")
id_map.to_csv(par["output_id_map"], index=False)
