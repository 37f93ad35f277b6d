#!/usr/bin/env bash
# Test resources of the pertreasonqa task: a small real subset of the PerturbQA CRISPRi items
# (3 perturbations per split and fold, at most 20 items per perturbation and cell, items with
# candidate paths first), all four test folds in one dataset, the graph cut down to the edges of
# the items' candidate paths, and a prediction and score of the reference-answer control.
# Needs ../shared/data (or $OPENPERT_SHARED_DATA). Deterministic (seed 0).
set -euo pipefail
cd "$(dirname "$0")/../.."

OUT=resources_test/pertreasonqa/k562_rpe1_small
TASK=src/pertreasonqa
rm -rf "$OUT"
mkdir -p "$OUT"

openpert run-component "$TASK/datasets/perturbqa_genetic/config.vsh.yaml" \
  --output_train "$OUT/train.h5ad" --output_test "$OUT/test.h5ad" --output_solution "$OUT/solution.h5ad" \
  --output_context "$OUT/context.h5ad" --output_graph "$OUT/graph.csv" \
  --dataset_id k562_rpe1_small --fold all --seed 0 \
  --max_perturbations 3 --max_items_per_perturbation 20 --perturbations_in_graph_only true --graph_scope paths

openpert run-component "$TASK/control_methods/reference_answer/config.vsh.yaml" \
  --input_train "$OUT/train.h5ad" --input_test "$OUT/test.h5ad" --input_solution "$OUT/solution.h5ad" \
  --input_context "$OUT/context.h5ad" --input_graph "$OUT/graph.csv" --output "$OUT/prediction.h5ad"

openpert run-component "$TASK/metrics/balanced_accuracy/config.vsh.yaml" \
  --input_solution "$OUT/solution.h5ad" --input_prediction "$OUT/prediction.h5ad" \
  --input_context "$OUT/context.h5ad" --output "$OUT/score.h5ad"

du -sh "$OUT"
