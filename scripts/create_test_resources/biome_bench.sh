#!/usr/bin/env bash
# Test resources of biome_bench: a small real subset of the mouse items (6 KEGG pathways, both
# tasks), split by pathway, with a baseline prediction and its score; and, in raw/, three pathways
# of the original JSONL files (only the fields the loader reads) for the loader's component test.
#
# Inputs (nothing else is read; the same inputs give the same files):
#   shared data ($OPENPERT_SHARED_DATA, else ../shared/data beside the repository):
#     biome_bench/kg_mmu.jsonl, biome_bench/task_b_hsa_mmu.jsonl
#   seeds: the pathway sample and split --seed 0; raw/ keeps the first three pathway ids (no draw);
#     the control method and the metric draw nothing
#
# Writes resources_test/biome_bench/ ($OPENPERT_TEST_RESOURCES/biome_bench/ when set:
# tests/test_test_resources.py regenerates it elsewhere and compares). Needs the venv.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
shared="${OPENPERT_SHARED_DATA:-$repo/../shared/data}"
if [ ! -d "$shared/biome_bench" ]; then
  echo "biome_bench.sh: $shared/biome_bench not found: set OPENPERT_SHARED_DATA to the shared data folder" >&2
  exit 1
fi
task_out="${OPENPERT_TEST_RESOURCES:-$repo/resources_test}/biome_bench"
out=$task_out/mmu_subset
rm -rf "$out"
mkdir -p "$out"
# The organism as the benchmark's mmu dataset gives it (info.datasets), not as read from KEGG's
# pathway names ("house mouse"): the test dataset is titled as the real one.
openpert run-component src/biome_bench/datasets/biome_bench_jsonl/config.vsh.yaml \
  --shared_data "$shared" --species mmu --n_pathways 6 --seed 0 --test_fraction 0.5 --dataset_id mmu_subset \
  --organism mus_musculus --common_name mouse \
  --output_train "$out/train.h5ad" --output_test "$out/test.h5ad" --output_solution "$out/solution.h5ad"
openpert run-component src/biome_bench/control_methods/training_majority/config.vsh.yaml \
  --input_train "$out/train.h5ad" --input_test "$out/test.h5ad" --input_solution "$out/solution.h5ad" \
  --output "$out/prediction.h5ad"
openpert run-component src/biome_bench/metrics/relation_accuracy/config.vsh.yaml \
  --input_solution "$out/solution.h5ad" --input_prediction "$out/prediction.h5ad" --output "$out/score.h5ad"
mkdir -p "$task_out/raw"
python - "$shared/biome_bench" "$task_out/raw" <<'PY'
import json
import sys
from pathlib import Path

sys.path.insert(0, "src/biome_bench")  # the task's library, as its components import it
from biome_bench_lib.items import read_jsonl  # noqa: E402

src, raw = Path(sys.argv[1]), Path(sys.argv[2])
kg = read_jsonl(src / "kg_mmu.jsonl")
keep = sorted(r["id"] for r in kg)[:3]
with open(raw / "kg_mmu_subset.jsonl", "w") as fh:
    for r in kg:
        if r["id"] in keep:
            papers = [{"pmid": p["pmid"], "knowledge_graph": p["knowledge_graph"],
                       "standardized_entities": {"processes_phenotypes": p["standardized_entities"]["processes_phenotypes"]}}
                      for p in r["pubmed"]]
            fh.write(json.dumps({"id": r["id"], "name": r["name"], "pubmed": papers}, ensure_ascii=False) + "\n")
with open(raw / "task_b_subset.jsonl", "w") as fh:
    for r in read_jsonl(src / "task_b_hsa_mmu.jsonl"):
        if r["pathway_id"] in keep:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
PY
du -sh "$task_out"
