"""Basal expression of PertReasonQA's cells from the Human Protein Atlas v20 NX tables (Kim et al. 2026, appendix B.2.1).

- :func:`load_basal_expression`: the K562 and RPE1 cell lines;
- :func:`load_blood_basal`: the OP3 PBMC cell types, each the average of its HPA blood populations
  (the simulator's own baseline columns).

Ensembl ids are mapped to symbols by PerturbQA's K562 screen map, then by HGNC's genome-wide
table (:func:`pertsci.knowledge_graphs.genome_ensembl_to_symbol`): 19,329 of HPA's 19,670 genes
map (8,163 with the K562 map alone, which left 4,306 of the graph's 9,186 genes with a value). K562
has a second basal profile keyed by symbol, ENCODE's RNA-seq (TPM): :func:`fill_from_symbol_table`
puts its values on HPA's NX scale by quantile mapping over the genes both measure, and fills every
K562 gene HPA leaves without a value. :func:`log1p_nx` puts NX on the pipeline's scale.

Choices the paper leaves open
-----------------------------
- **Scale**: ``log1p(NX)``, rounded to multiples of
  :data:`pertreasonqa_lib.cell_state.VALUE_GRID` (2**-24): numpy's ``log1p`` differs in its last
  bits between CPUs, and the KS thresholds, basal states and gates decide on these values.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pertreasonqa_lib.cell_state import to_grid
from pertsci import knowledge_graphs as kg

log = logging.getLogger(__name__)

#: HPA v20 NX of the cell lines, below the shared data folder.
HPA_FILE = "basal_expression/hpa_v20_rna_celline_tissue_blood_nx.tsv.gz"
#: HPA v20 NX of the blood cell populations, below the shared data folder.
BLOOD_FILE = "basal_expression/hpa_v20_rna_blood_cells_nx.tsv.gz"
#: HPA column of each cell line of the genetic items.
CELL_LINE_COLUMNS = {"K562": "K-562", "RPE1": "hTERT-RPE1"}
#: Symbol-keyed basal profiles (no header: symbol, TPM) that fill a cell's genes HPA leaves unmapped.
SYMBOL_TABLES = {"K562": "basal_expression/encode_k562_ENCFF934YBO_tpm.tsv"}


def load_basal_expression(data_dir: str | Path, cells: Sequence[str] = ("K562", "RPE1")
                          ) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """HPA v20 NX basal expression of the cell lines (see :func:`hpa_profiles`).

    Parameters
    ----------
    data_dir
        The shared data folder, holding :data:`HPA_FILE` and ``perturbqa/`` (the symbol map).
    cells
        Cell lines of :data:`CELL_LINE_COLUMNS`.
    """
    by_symbol, all_genes, stats = hpa_profiles(HPA_FILE, {c: [CELL_LINE_COLUMNS[c]] for c in cells}, data_dir)
    for cell in cells:
        if cell in SYMBOL_TABLES:
            path = Path(data_dir) / SYMBOL_TABLES[cell]
            table = pd.read_csv(path, sep="\t", header=None, names=["gene", "value"])
            if not pd.api.types.is_numeric_dtype(table["value"]):
                raise ValueError(f"{path}: the second column must hold numbers (TPM)")
            table = table.groupby(table["gene"].astype(str))["value"].mean()  # duplicated symbols: their mean
            by_symbol, n_filled = fill_from_symbol_table(by_symbol, cell, table)
            stats[f"n_filled_{cell}"] = n_filled
            log.info("%s: %d genes without an HPA value filled from %s", cell, n_filled, path.name)
    return by_symbol, all_genes, stats


def fill_from_symbol_table(by_symbol: pd.DataFrame, cell: str, values: pd.Series) -> tuple[pd.DataFrame, int]:
    """Fill a cell's missing genes from another profile, put on the first one's scale by quantile mapping.

    The genes both profiles measure give the map: the ``k``-th smallest value of ``values`` goes to
    the ``k``-th smallest of ``by_symbol[cell]`` (tied values share the mean of their targets),
    linear in between, clamped outside. It is monotone, so it keeps the order of the genes, which is
    all the KS thresholds and the basal states use.

    Parameters
    ----------
    by_symbol
        Genes (symbols) x cells on the reference scale (NaN: unknown).
    cell
        The column to fill.
    values
        The other profile, indexed by symbol.

    Returns
    -------
    filled, n_filled
        ``by_symbol`` with the new genes appended (NaN in the other cells) and the number filled.
    """
    ref = by_symbol[cell].dropna()
    shared = ref.index.intersection(values.index)
    if len(shared) < 100:
        raise ValueError(f"{cell}: only {len(shared)} genes in both basal profiles; too few to map one onto the other")
    src = np.sort(values.loc[shared].to_numpy(dtype=float))
    dst = np.sort(ref.loc[shared].to_numpy(dtype=float))
    knots, inverse = np.unique(src, return_inverse=True)
    targets = np.bincount(inverse, weights=dst) / np.bincount(inverse)
    new = values.index.difference(ref.index)
    new = new[np.isfinite(values.loc[new].to_numpy(dtype=float))]
    mapped = pd.Series(np.interp(values.loc[new].to_numpy(dtype=float), knots, targets), index=new)
    out = by_symbol.reindex(by_symbol.index.union(new, sort=False))
    out.loc[new, cell] = mapped
    return out, len(new)


def hpa_profiles(file: str, columns: Mapping[str, Sequence[str]], data_dir: str | Path
                 ) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Basal expression per cell from a Human Protein Atlas NX table.

    Parameters
    ----------
    file
        The table, relative to the shared data folder (``GeneID`` = Ensembl id, one column per sample).
    columns
        Cell -> HPA columns averaged for it (e.g. the naive and memory B-cell columns for B cells).
    data_dir
        The shared data folder, holding ``file`` and ``perturbqa/k562_gw_mapping_full.json``.

    Returns
    -------
    by_symbol : pandas.DataFrame
        Genes (symbols: ``k562_gw_mapping_full.json``'s, else HGNC's approved symbol) x cells, NX values.
    all_genes : pandas.DataFrame
        Every HPA gene (Ensembl ids) x cells: the whole profile, for ``tau_high``.
    stats : dict
        ``n_hpa_genes``, ``n_mapped`` (genes with a symbol).
    """
    base = Path(data_dir)
    path = base / file
    wanted = sorted({c for cols in columns.values() for c in cols})
    header = pd.read_csv(path, sep="\t", nrows=0).columns
    missing = sorted(set(["GeneID", *wanted]) - set(header))
    if missing:
        raise ValueError(f"{path}: missing columns {missing}")
    # Only the columns averaged: the cell-line table has a hundred more (tissues, blood cells).
    df = pd.read_csv(path, sep="\t", usecols=["GeneID", *wanted])
    if df["GeneID"].duplicated().any():
        raise ValueError(f"{path}: duplicated GeneID rows")
    table = df.set_index("GeneID")
    all_genes = pd.DataFrame({cell: table[list(cols)].mean(axis=1) for cell, cols in columns.items()})
    # PerturbQA's K562 map names the genes of the screens; HGNC's genome-wide table every other gene.
    sym = df["GeneID"].map(kg.genome_ensembl_to_symbol(kg.ensembl_to_symbol(base / "perturbqa" / "k562_gw_mapping_full.json")))
    by_symbol = all_genes[sym.notna().to_numpy()].copy()
    by_symbol.index = pd.Index(sym.dropna().to_numpy(), name="gene")
    by_symbol = by_symbol[~by_symbol.index.duplicated()]
    stats = {"n_hpa_genes": int(len(df)), "n_mapped": int(len(by_symbol))}
    log.info("%s: %d of %d genes map to a symbol", path.name, stats["n_mapped"], stats["n_hpa_genes"])
    return by_symbol, all_genes, stats


def log1p_nx(table: pd.DataFrame) -> pd.DataFrame:
    """``log1p`` of NX values on the grid of :func:`~pertreasonqa_lib.cell_state.to_grid` (the pipeline's scale)."""
    return pd.DataFrame(to_grid(np.log1p(table.to_numpy(dtype=float))), index=table.index, columns=table.columns)


def load_blood_basal(data_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """HPA v20 blood-cell NX of each OP3 cell type (the simulator's own baseline columns, averaged).

    Parameters
    ----------
    data_dir
        The shared data folder, holding :data:`BLOOD_FILE` and ``perturbqa/`` (the symbol map).

    Returns
    -------
    by_symbol, all_genes, stats
        As :func:`hpa_profiles`.
    """
    # Imported here: the simulator's module pulls in scipy.stats (through its processing), which
    # the cell lines' basal expression does not need.
    from pertsci import op3_simulation as op3_sim

    return hpa_profiles(BLOOD_FILE, op3_sim.HPA_COLUMNS, data_dir)
