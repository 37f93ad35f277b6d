"""Synthetic single-cell counts shaped like the OP3 perturbation experiment (Szałata et al. 2024, §3.2).

The real experiment treated PBMCs of three donors with 146 compounds (two positive controls,
DMSO as the negative control) in 96-well plates, two plates per donor, for 24 hours, and sequenced
the pooled cells. :func:`simulate_op3` draws counts with the same structure:

- **Layout**: donors x plates x wells; every non-control compound sits in one well per donor (the
  donor's compounds are split over its plates), the two positive controls and several DMSO wells
  sit on every plate. Well names, rows and columns are those of a 96-well plate.
- **Cells**: per well a Poisson number of cells, split over the six cell populations of the
  competition's annotation with donor-specific proportions; per cell a log-normal library size.
- **Annotation**: the final OP3 benchmark groups all T-cell subtypes as "T cells" (§4.2,
  "Inconsistent annotations": subtype proportions were inconsistent across donors, which suggested
  misannotation), as the reference pipeline does (every label starting with "T " becomes
  "T cells"). The simulated cells keep their subpopulation in ``obs["cell_type_orig"]`` and, by
  default, carry the grouped label in ``obs["cell_type"]``: B, myeloid, NK and T cells.
- **Expression**: negative binomial counts. Baseline expression per cell type comes from the Human
  Protein Atlas blood-cell profiles (``basal_expression/``) where the gene maps, and per-gene
  dispersions from a primary T-cell single-cell reference; genes without a match draw from the
  empirical distribution of those that have one. Donor, plate and well effects are log-normal.
- **Compound effects with shared mechanisms**: each compound acts through one mechanism (and
  sometimes a weaker second one). A mechanism perturbs one or two transcription factors of the
  real per-cell-type CellOracle GRNs inferred from the OP3 multiome (so its targets differ by cell
  type) plus a broader program shared across cell types, scaled by a mechanism x cell type
  sensitivity. Compounds add a small idiosyncratic program and have a potency; a share of them is
  nearly inert, as in the real data. Donors respond with slightly different strengths.

Real metadata (:func:`load_op3_metadata`, from ``<shared data>/op3``): compound names, LINCS ids,
SMILES and control flags, the six cell populations (one GRN each), the 18,211 genes of the real
``de_train`` and the 255 real test rows (``id_map.csv``). At full size the generator uses all of
them; smaller versions take subsets.

What the generator did is recorded in ``uns["simulation"]`` (compound mechanisms and potencies,
mechanism target genes per cell type with their weights, sensitivities, parameters), so that other
tasks can use the ground-truth mechanism of each compound.
"""

from __future__ import annotations

import dataclasses
import gzip
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from pertsci import knowledge_graphs as kg
from pertsci import op3_processing, ordering

log = logging.getLogger(__name__)

CONTROL_COMPOUND = "Dimethyl Sulfoxide"
#: The simulated cell populations: the six cell types of the competition's annotation.
CELL_TYPES = ["B cells", "Myeloid cells", "NK cells", "T cells CD4+", "T cells CD8+", "T regulatory cells"]
#: The label of every T-cell subtype in the final OP3 annotation (Szałata et al. 2024, §4.2).
T_CELL_GROUP = "T cells"
#: Population -> label of the final annotation: the reference pipeline relabels every cell type
#: whose name starts with "T " as "T cells".
GROUPED_ANNOTATION = {ct: (T_CELL_GROUP if ct.startswith("T ") else ct) for ct in CELL_TYPES}
#: The cell types of the final OP3 benchmark, in order: B, myeloid, NK and T cells.
ANNOTATED_CELL_TYPES = list(dict.fromkeys(GROUPED_ANNOTATION.values()))
#: Human Protein Atlas blood populations averaged for each OP3 cell type.
HPA_COLUMNS = {
    "B cells": ["naive_B_cell", "memory_B_cell"],
    "Myeloid cells": ["classical_monocyte", "intermediate_monocyte", "non_classical_monocyte", "myeloid_DC"],
    "NK cells": ["NK_cell"],
    "T cells CD4+": ["naive_CD4_T_cell", "memory_CD4_T_cell"],
    "T cells CD8+": ["naive_CD8_T_cell", "memory_CD8_T_cell"],
    "T regulatory cells": ["T_reg"],
}
GRN_FILES = {ct: ct.replace(" ", "_") + ".csv.gz" for ct in CELL_TYPES}
#: Cells x genes (dense-equivalent entries) that :func:`simulate_op3_pseudobulk` holds before summing them:
#: a few wells of the full-size screen, every well of a reduced one.
_PSEUDOBULK_BLOCK_VALUES = 1 << 24
#: Approximate PBMC composition of the real dataset's cells (T cells dominate).
CELL_TYPE_PROPORTIONS = {"B cells": 0.12, "Myeloid cells": 0.12, "NK cells": 0.15, "T cells CD4+": 0.38,
                         "T cells CD8+": 0.15, "T regulatory cells": 0.08}
#: Relative library size per cell type (myeloid cells carry more RNA).
CELL_TYPE_LIBRARY = {"B cells": 0.9, "Myeloid cells": 1.6, "NK cells": 1.0, "T cells CD4+": 1.0,
                     "T cells CD8+": 1.0, "T regulatory cells": 1.0}
WELLS_96 = [f"{r}{c}" for r in "ABCDEFGH" for c in range(1, 13)]


@dataclasses.dataclass
class Op3Metadata:
    """The real design of OP3: compounds, cell types, genes, test rows, and expression priors.

    Attributes
    ----------
    compounds
        One row per compound (DMSO excluded): ``sm_name``, ``sm_lincs_id``, ``SMILES``, ``control``.
    control_compound
        ``sm_name``, ``sm_lincs_id`` and ``SMILES`` of the negative control (DMSO).
    cell_types
        The simulated cell populations (the competition's six cell types, one GRN each).
    genes
        Gene symbols, in the order of the real ``de_train``.
    test_rows
        ``cell_type``, ``sm_name`` of the real test rows, in ``id_map`` order.
    grn
        Cell type -> GRN edges (``source``, ``target``, ``coef_mean``).
    baseline
        Genes x cell types: relative expression (HPA nTPM-like), NaN where unknown.
    nb_size
        Negative binomial size per gene, NaN where unknown.
    source
        Where the metadata came from.
    """

    compounds: pd.DataFrame
    control_compound: dict
    cell_types: list[str]
    genes: list[str]
    test_rows: pd.DataFrame
    grn: dict[str, pd.DataFrame]
    baseline: pd.DataFrame
    nb_size: pd.Series
    source: str


def load_op3_metadata(data_dir: str | Path) -> Op3Metadata:
    """Read the real OP3 design from a data folder.

    Parameters
    ----------
    data_dir
        The folder holding ``op3/`` (metadata), ``basal_expression/`` (HPA priors) and
        ``perturbqa/`` (the Ensembl-to-symbol map): the project's shared data folder.

    Raises
    ------
    FileNotFoundError
        Naming the missing file.
    """
    root = Path(data_dir)
    op3 = root / "op3"
    for name in ("peptideInfo_smiles.csv", "genes.txt", "id_map.csv", "lincs_id_compound_mapping.parquet"):
        if not (op3 / name).is_file():
            raise FileNotFoundError(f"{op3 / name}: OP3 metadata file not found")
    pep = pd.read_csv(op3 / "peptideInfo_smiles.csv")
    compounds = pd.DataFrame({
        "sm_name": pep["sm_name"].astype(str),
        "sm_lincs_id": pep["sm_lincs_id"].astype(str),
        "SMILES": pep["SMILES"].astype(str),
        "control": pep["control"].astype(str).str.lower().eq("true"),
    })
    lincs = pd.read_parquet(op3 / "lincs_id_compound_mapping.parquet")
    dmso = lincs[lincs["sm_name"] == CONTROL_COMPOUND]
    control = {"sm_name": CONTROL_COMPOUND,
               "sm_lincs_id": str(dmso["sm_lincs_id"].iloc[0]) if len(dmso) else "",
               "SMILES": str(dmso["smiles"].iloc[0]) if len(dmso) else "CS(C)=O"}
    genes = [g for g in (op3 / "genes.txt").read_text().split("\n") if g.strip()]
    test_rows = pd.read_csv(op3 / "id_map.csv")[["cell_type", "sm_name"]]
    grn = {}
    for ct, fname in GRN_FILES.items():
        path = op3 / "celloracle_grn" / fname
        if path.is_file():
            grn[ct] = pd.read_csv(path)[["source", "target", "coef_mean"]]
    baseline, nb_size = _expression_priors(root, genes)
    return Op3Metadata(compounds=compounds, control_compound=control, cell_types=list(CELL_TYPES), genes=genes,
                       test_rows=test_rows, grn=grn, baseline=baseline, nb_size=nb_size,
                       # Where the metadata came from, without the (possibly temporary) folder it was read in.
                       source="OP3 metadata files (op3/ of the shared data)")


def _expression_priors(root: Path, genes: Sequence[str]) -> tuple[pd.DataFrame, pd.Series]:
    """HPA blood expression per OP3 cell type and NB sizes, by gene symbol (NaN when unmapped)."""
    baseline = pd.DataFrame(np.nan, index=list(genes), columns=CELL_TYPES)
    nb_size = pd.Series(np.nan, index=list(genes))
    mapping_path = root / "perturbqa" / "k562_gw_mapping_full.json"
    hpa_path = root / "basal_expression" / "hpa_v20_rna_blood_cells_nx.tsv.gz"
    size_path = root / "basal_expression" / "singlecell_baseline_T_CD8_Shifrut.tsv"
    if not mapping_path.is_file():
        log.warning("%s not found: expression priors are drawn at random", mapping_path)
        return baseline, nb_size
    # PerturbQA's K562 map names the genes it covers; HGNC's table names every other human gene
    # (with the K562 map alone 57% of OP3's 18,211 genes had no expression prior; with HGNC 30%,
    # the genes the HPA table does not list).
    symbol_of = kg.genome_ensembl_to_symbol(kg.ensembl_to_symbol(mapping_path), names_in_use=genes)
    wanted = set(genes)
    if hpa_path.is_file():
        with gzip.open(hpa_path, "rt") as fh:
            hpa = pd.read_csv(fh, sep="\t")
        hpa["symbol"] = hpa["GeneID"].map(symbol_of)
        hpa = hpa[hpa["symbol"].isin(wanted)].drop_duplicates("symbol").set_index("symbol")
        for ct, cols in HPA_COLUMNS.items():
            baseline.loc[hpa.index, ct] = hpa[cols].mean(axis=1).to_numpy()
    if size_path.is_file():
        sizes = pd.read_csv(size_path, sep="\t")
        sizes["symbol"] = sizes["response_id"].map(symbol_of)
        sizes = sizes[sizes["symbol"].isin(wanted)].drop_duplicates("symbol").set_index("symbol")
        nb_size.loc[sizes.index] = sizes["expression_size"].to_numpy()
    return baseline, nb_size


def simulation_design(
    data_dir: str | Path | None,
    *,
    n_genes: int,
    n_compounds: int,
    n_test_compounds: int,
    n_donors: int,
    plates_per_donor: int,
    dmso_wells: int,
    cells_per_well: float,
    mean_library_size: float,
    seed: int,
) -> tuple[Op3Metadata, dict]:
    """The metadata and :func:`simulate_op3` arguments of a simulation design.

    Parameters
    ----------
    data_dir
        The data folder holding ``op3/`` (see :func:`load_op3_metadata`). ``None``, or a folder
        without the OP3 files, keeps the design's shape with made-up compound and gene names (a
        warning says so).
    n_genes, n_compounds, n_test_compounds
        0 means all (or, for test compounds, half of the compounds).
    n_donors, plates_per_donor, dmso_wells, cells_per_well, mean_library_size, seed
        The plate layout and sequencing depth (see :func:`simulate_op3`; ``dmso_wells`` is its
        ``dmso_wells_per_plate``).

    Returns
    -------
    (Op3Metadata, dict)
        The metadata, and the keyword arguments of :func:`simulate_op3` (and
        :func:`simulate_op3_pseudobulk`) for it.
    """
    try:
        if data_dir is None:
            raise FileNotFoundError("no data folder given")
        meta = load_op3_metadata(data_dir)
    except FileNotFoundError as err:
        log.warning("%s; simulating with made-up compound and gene names", err)
        meta = synthetic_metadata(n_genes=max(n_genes, 200), n_compounds=max(n_compounds, 12))
    params = dict(
        n_genes=n_genes or None,
        n_compounds=n_compounds or None,
        n_test_compounds=n_test_compounds or None,
        n_donors=n_donors,
        plates_per_donor=plates_per_donor,
        dmso_wells_per_plate=dmso_wells,
        cells_per_well=cells_per_well,
        mean_library_size=mean_library_size,
        seed=seed,
    )
    return meta, params


def synthetic_metadata(n_genes: int = 2000, n_compounds: int = 40, n_test_compounds: int = 16, seed: int = 0
                       ) -> Op3Metadata:
    """Metadata with made-up names, for when the real OP3 files are not available.

    Compounds are ``compound_000``...; two are positive controls. Test rows are the B and myeloid
    cells of ``n_test_compounds`` compounds, as in the real design.

    Parameters
    ----------
    n_genes, n_compounds, n_test_compounds
        Sizes of the design (``GENE00000``... are the genes; the first 40 act as transcription
        factors of the made-up GRNs).
    seed
        Seed of the made-up GRN edges.

    Returns
    -------
    Op3Metadata
        Without expression priors (they are drawn at random by the simulation).
    """
    rng = np.random.default_rng(seed)
    names = [f"compound_{i:03d}" for i in range(n_compounds)]
    compounds = pd.DataFrame({"sm_name": names, "sm_lincs_id": [f"LSM-{90000 + i}" for i in range(n_compounds)],
                              "SMILES": ["C" * (1 + i % 7) + "O" for i in range(n_compounds)],
                              "control": [i < 2 for i in range(n_compounds)]})
    genes = [f"GENE{i:05d}" for i in range(n_genes)]
    test = [n for n in names[2:2 + n_test_compounds]]
    test_rows = pd.DataFrame({"cell_type": ["B cells"] * len(test) + ["Myeloid cells"] * len(test), "sm_name": test * 2})
    tfs = genes[:40]
    grn = {}
    for ct in CELL_TYPES:
        src = rng.choice(tfs, 300)
        tgt = rng.choice(genes[40:], 300)
        grn[ct] = pd.DataFrame({"source": src, "target": tgt, "coef_mean": rng.normal(0, 0.3, 300)})
    return Op3Metadata(compounds=compounds, control_compound={"sm_name": CONTROL_COMPOUND, "sm_lincs_id": "", "SMILES": "CS(C)=O"},
                       cell_types=list(CELL_TYPES), genes=genes, test_rows=test_rows, grn=grn,
                       baseline=pd.DataFrame(np.nan, index=genes, columns=CELL_TYPES),
                       nb_size=pd.Series(np.nan, index=genes), source="synthetic names")


# --------------------------------------------------------------------------------------------------
def _choose_compounds(meta: Op3Metadata, n_compounds: int | None, n_test_compounds: int | None,
                      rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Compounds to simulate and the test rows among them (real test design, possibly subset)."""
    comp = meta.compounds
    test_names = list(dict.fromkeys(meta.test_rows["sm_name"]))
    controls = comp[comp["control"]]
    others = comp[~comp["control"]]
    test_pool = [n for n in test_names if n in set(others["sm_name"])]
    train_pool = [n for n in others["sm_name"] if n not in set(test_pool)]
    if n_compounds is None:
        chosen = list(others["sm_name"])
    else:
        n_other = n_compounds - len(controls)
        if n_other < 2:
            raise ValueError(f"n_compounds={n_compounds}: need at least {len(controls) + 2} (controls plus two)")
        n_test = n_test_compounds if n_test_compounds is not None else max(1, n_other // 2)
        n_test = min(n_test, len(test_pool), n_other - 1)
        pick_test = list(rng.choice(test_pool, n_test, replace=False))
        pick_train = list(rng.choice(train_pool, min(n_other - n_test, len(train_pool)), replace=False))
        chosen = [n for n in others["sm_name"] if n in set(pick_test) | set(pick_train)]
    chosen_set = set(chosen)
    table = pd.concat([controls, others[others["sm_name"].isin(chosen_set)]]).reset_index(drop=True)
    test_rows = meta.test_rows[meta.test_rows["sm_name"].isin(chosen_set)].reset_index(drop=True)
    return table, test_rows


def _choose_genes(meta: Op3Metadata, n_genes: int | None, tfs: Sequence[str], rng: np.random.Generator) -> list[str]:
    if n_genes is None or n_genes >= len(meta.genes):
        return list(meta.genes)
    base = meta.baseline.mean(axis=1)
    keep: list[str] = []
    # The mechanisms' transcription factors and a share of their GRN targets, so that the
    # mechanisms stay visible in a small gene set; then well-expressed genes; then random ones.
    grn_targets = pd.concat(meta.grn.values()) if meta.grn else pd.DataFrame(columns=["source", "target"])
    grn_targets = grn_targets[grn_targets["source"].isin(tfs)]
    for g in list(tfs) + list(pd.unique(grn_targets["target"]))[: n_genes // 3]:
        if g in base.index and g not in keep:
            keep.append(g)
    expressed = ordering.largest_first(base.dropna())  # equal means by name: the same genes on every CPU
    for g in expressed.index[: 4 * n_genes]:
        if len(keep) >= (2 * n_genes) // 3:
            break
        if g not in keep and rng.random() < 0.5:
            keep.append(g)
    rest = [g for g in meta.genes if g not in set(keep)]
    keep += list(rng.choice(rest, n_genes - len(keep), replace=False))
    order = {g: i for i, g in enumerate(meta.genes)}
    return sorted(keep[:n_genes], key=order.__getitem__)


def _fill_priors(meta: Op3Metadata, genes: list[str], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Log relative expression (cell types x genes) and NB sizes (genes), imputing unmapped genes."""
    base = meta.baseline.reindex(genes)
    known = base.dropna()
    n_ct = len(CELL_TYPES)
    if len(known) >= 50:
        # Unmapped genes take the profile of a random mapped gene, jittered.
        donor_rows = rng.integers(0, len(known), len(genes))
        imputed = np.log1p(known.to_numpy()[donor_rows].T) + rng.normal(0, 0.3, (n_ct, len(genes)))
    else:
        level = rng.gamma(0.8, 1.5, len(genes))
        imputed = level[None, :] + rng.normal(0, 0.4, (n_ct, len(genes)))
    observed = np.log1p(base.to_numpy().T)
    logb = np.where(np.isnan(observed), imputed, observed)
    # HPA is on a TPM-like scale; a floor keeps unexpressed genes at a small but non-zero rate.
    rel = np.expm1(np.clip(logb, 0, None)) + 0.05
    rel = rel / rel.sum(axis=1, keepdims=True)
    size = meta.nb_size.reindex(genes).to_numpy()
    known_size = size[np.isfinite(size)]
    if known_size.size >= 50:
        fill = rng.choice(known_size, np.sum(~np.isfinite(size)))
    else:
        fill = rng.lognormal(np.log(3), 1.0, np.sum(~np.isfinite(size)))
    size = size.copy()
    size[~np.isfinite(size)] = fill
    # Single-cell NB sizes: very large values are Poisson-like; very small ones come from noise.
    size = np.clip(size, 0.3, 50.0)
    return np.log(rel), size


@dataclasses.dataclass
class _Effects:
    effect: np.ndarray  # cell types x compounds x genes (natural log fold change)
    compound_table: pd.DataFrame
    mechanism_table: pd.DataFrame
    targets: pd.DataFrame
    sensitivity: pd.DataFrame


def _draw_effects(meta: Op3Metadata, compounds: pd.DataFrame, genes: list[str], mech_tfs: list[list[str]],
                  rng: np.random.Generator) -> _Effects:
    n_ct, n_genes, n_mech = len(CELL_TYPES), len(genes), len(mech_tfs)
    gidx = {g: i for i, g in enumerate(genes)}
    beta = np.zeros((n_mech, n_ct, n_genes))
    sens = rng.lognormal(0, 0.35, (n_mech, n_ct))
    # Some mechanisms act in one lineage only (e.g. antigen-presenting cells or lymphocytes).
    for m in range(n_mech):
        u = rng.random()
        if u < 0.2:
            sens[m, [2, 3, 4, 5]] *= 0.15  # myeloid and B cells
        elif u < 0.4:
            sens[m, [0, 1]] *= 0.15  # T and NK cells
    directions = rng.choice([-1.0, 1.0], n_mech)
    # Each cell type's GRN edges with their targets' gene positions (-1: not simulated), found once.
    gene_index = pd.Index(genes)
    grn = {c: (edges["source"], gene_index.get_indexer(edges["target"]), edges["coef_mean"].to_numpy())
           for c, ct in enumerate(CELL_TYPES) if (edges := meta.grn.get(ct)) is not None}
    for m, tfs in enumerate(mech_tfs):
        for c, (sources, targets, coef) in grn.items():
            keep = sources.isin(tfs).to_numpy() & (targets >= 0)
            if keep.any():
                np.add.at(beta[m, c], targets[keep], directions[m] * 3.0 * coef[keep])
            for tf in tfs:
                if tf in gidx:
                    beta[m, c, gidx[tf]] += directions[m] * 0.8
        # A broader program shared by cell types, with cell-type-specific deviations.
        n_prog = max(3, int(rng.uniform(0.02, 0.08) * n_genes))
        prog = rng.choice(n_genes, n_prog, replace=False)
        shared = rng.normal(0, 1.0, n_prog)
        for c in range(n_ct):
            beta[m, c, prog] += shared * rng.normal(1.0, 0.25, n_prog)
            extra = rng.choice(n_genes, max(1, n_prog // 5), replace=False)
            beta[m, c, extra] += rng.normal(0, 0.4, extra.size)
        beta[m] *= sens[m][:, None]

    n_comp = len(compounds)
    mech = rng.integers(0, n_mech, n_comp)
    second = np.where(rng.random(n_comp) < 0.3, rng.integers(0, n_mech, n_comp), -1)
    potency = np.where(rng.random(n_comp) < 0.3, rng.uniform(0.05, 0.25, n_comp), rng.lognormal(np.log(0.9), 0.5, n_comp))
    is_control = compounds["control"].to_numpy()
    # The positive controls were chosen for their strong signature; give them distinct mechanisms.
    ctrl_idx = np.flatnonzero(is_control)
    mech[ctrl_idx] = np.arange(ctrl_idx.size) % n_mech
    potency[ctrl_idx] = rng.uniform(2.5, 3.0, ctrl_idx.size)
    second[ctrl_idx] = -1
    effect = np.zeros((n_ct, n_comp, n_genes), dtype=np.float32)
    for k in range(n_comp):
        e = beta[mech[k]].copy()
        if second[k] >= 0:
            e += 0.4 * beta[second[k]]
        own = rng.choice(n_genes, max(1, n_genes // 100), replace=False)
        e[:, own] += rng.normal(0, 0.6, own.size)[None, :] * sens[mech[k]][:, None]
        effect[:, k, :] = potency[k] * e
    mech_names = [f"mechanism_{m:02d}" for m in range(n_mech)]
    compound_table = pd.DataFrame({
        "sm_name": compounds["sm_name"].to_numpy(),
        "mechanism": [mech_names[m] for m in mech],
        "secondary_mechanism": [mech_names[s] if s >= 0 else "" for s in second],
        "potency": potency,
        "target_tfs": ["|".join(mech_tfs[m]) for m in mech],
    })
    mechanism_table = pd.DataFrame({"mechanism": mech_names, "tfs": ["|".join(t) for t in mech_tfs],
                                    "direction": directions})
    rows = []
    for m in range(n_mech):
        for c, ct in enumerate(CELL_TYPES):
            nz = np.flatnonzero(np.abs(beta[m, c]) > 0.05)
            rows.append(pd.DataFrame({"mechanism": mech_names[m], "cell_type": ct, "gene": np.asarray(genes)[nz],
                                      "weight": beta[m, c, nz]}))
    targets = pd.concat(rows, ignore_index=True)
    sensitivity = pd.DataFrame(sens, index=mech_names, columns=CELL_TYPES)
    return _Effects(effect=effect, compound_table=compound_table, mechanism_table=mechanism_table,
                    targets=targets, sensitivity=sensitivity)


def _layout(compounds: pd.DataFrame, n_donors: int, plates_per_donor: int, dmso_wells: int,
            rng: np.random.Generator) -> pd.DataFrame:
    """One row per treated well: donor, plate, well, compound."""
    controls = list(compounds.loc[compounds["control"], "sm_name"])
    others = list(compounds.loc[~compounds["control"], "sm_name"])
    rows = []
    plate_no = 0
    for d in range(n_donors):
        order = list(rng.permutation(others))
        per_plate = np.array_split(order, plates_per_donor)
        for part in per_plate:
            plate = f"plate_{plate_no}"
            plate_no += 1
            content = list(part) + controls + [CONTROL_COMPOUND] * dmso_wells
            if len(content) > len(WELLS_96):
                raise ValueError(f"{len(content)} wells needed on {plate}, more than a 96-well plate holds; "
                                 "use more plates per donor")
            wells = rng.choice(len(WELLS_96), len(content), replace=False)
            for well, sm in zip(sorted(wells), rng.permutation(content)):
                rows.append({"donor_id": f"Donor {d + 1}", "plate_name": plate, "well": WELLS_96[well], "sm_name": sm})
    return pd.DataFrame(rows)


@dataclasses.dataclass
class _Simulation:
    """What one simulation drew: genes, ground truth, and the per-well count blocks (a generator)."""

    genes: list[str]
    uns: dict
    wells: Iterator[tuple[pd.DataFrame, sp.csr_matrix]]


def _simulate(meta: Op3Metadata, *, n_genes: int | None, n_compounds: int | None, n_test_compounds: int | None,
              n_donors: int, plates_per_donor: int, dmso_wells_per_plate: int, cells_per_well: float,
              mean_library_size: float, n_mechanisms: int, seed: int, group_t_cells: bool = True) -> _Simulation:
    rng = np.random.default_rng(seed)
    compounds, test_rows = _choose_compounds(meta, n_compounds, n_test_compounds, rng)
    tf_pool = sorted(set().union(*[set(e["source"]) for e in meta.grn.values()])) if meta.grn else []
    mech_tfs = [list(rng.choice(tf_pool, 1 + int(rng.random() < 0.4), replace=False)) if tf_pool else []
                for _ in range(n_mechanisms)]
    genes = _choose_genes(meta, n_genes, [t for tfs in mech_tfs for t in tfs], rng)
    log_rel, nb_size = _fill_priors(meta, genes, rng)
    eff = _draw_effects(meta, compounds, genes, mech_tfs, rng)
    layout = _layout(compounds, n_donors, plates_per_donor, dmso_wells_per_plate, rng)
    uns = {
        "simulation": {
            "compounds": eff.compound_table,
            "mechanisms": eff.mechanism_table,
            "mechanism_targets": eff.targets,
            "celltype_sensitivity": eff.sensitivity.reset_index(names="mechanism"),
            "test_rows": test_rows,
            "params": {"n_genes": len(genes), "n_compounds": int(len(compounds)), "n_donors": n_donors,
                       "plates_per_donor": plates_per_donor, "dmso_wells_per_plate": dmso_wells_per_plate,
                       "cells_per_well": float(cells_per_well), "mean_library_size": float(mean_library_size),
                       "n_mechanisms": n_mechanisms, "seed": seed, "metadata_source": meta.source,
                       "group_t_cells": bool(group_t_cells)},
            # obs["cell_type"] of each simulated population (obs["cell_type_orig"]).
            "annotation": pd.DataFrame({"cell_type_orig": CELL_TYPES,
                                        "cell_type": [GROUPED_ANNOTATION[c] if group_t_cells else c for c in CELL_TYPES]}),
        },
    }
    meta_cols = pd.concat([compounds[["sm_name", "sm_lincs_id", "SMILES"]], pd.DataFrame([meta.control_compound])],
                          ignore_index=True).set_index("sm_name")

    def wells() -> Iterator[tuple[pd.DataFrame, sp.csr_matrix]]:
        n_ct, n_g = len(CELL_TYPES), len(genes)
        comp_index = {n: i for i, n in enumerate(compounds["sm_name"])}
        donors = sorted(layout["donor_id"].unique())
        plates = sorted(layout["plate_name"].unique(), key=lambda p: int(p.split("_")[1]))
        donor_shift = {d: rng.normal(0, 0.15, n_g) for d in donors}
        donor_response = {d: rng.normal(1.0, 0.12) for d in donors}
        donor_props = {d: rng.dirichlet(np.array([CELL_TYPE_PROPORTIONS[c] for c in CELL_TYPES]) * 80) for d in donors}
        plate_shift = {p: rng.normal(0, 0.06, n_g) for p in plates}
        lib_factor = np.array([CELL_TYPE_LIBRARY[c] for c in CELL_TYPES])
        test_set = set(map(tuple, test_rows[["cell_type", "sm_name"]].to_numpy()))
        # The label each population carries in obs["cell_type"]: the final OP3 annotation groups the
        # T-cell subtypes (Szałata et al. 2024, §4.2); the populations themselves are simulated apart.
        labels = [GROUPED_ANNOTATION[c] if group_t_cells else c for c in CELL_TYPES]
        controls = set(compounds.loc[compounds["control"], "sm_name"])
        shape_r = 1.0 / 0.35**2  # library sizes: gamma with 35% CV
        n_done = 0
        for w in layout.itertuples(index=False):
            n_cells = rng.poisson(cells_per_well)
            if n_cells == 0:
                continue
            ct_idx = np.sort(rng.choice(n_ct, n_cells, p=donor_props[w.donor_id]))
            well_shift = rng.normal(0, 0.05, n_g)
            logit = log_rel[ct_idx] + (donor_shift[w.donor_id] + plate_shift[w.plate_name] + well_shift)[None, :]
            if w.sm_name != CONTROL_COMPOUND:
                logit = logit + donor_response[w.donor_id] * eff.effect[ct_idx, comp_index[w.sm_name], :]
            prob = np.exp(logit - logit.max(axis=1, keepdims=True))
            prob /= prob.sum(axis=1, keepdims=True)
            lib = mean_library_size * lib_factor[ct_idx] * rng.gamma(shape_r, 1 / shape_r, n_cells)
            mu = prob * lib[:, None]
            # Negative binomial as a gamma-Poisson mixture.
            lam = rng.gamma(nb_size[None, :], mu / nb_size[None, :])
            counts = sp.csr_matrix(rng.poisson(lam).astype(np.int32))
            populations = np.asarray(CELL_TYPES)[ct_idx]
            cts = np.asarray(labels)[ct_idx]
            is_control = w.sm_name == CONTROL_COMPOUND or w.sm_name in controls
            split = np.where(is_control, "control", np.where([(c, w.sm_name) in test_set for c in cts], "test", "train"))
            obs = pd.DataFrame({"cell_type": cts, "cell_type_orig": populations, "sm_name": w.sm_name, "donor_id": w.donor_id,
                                "plate_name": w.plate_name, "well": w.well, "split": split,
                                "sm_lincs_id": meta_cols.loc[w.sm_name, "sm_lincs_id"],
                                "SMILES": meta_cols.loc[w.sm_name, "SMILES"],
                                # As in the real single-cell obs: DMSO and positive controls are control wells.
                                "control": is_control, "row": w.well[0], "col": int(w.well[1:]),
                                "dose_uM": 1.0, "timepoint_hr": 24.0},
                               index=[f"cell_{i:07d}" for i in range(n_done, n_done + n_cells)])
            n_done += n_cells
            yield obs, counts

    return _Simulation(genes=genes, uns=uns, wells=wells())


def simulate_op3(
    meta: Op3Metadata,
    *,
    n_genes: int | None = None,
    n_compounds: int | None = None,
    n_test_compounds: int | None = None,
    n_donors: int = 3,
    plates_per_donor: int = 2,
    dmso_wells_per_plate: int = 16,
    cells_per_well: float = 180,
    mean_library_size: float = 6000,
    n_mechanisms: int = 24,
    seed: int = 0,
    keep_genes: Sequence[str] | None = None,
    group_t_cells: bool = True,
) -> ad.AnnData:
    """Draw single-cell counts of a synthetic OP3-like experiment.

    Parameters
    ----------
    meta
        The real design (:func:`load_op3_metadata`) or :func:`synthetic_metadata`.
    n_genes
        Genes to simulate (``None``: all of ``meta.genes``, i.e. the real 18,211 at full size).
    n_compounds
        Compounds including the positive controls (``None``: all 146).
    n_test_compounds
        How many of them have test rows (subset of the real test design).
    n_donors, plates_per_donor, dmso_wells_per_plate
        Plate layout (the real experiment: 3 donors, 2 plates each).
    cells_per_well
        Mean number of cells per well.
    mean_library_size
        Mean UMIs per cell.
    n_mechanisms
        Number of shared mechanisms of action.
    seed
        Random seed; the output is a deterministic function of the arguments.
    keep_genes
        Keep only these of the simulated genes (in simulation order), dropping the others well by
        well so that the full experiment fits in memory. The draws are those of the whole
        simulation, and ``obs["total_counts"]`` keeps each cell's library size over all genes
        (for normalisation).
    group_t_cells
        Label the three T-cell populations "T cells" in ``obs["cell_type"]``, as the final OP3
        annotation does (Szałata et al. 2024, §4.2); ``False`` keeps the competition's six labels.
        Either way ``obs["cell_type_orig"]`` holds the simulated population, and the draws are the
        same.

    Returns
    -------
    anndata.AnnData
        Cells x genes, integer counts in ``X`` (CSR); ``obs`` with ``cell_type``,
        ``cell_type_orig``, ``sm_name``, ``sm_lincs_id``, ``SMILES``, ``control``, ``donor_id``,
        ``plate_name``, ``well``, ``row``, ``col``, ``split``, ``dose_uM``, ``timepoint_hr``;
        ``uns["simulation"]`` with the ground truth (mechanism targets per simulated population).
    """
    sim = _simulate(meta, n_genes=n_genes, n_compounds=n_compounds, n_test_compounds=n_test_compounds,
                    n_donors=n_donors, plates_per_donor=plates_per_donor, dmso_wells_per_plate=dmso_wells_per_plate,
                    cells_per_well=cells_per_well, mean_library_size=mean_library_size, n_mechanisms=n_mechanisms,
                    seed=seed, group_t_cells=group_t_cells)
    genes = pd.Index(sim.genes)
    cols = None
    if keep_genes is not None:
        wanted = set(keep_genes)
        cols = np.flatnonzero(genes.isin(wanted))
        genes = genes[cols]
    obs_parts, blocks = [], []
    for obs, counts in sim.wells:
        if cols is not None:
            obs["total_counts"] = np.asarray(counts.sum(axis=1)).ravel()
            counts = counts[:, cols]
        obs_parts.append(obs)
        blocks.append(counts)
    obs = pd.concat(obs_parts)
    for col in ("cell_type", "cell_type_orig", "sm_name", "donor_id", "plate_name", "well", "split", "sm_lincs_id", "SMILES", "row"):
        obs[col] = obs[col].astype("category")
    x = sp.vstack(blocks, format="csr")
    del blocks
    return ad.AnnData(X=x, obs=obs, var=pd.DataFrame(index=genes), uns=sim.uns)


def simulate_op3_pseudobulk(meta: Op3Metadata, *, min_cells: int = 10, half_seed: int | None = None,
                            **kwargs) -> ad.AnnData:
    """The pseudobulk of :func:`simulate_op3` with the same arguments, without keeping single cells.

    The cells are drawn well by well and summed per cell type a few wells at a time, so a full-size
    screen needs the memory of its pseudobulk matrix and of a few wells' cells only. The result equals
    ``op3_processing.pseudobulk(simulate_op3(meta, **kwargs), min_cells=min_cells)``.

    Parameters
    ----------
    meta
        As :func:`simulate_op3`.
    min_cells
        Pseudobulk samples with fewer cells are dropped.
    half_seed
        When given, also sum a random half of every sample's cells (``layers["counts_half"]``,
        ``obs["n_cells_half"]``; see :func:`pertsci.op3_processing.half_of_cells`), the input of
        the half-cell ceiling. The split has its own random stream: the counts are the same draws
        with or without it.
    **kwargs
        The arguments of :func:`simulate_op3` (but ``keep_genes``).

    Returns
    -------
    anndata.AnnData
        Samples (plate, well, cell type) x genes, summed counts in ``X``; ``obs`` as
        :func:`pertsci.op3_processing.pseudobulk` writes it; ``uns["simulation"]`` with the ground truth.
    """
    params = {"n_genes": None, "n_compounds": None, "n_test_compounds": None, "n_donors": 3, "plates_per_donor": 2,
              "dmso_wells_per_plate": 16, "cells_per_well": 180, "mean_library_size": 6000, "n_mechanisms": 24,
              "seed": 0, "group_t_cells": True}
    unknown = set(kwargs) - set(params)
    if unknown:
        raise TypeError(f"simulate_op3_pseudobulk: unknown arguments {sorted(unknown)}")
    params.update(kwargs)
    sim = _simulate(meta, **params)
    var = pd.DataFrame(index=pd.Index(sim.genes))
    split_rng = np.random.default_rng(half_seed) if half_seed is not None else None
    parts: list[ad.AnnData] = []
    pending: list[tuple[pd.DataFrame, sp.csr_matrix, np.ndarray | None]] = []

    def flush() -> None:
        # A sample is a (plate, well, cell type) and never spans two wells, so summing several wells
        # at once gives each well's samples, in the same order; a column is carried over when it is
        # constant in every sample of the group of wells, hence when it is in every well, which is
        # what the inner join of the parts keeps either way.
        cells = ad.AnnData(X=sp.vstack([c for _, c, _ in pending], format="csr"),
                           obs=pd.concat([o for o, _, _ in pending]), var=var)
        half = None if split_rng is None else np.concatenate([h for _, _, h in pending])
        parts.append(op3_processing.pseudobulk(cells, min_cells=0, half=half))
        pending.clear()

    n_values = 0
    for obs, counts in sim.wells:
        half = None
        if split_rng is not None:
            # Plate and well are one value in a well: its samples are its cell types, in order of appearance.
            codes = pd.factorize(obs["cell_type"].astype(str))[0]
            half = op3_processing.half_of_cells(codes, split_rng)
        pending.append((obs, counts, half))
        n_values += counts.shape[0] * counts.shape[1]
        # Wells are summed a group at a time: one pseudobulk call per well costs more in pandas than
        # the sums, and the cells held at once stay within a bounded number of matrix entries.
        if n_values >= _PSEUDOBULK_BLOCK_VALUES:
            flush()
            n_values = 0
    if pending:
        flush()
    pb = ad.concat(parts, merge="same")
    keep = (pb.obs["n_cells"].to_numpy() >= min_cells) & (np.asarray(pb.X).sum(axis=1) > 0)
    pb = pb[keep].copy()
    pb.uns.update(sim.uns)
    return pb
