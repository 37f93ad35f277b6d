#!/usr/bin/env bash
# Test resources of the pertreasonqa task, one folder per modality, each with all four test folds,
# a prediction and a score of the reference-answer control:
# - k562_rpe1_small: a small real subset of the PerturbQA CRISPRi items (6 perturbations per split
#   and fold, at most 20 items per perturbation and cell, items with candidate paths first);
# - op3_chemical_small: compound items of a small simulation of the OP3 experiment (16 compounds,
#   one plate per donor; 2 compounds per split and fold, at most 20 items per compound and cell).
# The graphs are cut down to the edges on walks of at most D_max edges from the items' perturbations to
# their genes (every path the search can return; not only the candidates); the gene descriptions to
# the genes of the context.
# Needs the venv and the shared data folder ($OPENPERT_SHARED_DATA or ../shared/data), passed to the
# dataset loaders as --shared_data. Deterministic (seed 0).
set -euo pipefail
cd "$(dirname "$0")/../.."

TASK=src/pertreasonqa
SHARED="${OPENPERT_SHARED_DATA:-$(cd .. && pwd)/shared/data}"

make_dataset() {  # <folder> <dataset component> <arguments...>
  local out=resources_test/pertreasonqa/$1 component=$2
  shift 2
  rm -rf "$out"
  mkdir -p "$out"
  openpert run-component "$TASK/datasets/$component/config.vsh.yaml" --shared_data "$SHARED" \
    --output_train "$out/train.h5ad" --output_test "$out/test.h5ad" --output_solution "$out/solution.h5ad" \
    --output_context "$out/context.h5ad" --output_graph "$out/graph.csv" \
    --output_gene_descriptions "$out/gene_descriptions.parquet" "$@"
  openpert run-component "$TASK/control_methods/reference_answer/config.vsh.yaml" \
    --input_train "$out/train.h5ad" --input_test "$out/test.h5ad" --input_solution "$out/solution.h5ad" \
    --input_context "$out/context.h5ad" --input_graph "$out/graph.csv" \
    --input_gene_descriptions "$out/gene_descriptions.parquet" --output "$out/prediction.h5ad"
  openpert run-component "$TASK/metrics/balanced_accuracy/config.vsh.yaml" \
    --input_solution "$out/solution.h5ad" --input_prediction "$out/prediction.h5ad" \
    --input_context "$out/context.h5ad" --input_graph "$out/graph.csv" --output "$out/score.h5ad"
  du -sh "$out"
}

make_dataset k562_rpe1_small perturbqa_genetic \
  --dataset_id k562_rpe1_small --fold all --seed 0 \
  --max_perturbations 6 --max_items_per_perturbation 20 --perturbations_in_graph_only true --graph_scope walks

make_dataset op3_chemical_small op3_chemical \
  --dataset_id op3_chemical_small --fold all --seed 0 \
  --n_compounds 16 --plates_per_donor 1 --dmso_wells 4 --cells_per_well 40 \
  --max_perturbations 2 --max_items_per_perturbation 20 --perturbations_in_graph_only true --graph_scope walks
