import sys
from pathlib import Path

import anndata as ad
import pandas as pd

from openpert.config.task import shared_data_dir
from openpert.config.viash import find_project_root

## VIASH START
par = {"input": "resources_test/perturbqa/raw/synthetic_perturbseq.h5ad", "perturbation_column": "gene",
       "control_label": "non-targeting", "gene_symbol_column": "gene_name", "cell_line": "K562", "subtasks": "de",
       "min_degs": 5, "n_negative_perturbations": 3, "n_positives": 20, "n_negatives": 30, "test_fraction": 0.25,
       "seed": 0, "kg_dir": "resources_test/perturbqa/raw/knowledge_graphs", "dataset_id": "perturbseq_de",
       "output_train": "train.h5ad", "output_test": "test.h5ad", "output_solution": "solution.h5ad",
       "output_kg_edges": "kg_edges.parquet", "output_gene_descriptions": "gene_descriptions.parquet"}
meta = {"resources_dir": "src/perturbqa", "name": "perturbseq", "config": "src/perturbqa/datasets/perturbseq/config.vsh.yaml"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbqa_lib.knowledge_text import knowledge_tables  # noqa: E402
from perturbqa_lib.labels import (  # noqa: E402
    CELL_LINES,
    LICENSE,
    dataset_from_responses,
    perturbation_labels,
    split_perturbations,
    write_dataset,
)

from pertsci.normalisation import normalize_log_tp10k  # noqa: E402

screen = ad.read_h5ad(par["input"])
column = par["perturbation_column"]
if column not in screen.obs.columns:
    raise ValueError(f"{par['input']}: obs has no column {column!r} (columns: {list(screen.obs.columns)[:10]})")
if par["gene_symbol_column"]:
    if par["gene_symbol_column"] not in screen.var.columns:
        raise ValueError(f"{par['input']}: var has no column {par['gene_symbol_column']!r}")
    symbols = screen.var[par["gene_symbol_column"]].astype(str)
else:
    symbols = pd.Series(screen.var_names.astype(str), index=screen.var_names)
unique = ~symbols.duplicated().to_numpy()  # a symbol measured twice keeps its first column
if par["cell_line"] not in CELL_LINES:
    raise ValueError(f"unknown cell line {par['cell_line']!r}; known: {sorted(CELL_LINES)}")

X = normalize_log_tp10k(screen.X)[:, unique]
labels, summary = perturbation_labels(
    X, screen.obs[column].astype(str).to_numpy(), symbols[unique].to_numpy(), control=par["control_label"],
    min_degs=par["min_degs"], n_negative_perturbations=par["n_negative_perturbations"],
    n_positives=par["n_positives"], n_negatives=par["n_negatives"], seed=par["seed"])
kept = summary[summary["kept"]]
split = split_perturbations(kept["n_degs"], par["test_fraction"], par["seed"])
labels["split"] = labels["pert"].map(split)
print(f"{len(summary)} perturbations tested, {len(kept)} kept ({int((kept['n_degs'] == 0).sum())} without DEG); "
      f"{len(labels)} labelled pairs, {int((labels['response'] != 'unchanged').sum())} DE")

if par["kg_dir"]:
    kg_dir = Path(par["kg_dir"])
    kg_dir = kg_dir if kg_dir.is_absolute() else find_project_root(Path(meta["config"]).resolve()) / kg_dir
else:
    kg_dir = shared_data_dir() / "knowledge_graphs"
subtasks = [s.strip() for s in par["subtasks"].split(",") if s.strip()]
uns = {"dataset_id": par["dataset_id"], "dataset_name": f"{Path(par['input']).stem}: {', '.join(subtasks)}",
       "dataset_summary": f"PerturbQA labels built from the Perturb-seq screen {Path(par['input']).name}.",
       "dataset_description": "Labels from the PerturbQA pipeline (Wilcoxon rank-sum, Benjamini-Hochberg, appendix A.2).",
       "dataset_reference": "10.48550/arXiv.2502.21290", "dataset_url": "", "dataset_organism": "homo_sapiens",
       "dataset_license": LICENSE, "cell_line": par["cell_line"], "cell_line_description": CELL_LINES[par["cell_line"]],
       "downstream_type": "gene"}
dataset = dataset_from_responses(labels, subtasks, uns)
edges, descriptions = knowledge_tables(kg_dir)
write_dataset(dataset, edges, descriptions, train=par["output_train"], test=par["output_test"],
              solution=par["output_solution"], kg_edges=par["output_kg_edges"],
              gene_descriptions=par["output_gene_descriptions"])
