#!/usr/bin/env bash
# Test resources of biome_bench: a small real subset of the mouse items (6 KEGG pathways, both
# tasks), split by pathway, with a baseline prediction and its score; and, in raw/, three pathways
# of the original JSONL files (only the fields the loader reads) for the loader's component test.
# Needs the shared data folder ($OPENPERT_SHARED_DATA or ../shared/data beside the repository) and
# the venv; deterministic (fixed seeds).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
shared="${OPENPERT_SHARED_DATA:-$repo/../shared/data}"
if [ ! -d "$shared/biome_bench" ]; then
  echo "biome_bench.sh: $shared/biome_bench not found: set OPENPERT_SHARED_DATA to the shared data folder" >&2
  exit 1
fi
out=resources_test/biome_bench/mmu_subset
rm -rf "$out"
mkdir -p "$out"
openpert run-component src/biome_bench/datasets/biome_bench_jsonl/config.vsh.yaml \
  --shared_data "$shared" --species mmu --n_pathways 6 --seed 0 --test_fraction 0.5 --dataset_id mmu_subset \
  --output_train "$out/train.h5ad" --output_test "$out/test.h5ad" --output_solution "$out/solution.h5ad"
openpert run-component src/biome_bench/control_methods/training_majority/config.vsh.yaml \
  --input_train "$out/train.h5ad" --input_test "$out/test.h5ad" --input_solution "$out/solution.h5ad" \
  --output "$out/prediction.h5ad"
openpert run-component src/biome_bench/metrics/relation_accuracy/config.vsh.yaml \
  --input_solution "$out/solution.h5ad" --input_prediction "$out/prediction.h5ad" --output "$out/score.h5ad"
mkdir -p resources_test/biome_bench/raw
python - "$shared/biome_bench" <<'PY'
import json
import sys
from pathlib import Path

sys.path.insert(0, "src/biome_bench")  # the task's library, as its components import it
from biome_bench_lib.items import read_jsonl  # noqa: E402

src = Path(sys.argv[1])
kg = read_jsonl(src / "kg_mmu.jsonl")
keep = sorted(r["id"] for r in kg)[:3]
with open("resources_test/biome_bench/raw/kg_mmu_subset.jsonl", "w") as fh:
    for r in kg:
        if r["id"] in keep:
            papers = [{"pmid": p["pmid"], "knowledge_graph": p["knowledge_graph"],
                       "standardized_entities": {"processes_phenotypes": p["standardized_entities"]["processes_phenotypes"]}}
                      for p in r["pubmed"]]
            fh.write(json.dumps({"id": r["id"], "name": r["name"], "pubmed": papers}, ensure_ascii=False) + "\n")
with open("resources_test/biome_bench/raw/task_b_subset.jsonl", "w") as fh:
    for r in read_jsonl(src / "task_b_hsa_mmu.jsonl"):
        if r["pathway_id"] in keep:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
PY
du -sh resources_test/biome_bench
