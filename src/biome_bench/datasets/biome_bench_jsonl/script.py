import sys
from pathlib import Path

## VIASH START
par = {
    "species": "mmu",
    "shared_data": "../shared/data",
    "task_b_jsonl": None,
    "kg_jsonl": None,
    "without_kg": False,
    "test_fraction": 0.5,
    "seed": 0,
    "n_pathways": 0,
    "dataset_id": "mmu",
    "output_train": "train.h5ad",
    "output_test": "test.h5ad",
    "output_solution": "solution.h5ad",
}
meta = {"resources_dir": "src/biome_bench", "name": "biome_bench_jsonl"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib.dataset_description import dataset_uns  # noqa: E402
from biome_bench_lib.item_files import write_items  # noqa: E402
from biome_bench_lib.items import read_jsonl  # noqa: E402
from biome_bench_lib.pathway_split import build_dataset  # noqa: E402

species = par["species"]
shared = Path(par["shared_data"]) / "biome_bench" if par["shared_data"] else None
if par["task_b_jsonl"]:
    task_b_path = Path(par["task_b_jsonl"])
elif shared is not None:
    task_b_path = shared / "task_b_hsa_mmu.jsonl"
else:
    raise SystemExit(f"{meta['name']}: no Task B file: give --task_b_jsonl, or --shared_data holding biome_bench/task_b_hsa_mmu.jsonl")
if par["without_kg"]:
    kg_path = None
elif par["kg_jsonl"]:
    kg_path = Path(par["kg_jsonl"])
elif shared is not None:
    # No knowledge graph for the species (hsa) is allowed: the dataset then has Task B items only.
    kg_path = shared / f"kg_{species}.jsonl" if (shared / f"kg_{species}.jsonl").is_file() else None
else:
    raise SystemExit(f"{meta['name']}: no knowledge-graph file: give --kg_jsonl, --shared_data, or --without_kg for Task B items only")

train, test, solution, counts = build_dataset(
    read_jsonl(task_b_path), read_jsonl(kg_path) if kg_path is not None else None, species=species,
    test_fraction=par["test_fraction"], seed=par["seed"], n_pathways=par["n_pathways"],
    source_names=(str(task_b_path), str(kg_path)),
)
print(f"{species}: {counts}")
uns = dataset_uns(counts, species=species, dataset_id=par["dataset_id"], task_b_file=task_b_path.name,
                  kg_file=kg_path.name if kg_path is not None else None, test_fraction=par["test_fraction"], seed=par["seed"])
write_items(train, par["output_train"], uns)
write_items(test, par["output_test"], {"dataset_id": par["dataset_id"]})
write_items(solution, par["output_solution"], {"dataset_id": par["dataset_id"]})
