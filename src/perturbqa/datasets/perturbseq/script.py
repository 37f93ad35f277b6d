import sys
from pathlib import Path

import anndata as ad
import pandas as pd

from pertsci.normalisation import normalize_log_tp10k

## VIASH START
par = {"input": "resources_test/perturbqa/raw/synthetic_perturbseq.h5ad", "perturbation_column": "gene",
       "control_label": "non-targeting", "gene_symbol_column": "gene_name", "cell_line": "K562",
       "cell_line_description": "K562 cells are immortalised myelogenous leukemia cells of the erythroleukemia type.",
       "organism": "homo_sapiens", "subtasks": "de",
       "min_degs": 5, "n_negative_perturbations": 3, "n_positives": 20, "n_negatives": 30, "test_fraction": 0.25,
       "seed": 0, "shared_data": None, "kg_dir": "resources_test/perturbqa/raw/knowledge_graphs",
       "ensembl_map": "resources_test/perturbqa/raw/perturbqa/k562_gw_mapping_full.json", "dataset_id": "perturbseq_de",
       "output_train": "train.h5ad", "output_test": "test.h5ad", "output_solution": "solution.h5ad",
       "output_kg_edges": "kg_edges.parquet", "output_gene_descriptions": "gene_descriptions.parquet"}
meta = {"resources_dir": "src/perturbqa", "name": "perturbseq", "cpus": None}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbqa_lib.dataset_assembly import dataset_from_responses, screen_metadata  # noqa: E402
from perturbqa_lib.dataset_files import write_dataset  # noqa: E402
from perturbqa_lib.knowledge_graph import knowledge_tables, screen_symbols  # noqa: E402
from perturbqa_lib.label_pipeline import perturbation_labels, split_perturbations  # noqa: E402


def shared_input(argument: str, shared_path: str) -> Path:
    """The path given as --<argument>, else <shared_path> of --shared_data; exit naming what is missing."""
    if par[argument]:
        return Path(par[argument])
    if not par["shared_data"]:
        raise SystemExit(f"{meta['name']}: no --{argument} and no --shared_data to find {shared_path} in")
    path = Path(par["shared_data"]) / shared_path
    if not path.exists():
        raise SystemExit(f"{meta['name']}: no --{argument}, and --shared_data has no {shared_path} ({path})")
    return path


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
    if symbols.str.startswith("ENSG").all():
        # Genes named by Ensembl id: every human gene gets its symbol (HGNC, offline); the few
        # without one (retired ids) keep their id.
        named = symbols.map(screen_symbols(par["ensembl_map"], set(screen.obs[par["perturbation_column"]].astype(str))))
        print(f"{par['input']}: var_names are Ensembl ids; {int(named.isna().sum())} of {len(named)} without a symbol keep their id")
        symbols = named.fillna(symbols)
unique = ~symbols.duplicated().to_numpy()  # a symbol measured twice keeps its first column
subtasks = [s.strip() for s in par["subtasks"].split(",") if s.strip()]
uns = screen_metadata(par["dataset_id"], par["input"], subtasks, par["cell_line"], par["cell_line_description"],
                      organism=par["organism"])
kg_dir = shared_input("kg_dir", "knowledge_graphs")

# Appendix A.2: Wilcoxon tests on log(TP10k+1) against the controls, then positives, negatives and a split.
X = normalize_log_tp10k(screen.X)[:, unique]
labels, summary = perturbation_labels(
    X, screen.obs[column].astype(str).to_numpy(), symbols[unique].to_numpy(), control=par["control_label"],
    min_degs=par["min_degs"], n_negative_perturbations=par["n_negative_perturbations"],
    n_positives=par["n_positives"], n_negatives=par["n_negatives"], seed=par["seed"], n_threads=meta.get("cpus") or 1)
kept = summary[summary["kept"]]
split = split_perturbations(kept["n_degs"], par["test_fraction"], par["seed"])
labels["split"] = labels["pert"].map(split)
print(f"{len(summary)} perturbations tested, {len(kept)} kept ({int((kept['n_degs'] == 0).sum())} without DEG); "
      f"{len(labels)} labelled pairs, {int((labels['response'] != 'unchanged').sum())} DE")

dataset = dataset_from_responses(labels, subtasks, uns, sources={s: str(par["input"]) for s in subtasks})
# HuRI names genes by Ensembl id: every human gene through HGNC, named as the screen names them.
edges, descriptions = knowledge_tables(kg_dir, screen_symbols(par["ensembl_map"], set(labels["pert"]) | set(labels["gene"])))
write_dataset(dataset, edges, descriptions, train=par["output_train"], test=par["output_test"],
              solution=par["output_solution"], kg_edges=par["output_kg_edges"],
              gene_descriptions=par["output_gene_descriptions"])
