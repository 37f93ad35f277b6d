import sys
from pathlib import Path

from openpert.config.task import shared_data_dir
from openpert.config.viash import find_project_root

## VIASH START
par = {
    "species": "mmu",
    "task_b_jsonl": "",
    "kg_jsonl": "",
    "test_fraction": 0.5,
    "seed": 0,
    "n_pathways": 0,
    "dataset_id": "mmu",
    "output_train": "train.h5ad",
    "output_test": "test.h5ad",
    "output_solution": "solution.h5ad",
}
meta = {"resources_dir": "src/biome_bench", "name": "biome_bench_jsonl", "config": "src/biome_bench/datasets/biome_bench_jsonl/config.vsh.yaml"}
## VIASH END

sys.path.append(meta["resources_dir"])
from biome_bench_lib import biome  # noqa: E402


def resolve(path: str) -> Path:
    """A path given as an argument; a relative one is read from the project root, as dataset inputs are."""
    p = Path(path)
    return p if p.is_absolute() else find_project_root(Path(meta["config"]).resolve()) / p


ORGANISMS = {"hsa": ("homo_sapiens", "human"), "mmu": ("mus_musculus", "mouse"), "rno": ("rattus_norvegicus", "rat")}
species = par["species"]
shared = shared_data_dir() / "biome_bench"
task_b_path = resolve(par["task_b_jsonl"]) if par["task_b_jsonl"] else shared / "task_b_hsa_mmu.jsonl"
if par["kg_jsonl"] and par["kg_jsonl"].lower() == "none":
    kg_path = None
elif par["kg_jsonl"]:
    kg_path = resolve(par["kg_jsonl"])
else:
    kg_path = shared / f"kg_{species}.jsonl"
    kg_path = kg_path if kg_path.is_file() else None

task_b = biome.read_jsonl(task_b_path)
kg = biome.read_jsonl(kg_path) if kg_path is not None else None
train, test, solution, counts = biome.build_dataset(
    task_b, kg, species=species, test_fraction=par["test_fraction"], seed=par["seed"],
    n_pathways=par["n_pathways"], source_names=(str(task_b_path), str(kg_path)),
)
print(f"{species}: {counts}")

organism, common = ORGANISMS.get(species, (species, species))
kg_note = (
    f"Task A: {counts['n_relation_train']} train / {counts['n_relation_test']} test items from the "
    f"{counts['n_edges']} knowledge-graph edges of {kg_path.name} ({counts['n_out_of_vocabulary']} dropped: relation "
    f"outside the 18-relation vocabulary; {counts['n_duplicates']} dropped: repeated within a paper)."
    if kg_path is not None else "No knowledge-graph file for this species: no Task A items and no reference knowledge graphs."
)
uns = {
    "dataset_id": par["dataset_id"],
    "dataset_name": f"BIOME-Bench {common} ({species})",
    "dataset_summary": f"BIOME-Bench relation inference and mechanism elucidation items of {common} KEGG pathways, split by pathway.",
    "dataset_description": (
        f"{kg_note} Task B: {counts['n_mechanism_train']} train / {counts['n_mechanism_test']} test items from "
        f"{task_b_path.name} ({counts['n_mechanism_test_with_kg']} test items with a reference knowledge graph). "
        f"Pathways: {counts['n_pathways_train']} train, {counts['n_pathways_test']} test "
        f"(test fraction {par['test_fraction']}, seed {par['seed']})."
    ),
    "dataset_reference": "BIOME-Bench (ACL submission), https://github.com/DYJG-research/BIOME-Bench",
    "dataset_url": "https://github.com/DYJG-research/BIOME-Bench",
    "dataset_organism": organism,
    "dataset_license": "No licence stated by the authors: used for benchmarking only.",
    **{k: int(v) for k, v in counts.items()},
}
biome.write_items(train, par["output_train"], uns)
biome.write_items(test, par["output_test"], {"dataset_id": par["dataset_id"]})
biome.write_items(solution, par["output_solution"], {"dataset_id": par["dataset_id"]})
