import sys
from pathlib import Path

from openpert.config.task import shared_data_dir
from openpert.config.viash import find_project_root

## VIASH START
par = {
    "data_dir": "resources_test/perturbqa/raw/perturbqa",
    "kg_dir": "resources_test/perturbqa/raw/knowledge_graphs",
    "screen": "k562",
    "subtasks": "de,gse_gene,gse_pert",
    "dataset_id": "k562",
    "output_train": "train.h5ad",
    "output_test": "test.h5ad",
    "output_solution": "solution.h5ad",
    "output_kg_edges": "kg_edges.parquet",
    "output_gene_descriptions": "gene_descriptions.parquet",
}
meta = {"resources_dir": "src/perturbqa", "name": "perturbqa", "config": "src/perturbqa/datasets/perturbqa/config.vsh.yaml"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbqa_lib.knowledge_text import knowledge_tables  # noqa: E402
from perturbqa_lib.labels import perturbqa_dataset, write_dataset  # noqa: E402


def resolve(path: str, default: Path) -> Path:
    """A folder given as an argument ("" for the default); a relative one is read from the project root."""
    if not path:
        return default
    p = Path(path)
    return p if p.is_absolute() else find_project_root(Path(meta["config"]).resolve()) / p


data_dir = resolve(par["data_dir"], shared_data_dir() / "perturbqa")
kg_dir = resolve(par["kg_dir"], shared_data_dir() / "knowledge_graphs")
subtasks = [s.strip() for s in par["subtasks"].split(",") if s.strip()]

dataset = perturbqa_dataset(data_dir, par["screen"], subtasks, par["dataset_id"])
edges, descriptions = knowledge_tables(kg_dir)
write_dataset(dataset, edges, descriptions, train=par["output_train"], test=par["output_test"],
              solution=par["output_solution"], kg_edges=par["output_kg_edges"],
              gene_descriptions=par["output_gene_descriptions"])
print(f"{par['dataset_id']}: {len(dataset['train'])} training pairs, {len(dataset['test'])} test items, "
      f"{len(edges)} edges, {len(descriptions)} gene descriptions")
