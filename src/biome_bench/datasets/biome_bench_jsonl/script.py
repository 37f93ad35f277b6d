import sys
from pathlib import Path

## VIASH START
par = {
    "species": "mmu",
    "subtasks": ["relation", "mechanism"],
    "shared_data": "../shared/data",
    "task_b_file": "task_b_hsa_mmu.jsonl",
    "kg_file": "kg_{species}.jsonl",
    "task_b_jsonl": None,
    "kg_jsonl": None,
    "without_kg": False,
    "organism": None,
    "common_name": None,
    "source_reference": "BIOME-Bench (ACL submission), https://github.com/DYJG-research/BIOME-Bench",
    "source_url": "https://github.com/DYJG-research/BIOME-Bench",
    "source_license": "No licence stated by the authors: used for benchmarking only.",
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
import pandas as pd  # noqa: E402
from biome_bench_lib.dataset_description import dataset_uns, organism_from_pathway_names  # noqa: E402
from biome_bench_lib.item_files import write_items  # noqa: E402
from biome_bench_lib.items import read_jsonl  # noqa: E402
from biome_bench_lib.pathway_split import build_dataset  # noqa: E402
from biome_bench_lib.vocabulary import TASK_MECHANISM, TASK_RELATION  # noqa: E402

species = par["species"]
given = par["subtasks"] if isinstance(par["subtasks"], list) else str(par["subtasks"]).replace(";", ",").split(",")
subtasks = [s.strip() for s in given if s and s.strip()]
shared = Path(par["shared_data"]) / "biome_bench" if par["shared_data"] else None


def data_file(explicit, name: str) -> Path | None:
    """The file given explicitly, else ``name`` in the shared folder, else ``None``; never a guess."""
    if explicit:
        return Path(explicit)
    if shared is not None:
        return shared / name
    return None


task_b_path = data_file(par["task_b_jsonl"], par["task_b_file"]) if TASK_MECHANISM in subtasks else None
if TASK_MECHANISM in subtasks and task_b_path is None:
    raise SystemExit(f"{meta['name']}: Task B items asked for but no Task B file: give --task_b_jsonl, or --shared_data holding "
                     f"biome_bench/{par['task_b_file']}")
kg_name = par["kg_file"].replace("{species}", species)
kg_path = None if par["without_kg"] else data_file(par["kg_jsonl"], kg_name)
if par["without_kg"] and TASK_RELATION in subtasks:
    raise SystemExit(f"{meta['name']}: --without_kg reads no knowledge-graph file, but Task A items (relation) are asked for; "
                     "ask for --subtasks mechanism")
if TASK_RELATION in subtasks and kg_path is None:
    raise SystemExit(f"{meta['name']}: Task A items asked for but no knowledge-graph file: give --kg_jsonl, or --shared_data "
                     f"holding biome_bench/{kg_name}")
if kg_path is not None and TASK_RELATION not in subtasks and not kg_path.is_file() and not par["kg_jsonl"]:
    # Only reference graphs for the Task B items, and the species has none in the shared folder.
    print(f"{kg_path}: not found; the Task B items have no reference knowledge graphs")
    kg_path = None
for path, what in ((task_b_path, "Task B"), (kg_path, "knowledge-graph")):
    if path is not None and not path.is_file():
        raise SystemExit(f"{meta['name']}: {path}: {what} file not found (asked for by the dataset's configuration)")

train, test, solution, counts = build_dataset(
    read_jsonl(task_b_path) if task_b_path is not None else None, read_jsonl(kg_path) if kg_path is not None else None,
    species=species, test_fraction=par["test_fraction"], seed=par["seed"], n_pathways=par["n_pathways"],
    source_names=(str(task_b_path), str(kg_path)), subtasks=subtasks,
)
print(f"{species}: {counts}")
organism, common_name = par["organism"], par["common_name"]
if not organism or not common_name:
    names = pd.concat([train["pathway_name"], test["pathway_name"]])
    found = organism_from_pathway_names(names, source_name=", ".join(str(p) for p in (task_b_path, kg_path) if p is not None))
    organism, common_name = organism or found[0], common_name or found[1]
uns = dataset_uns(counts, species=species, dataset_id=par["dataset_id"], organism=organism, common_name=common_name,
                  task_b_file=task_b_path.name if task_b_path is not None else None,
                  kg_file=kg_path.name if kg_path is not None else None, test_fraction=par["test_fraction"], seed=par["seed"],
                  reference=par["source_reference"], url=par["source_url"], license_note=par["source_license"])
write_items(train, par["output_train"], uns)
write_items(test, par["output_test"], {"dataset_id": par["dataset_id"]})
write_items(solution, par["output_solution"], {"dataset_id": par["dataset_id"]})
