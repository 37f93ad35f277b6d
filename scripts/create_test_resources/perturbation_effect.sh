#!/usr/bin/env bash
# Test resources of the perturbation_effect task: a small synthetic screen (simulation split) with
# its gene knowledge, the additive baseline's prediction and its score, and a tiny single-cell screen in the
# GEARS layout for the Perturb-seq loader.
#
# Inputs (nothing else is read; the same inputs give the same files):
#   shared data ($OPENPERT_SHARED_DATA, else ../shared/data beside the repository):
#     basal_expression/singlecell_baseline_K562_Gasperini.tsv, perturbqa/k562_gw_mapping_full.json,
#     knowledge_graphs/GO_Biological_Process_2021.gmt (both screens); knowledge_graphs/huri_binary_ppi.tsv
#     and knowledge_graphs/omnipath_signed_directed.tsv (the synthetic dataset's gene knowledge)
#   seeds: raw/ screen seed=3; synthetic_simulation --seed 0, its simulation split --split_seed 1 (the
#     default; GEARS's draw with NumPy's legacy generator); the method and the metric draw nothing
#
# Writes resources_test/perturbation_effect/ ($OPENPERT_TEST_RESOURCES/perturbation_effect/ when set:
# tests/test_test_resources.py regenerates it elsewhere and compares). Needs the venv.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
source scripts/create_test_resources/run_component.bash  # run_component: `openpert run-component` in one harness process
SHARED=${OPENPERT_SHARED_DATA:-$repo/../shared/data}
OUT="${OPENPERT_TEST_RESOURCES:-$repo/resources_test}/perturbation_effect"
DS=$OUT/synthetic_simulation
rm -rf "$OUT"
mkdir -p "$OUT/raw" "$DS"

gears_screen() {  # raw/: the tiny single-cell screen in the GEARS layout
  SHARED="$SHARED" PYTHONPATH=src/perturbation_effect python - "$OUT/raw" <<'PY'
import os
import sys
from pathlib import Path

from perturbation_effect_lib import perturbseq_simulation as perturb_sim
from pertsci import knowledge_graphs as kg

shared = Path(os.environ["SHARED"])
screen = perturb_sim.simulate_screen(
    n_genes=150, n_perturbations=14, n_combinations=2, n_programs=2, program_size=(4, 10),
    cells_per_perturbation=12, n_control_cells=60, seed=3,
    baseline=perturb_sim.load_baseline(shared / perturb_sim.GASPERINI_BASELINE, kg.ensembl_to_symbol(shared / "perturbqa" / "k562_gw_mapping_full.json")),
    gene_sets=kg.gene_sets("go_bp", shared / "knowledge_graphs"),
)
cells = screen.cells
del cells.layers["counts"]  # GEARS files carry log-normalised X; counts would only add size
cells.write_h5ad(Path(sys.argv[1]) / "gears_perturbseq.h5ad", compression="gzip")
PY
}

synthetic_dataset() {  # synthetic_simulation/: the dataset, the additive baseline's prediction and its score
  run_component src/perturbation_effect/datasets/synthetic/config.vsh.yaml \
    --dataset_id synthetic_simulation --n_genes 1200 --n_perturbations 150 --n_combinations 30 \
    --n_programs 10 --program_min_size 8 --program_max_size 30 --cells_per_perturbation 60 \
    --n_control_cells 600 --seed 0 --split simulation --shared_data "$SHARED" \
    --output_train "$DS/train.h5ad" --output_test "$DS/test.h5ad" --output_solution "$DS/solution.h5ad" \
    --output_gene_knowledge "$DS/gene_knowledge.parquet"

  # The example prediction is the additive baseline's: every metric is defined on it ("no change" has
  # no Pearson delta, and the mean baseline, the reference of the perturbation-specific correlation, none of that).
  run_component src/perturbation_effect/methods/additive/config.vsh.yaml \
    --input_train "$DS/train.h5ad" --input_test "$DS/test.h5ad" --output "$DS/prediction.h5ad"

  run_component src/perturbation_effect/metrics/pearson_delta/config.vsh.yaml \
    --input_solution "$DS/solution.h5ad" --input_prediction "$DS/prediction.h5ad" --output "$DS/score.h5ad"
}

# The two share nothing: they run at once.
at_once gears_screen synthetic_dataset

du -sh "$OUT"
