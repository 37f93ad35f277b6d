#!/usr/bin/env bash
# Test resources of biome_bench: a small real subset of the mouse items (6 KEGG pathways, both
# tasks), split by pathway, with a baseline prediction and its score; and, in raw/, three pathways
# of the original JSONL files (only the fields the loader reads) for the loader's component test.
# mmu_llm/ is the dataset a real language model answers in CI (the LLM methods, and the judge
# metrics, which grade every method's and control's Task B answer: two prompts per distinct answer,
# each holding the item's prompt and reference mechanism or its paper's knowledge graph): the 4
# mouse pathways whose shortest Task B item (prompt, reference mechanism and its paper's knowledge
# graph) is shortest, each with only that item's paper (its whole knowledge graph), so that every
# prompt stays short; one pathway is tested: 3 Task A items and 1 Task B item (14 Task A and 3
# Task B items to train on). With its baseline prediction and score.
#
# Inputs (nothing else is read; the same inputs give the same files):
#   shared data ($OPENPERT_SHARED_DATA, else ../shared/data beside the repository):
#     biome_bench/kg_mmu.jsonl, biome_bench/task_b_hsa_mmu.jsonl
#   seeds: the pathway sample and split --seed 0 (mmu_llm's split: --seed 2, see below); raw/ keeps
#     the first three pathway ids (no draw);
#     the control method and the metric draw nothing
#
# Writes resources_test/biome_bench/ ($OPENPERT_TEST_RESOURCES/biome_bench/ when set:
# tests/test_test_resources.py regenerates it elsewhere and compares). Needs the venv.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
source scripts/create_test_resources/run_component.bash  # run_component: `openpert run-component` in one harness process
shared="${OPENPERT_SHARED_DATA:-$repo/../shared/data}"
if [ ! -d "$shared/biome_bench" ]; then
  echo "biome_bench.sh: $shared/biome_bench not found: set OPENPERT_SHARED_DATA to the shared data folder" >&2
  exit 1
fi
task_out="${OPENPERT_TEST_RESOURCES:-$repo/resources_test}/biome_bench"
rm -rf "$task_out"
mkdir -p "$task_out/raw"

# The records cut down, in one Python process: mmu_llm's pathways, in a temporary folder (an input,
# no test resource), and raw/.
llm_src="$(mktemp -d)"
trap 'rm -rf "$llm_src"' EXIT
python - "$shared/biome_bench" "$llm_src" 4 "$task_out/raw" <<'PY'
import json
import sys
from pathlib import Path

sys.path.insert(0, "src/biome_bench")  # the task's library, as its components import it
from biome_bench_lib.items import read_jsonl  # noqa: E402

src, dst, n_pathways, raw = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
kg_records = read_jsonl(src / "kg_mmu.jsonl")
task_b_records = read_jsonl(src / "task_b_hsa_mmu.jsonl")

# mmu_llm's pathways, each with its shortest Task B item and that item's paper
kg = {r["id"]: r for r in kg_records}


def papers(record: dict) -> list[dict]:
    """The paper of a Task B item, as its pathway's record lists it."""
    return [p for p in kg[record["pathway_id"]]["pubmed"] if str(p["pmid"]) == record["pubmed_id"]]


def length(record: dict) -> int:
    """Characters of what the judges read of a Task B item: its prompt and reference mechanism (the
    judge's prompt) and its paper's knowledge graph (the coverage check's prompt)."""
    return sum(len(m["content"]) for m in record["messages"]) \
        + sum(len(json.dumps(p["knowledge_graph"], ensure_ascii=False)) for p in papers(record))


shortest = {}  # pathway -> its shortest Task B item (ties: the smaller PubMed id)
mouse = [r for r in task_b_records if r["species"] == "mmu" and r["pathway_id"] in kg]
for r in sorted(mouse, key=lambda r: (length(r), r["pathway_id"], r["pubmed_id"])):
    shortest.setdefault(r["pathway_id"], r)
keep = sorted(sorted(shortest, key=lambda p: (length(shortest[p]), p))[:n_pathways])
with open(dst / "kg_mmu.jsonl", "w") as kg_out, open(dst / "task_b.jsonl", "w") as task_b_out:
    for pathway in keep:
        item = shortest[pathway]
        kg_out.write(json.dumps({**kg[pathway], "pubmed": papers(item)}, ensure_ascii=False) + "\n")
        task_b_out.write(json.dumps(item, ensure_ascii=False) + "\n")
print(f"mmu_llm: pathways {', '.join(keep)}")

# raw/: the first three pathway ids, with only the fields the loader reads
keep = sorted(r["id"] for r in kg_records)[:3]
with open(raw / "kg_mmu_subset.jsonl", "w") as fh:
    for r in kg_records:
        if r["id"] in keep:
            papers = [{"pmid": p["pmid"], "knowledge_graph": p["knowledge_graph"],
                       "standardized_entities": {"processes_phenotypes": p["standardized_entities"]["processes_phenotypes"]}}
                      for p in r["pubmed"]]
            fh.write(json.dumps({"id": r["id"], "name": r["name"], "pubmed": papers}, ensure_ascii=False) + "\n")
with open(raw / "task_b_subset.jsonl", "w") as fh:
    for r in task_b_records:
        if r["pathway_id"] in keep:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
PY

baseline_and_score() {  # <dataset folder>: the training-majority prediction and its relation accuracy
  run_component src/biome_bench/control_methods/training_majority/config.vsh.yaml \
    --input_train "$1/train.h5ad" --input_test "$1/test.h5ad" --input_solution "$1/solution.h5ad" \
    --output "$1/prediction.h5ad"
  run_component src/biome_bench/metrics/relation_accuracy/config.vsh.yaml \
    --input_solution "$1/solution.h5ad" --input_prediction "$1/prediction.h5ad" --output "$1/score.h5ad"
}

out=$task_out/mmu_subset
mkdir -p "$out"
# The organism as the benchmark's mmu dataset gives it (info.datasets), not as read from KEGG's
# pathway names ("house mouse"): the test dataset is titled as the real one.
run_component src/biome_bench/datasets/biome_bench_jsonl/config.vsh.yaml \
  --shared_data "$shared" --species mmu --n_pathways 6 --seed 0 --test_fraction 0.5 --dataset_id mmu_subset \
  --organism mus_musculus --common_name mouse \
  --output_train "$out/train.h5ad" --output_test "$out/test.h5ad" --output_solution "$out/solution.h5ad"
baseline_and_score "$out"

# The split tests one of the four pathways (mmu00190, mmu03082, mmu04360, mmu04917): mmu04917, of
# the four the one with the fewest Task A items (3, each a prompt to every method) whose reference
# mechanism shares no word beyond the prompt with entity_template's template words (mmu03082 has 3
# too, but its reference shares one, so that control scores above zero on ROUGE-1 beyond the
# prompt there). On it no adversarial control scores above zero (scaled) on a headline metric, so
# none games it whatever the methods score, a model's included. --seed 2 is the first seed testing
# it (0 tests mmu04360, 1 mmu00190).
out=$task_out/mmu_llm
mkdir -p "$out"
run_component src/biome_bench/datasets/biome_bench_jsonl/config.vsh.yaml \
  --kg_jsonl "$llm_src/kg_mmu.jsonl" --task_b_jsonl "$llm_src/task_b.jsonl" \
  --species mmu --seed 2 --test_fraction 0.25 --dataset_id mmu_llm --organism mus_musculus --common_name mouse \
  --output_train "$out/train.h5ad" --output_test "$out/test.h5ad" --output_solution "$out/solution.h5ad"
baseline_and_score "$out"
du -sh "$task_out"
