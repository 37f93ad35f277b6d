import sys
from pathlib import Path

## VIASH START
par = {
    "shared_data": None,
    "data_dir": "resources_test/perturbqa/raw/perturbqa",
    "kg_dir": "resources_test/perturbqa/raw/knowledge_graphs",
    "screen": "k562",
    "manifest": None,
    "subtasks": "de,gse_gene,gse_pert",
    "dataset_id": "k562",
    "output_train": "train.h5ad",
    "output_test": "test.h5ad",
    "output_solution": "solution.h5ad",
    "output_kg_edges": "kg_edges.parquet",
    "output_gene_descriptions": "gene_descriptions.parquet",
}
meta = {"resources_dir": "src/perturbqa/datasets/perturbqa", "name": "perturbqa"}
## VIASH END

sys.path.append(meta["resources_dir"])
if not (Path(meta["resources_dir"]) / "perturbqa_lib").is_dir():  # run as `python script.py` in the repository
    sys.path.append(str(Path(meta["resources_dir"]).parents[1]))
from perturbqa_lib.dataset_assembly import perturbqa_dataset  # noqa: E402
from perturbqa_lib.dataset_files import write_dataset  # noqa: E402
from perturbqa_lib.knowledge_graph import knowledge_tables, screen_symbols  # noqa: E402
from perturbqa_lib.screen_manifest import find_screen_manifest, read_screen_manifest  # noqa: E402


def input_folder(argument: str, shared_name: str) -> Path:
    """The folder given as --<argument>, else <shared_name>/ of --shared_data; exit naming what is missing."""
    if par[argument]:
        return Path(par[argument])
    if not par["shared_data"]:
        raise SystemExit(f"{meta['name']}: no --{argument} and no --shared_data to find {shared_name}/ in")
    folder = Path(par["shared_data"]) / shared_name
    if not folder.is_dir():
        raise SystemExit(f"{meta['name']}: no --{argument}, and --shared_data has no {shared_name}/ ({folder})")
    return folder


data_dir = input_folder("data_dir", "perturbqa")
kg_dir = input_folder("kg_dir", "knowledge_graphs")
subtasks = [s.strip() for s in par["subtasks"].split(",") if s.strip()]
manifest_path = par["manifest"] or find_screen_manifest(par["screen"], data_dir, [Path(meta["resources_dir"]) / "screens"])
manifest = read_screen_manifest(manifest_path)
print(f"screen {par['screen']}: manifest {manifest_path}")

dataset = perturbqa_dataset(data_dir, manifest, subtasks, par["dataset_id"])
# HuRI names genes by Ensembl id: every human gene through HGNC, named as the screen names them.
in_use = set(dataset["train"]["pert"]) | set(dataset["train"]["gene"]) | set(dataset["test"]["pert"]) \
    | set(dataset["test"]["gene"]) | set(dataset["sets"]["gene"])
symbols = screen_symbols(manifest.file("gene_map", data_dir) if manifest.has("gene_map") else None, in_use - {""})
edges, descriptions = knowledge_tables(kg_dir, symbols)
write_dataset(dataset, edges, descriptions, train=par["output_train"], test=par["output_test"],
              solution=par["output_solution"], kg_edges=par["output_kg_edges"],
              gene_descriptions=par["output_gene_descriptions"])
huri = edges[edges["database"] == "HuRI"]
on_screen = huri["source"].isin(in_use) & huri["target"].isin(in_use)
print(f"{par['dataset_id']}: {len(dataset['train'])} training pairs, {len(dataset['test'])} test items "
      f"({dataset['uns']['n_decoy_items']} decoys), "
      f"{len(edges)} edges ({len(huri)} HuRI, {int(on_screen.sum())} between genes of the screen), "
      f"{len(descriptions)} gene descriptions")
