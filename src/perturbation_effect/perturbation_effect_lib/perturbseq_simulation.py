"""A synthetic Perturb-seq screen with gene programs, with realistic count statistics.

The generator makes what the unseen-perturbation task needs to be meaningful: perturbations of
functionally related genes have similar effects, and functional classes exist that a
leave-one-group-out split can hold out.

Model (natural-log fold changes ``delta`` over genes, per perturbation):

* **Gene programs.** ``n_programs`` disjoint sets of genes (real GO biological-process terms
  restricted to the measured genes when ``gene_sets`` is given, else random sets). Each program
  has a signature: its own members change together (as subunits of a complex or genes of one
  pathway do, so that a member's expression across perturbations reveals its program), and a
  sparse set of downstream genes responds.
* **Perturbations.** Knocking down a program member gives ``a * signature + c * generic + noise``:
  a random strength ``a``, a share ``c`` of a generic response common to all perturbations (real
  screens share a stress/proliferation response, which is why the mean change is a strong
  baseline), and sparse gene-specific noise. Some perturbations are ineffective (no effect beyond
  the knock-down). Genes outside every program (``unassigned``) have weak generic effects. The
  target itself is knocked down to 10-30% (CRISPRi).
* **Combinations.** ``delta_A + delta_B`` plus an interaction: buffering where both change a gene
  in the same direction, and sparse synergy.
* **Counts.** Cell ``i`` of condition ``c`` has counts ``NB(mean = L_i * q_c, size_g)`` with
  ``q_c`` the baseline composition reweighted by ``exp(delta_c)``, the library size ``L_i``
  log-normal around the baseline's UMIs per cell, and the per-gene relative expression and
  negative-binomial size taken from a real single-cell baseline (by default the K562 CRISPRi
  screen of Gasperini et al. 2019, ``basal_expression/singlecell_baseline_K562_Gasperini.tsv``)
  where genes match; unmatched genes draw a (mean, size) pair from the baseline's genes.

The output is a single-cell AnnData in the GEARS layout (``obs["condition"]`` ``ctrl`` /
``A+ctrl`` / ``A+B``, log-normalised ``X``, raw counts in ``layers["counts"]``), which the task
turns into pseudobulks exactly as it does real screens.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from pertsci import ordering
from perturbation_effect_lib.pseudobulk import CONTROL, condition_key, condition_name, log_normalize

__all__ = [
    "GASPERINI_BASELINE",
    "GASPERINI_UMIS_PER_CELL",
    "SimulatedScreen",
    "load_baseline",
    "choose_programs",
    "simulate_screen",
]

#: Path of the K562 single-cell baseline below the shared data folder.
GASPERINI_BASELINE = Path("basal_expression") / "singlecell_baseline_K562_Gasperini.tsv"
#: Mean UMIs per cell of the Gasperini et al. (2019) screen, from which the baseline was estimated.
GASPERINI_UMIS_PER_CELL = 59_163
UNASSIGNED = "unassigned"
# NB sizes estimated for rarely detected genes can be absurdly small; they are bounded so that a
# gene is not all zeros with rare huge spikes.
_SIZE_BOUNDS = (0.1, 1000.0)


@dataclass
class SimulatedScreen:
    """A simulated screen.

    Attributes
    ----------
    cells
        Cells x genes in the GEARS layout.
    effects
        True natural-log fold changes, perturbations (canonical ids, ``A`` or ``A+B``) x genes.
    programs
        Program name -> member genes.
    functional_class
        Perturbation id -> program of its target (``"unassigned"`` outside every program;
        combinations join their targets' classes with ``" + "``).
    """

    cells: ad.AnnData
    effects: pd.DataFrame
    programs: dict[str, list[str]]
    functional_class: pd.Series


def load_baseline(path: str | Path, symbols: dict[str, str]) -> pd.DataFrame:
    """Per-gene relative expression and NB size of a real single-cell baseline, by gene symbol.

    Parameters
    ----------
    path
        A ``singlecell_baseline_*.tsv`` (columns ``response_id`` (Ensembl), ``relative_expression``,
        ``expression_size``), e.g. :data:`GASPERINI_BASELINE` below the shared data folder.
    symbols
        Ensembl id -> symbol (e.g. :func:`pertsci.knowledge_graphs.ensembl_to_symbol`). Genes
        without a symbol are dropped; a symbol of several ids keeps the most expressed.

    Returns
    -------
    pandas.DataFrame
        Indexed by symbol, columns ``relative_expression`` and ``expression_size``, most expressed
        first.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: single-cell baseline not found")
    table = pd.read_csv(path, sep="\t")
    needed = {"response_id", "relative_expression", "expression_size"}
    if not needed <= set(table.columns):
        raise ValueError(f"{path}: expected columns {sorted(needed)}, found {list(table.columns)}")
    table["symbol"] = table["response_id"].map(symbols)
    table = table.dropna(subset=["symbol"])
    # A symbol of several ids keeps its most expressed; equal expression by id (pertsci.ordering).
    table = table.iloc[ordering.descending(table["relative_expression"], table["response_id"].astype(str))]
    table = table.drop_duplicates("symbol").set_index("symbol")
    table.index.name = None
    table = table.iloc[ordering.descending(table["relative_expression"], table.index)]  # equal values by symbol
    return table[["relative_expression", "expression_size"]]


def _synthetic_baseline(n_genes: int, rng: np.random.Generator) -> pd.DataFrame:
    """Log-normal stand-in used only when no real baseline is available."""
    rel = np.sort(rng.lognormal(mean=-9.5, sigma=1.6, size=n_genes))[::-1]
    size = np.exp(rng.normal(0.5, 0.8, size=n_genes))
    return pd.DataFrame({"relative_expression": rel, "expression_size": size},
                        index=[f"GENE{i:05d}" for i in range(1, n_genes + 1)])


def choose_programs(universe: list[str], n_programs: int, *, gene_sets: dict[str, list[str]] | None,
                    size_range: tuple[int, int], rng: np.random.Generator) -> dict[str, list[str]]:
    """Disjoint gene programs over ``universe``.

    With ``gene_sets``, sets are visited in a seeded random order and a set becomes a program when
    at least ``size_range[0]`` of its measured genes are not yet in a program (those genes, up to
    ``size_range[1]``, are its members). Sets larger than ``4 * size_range[1]`` among the measured
    genes are too generic and skipped. Without ``gene_sets``, random disjoint sets are drawn.

    Raises
    ------
    ValueError
        When fewer than ``n_programs`` programs can be formed.
    """
    lo, hi = size_range
    if gene_sets is None:
        sizes = rng.integers(lo, hi + 1, size=n_programs)
        if sizes.sum() > len(universe):
            raise ValueError(f"{n_programs} programs of {lo}-{hi} genes do not fit in {len(universe)} genes")
        order = rng.permutation(len(universe))
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        return {f"program_{k + 1:02d}": sorted(universe[j] for j in order[bounds[k]:bounds[k + 1]]) for k in range(n_programs)}
    measured = set(universe)
    names = sorted(gene_sets)
    used: set[str] = set()
    programs: dict[str, list[str]] = {}
    for idx in rng.permutation(len(names)):
        name = names[idx]
        members = sorted(measured.intersection(gene_sets[name]))
        if len(members) > 4 * hi:
            continue
        free = [g for g in members if g not in used]
        if len(free) < lo:
            continue
        chosen = sorted(rng.choice(free, size=min(hi, len(free)), replace=False).tolist())
        programs[name] = chosen
        used.update(chosen)
        if len(programs) == n_programs:
            return programs
    raise ValueError(f"only {len(programs)} of {n_programs} programs of {lo}-{hi} measured genes could be formed")


def _sparse_normal(rng: np.random.Generator, n: int, frac: float, scale: float, exclude: np.ndarray | None = None) -> np.ndarray:
    out = np.zeros(n)
    pool = np.setdiff1d(np.arange(n), exclude) if exclude is not None else np.arange(n)
    k = max(1, int(round(frac * n)))
    idx = rng.choice(pool, size=min(k, len(pool)), replace=False)
    out[idx] = rng.normal(0.0, scale, size=len(idx))
    return out


def simulate_screen(
    *,
    n_genes: int = 1000,
    n_perturbations: int = 200,
    n_combinations: int = 40,
    n_programs: int = 10,
    cells_per_perturbation: int = 50,
    n_control_cells: int = 500,
    seed: int = 0,
    baseline: pd.DataFrame | None = None,
    gene_sets: dict[str, list[str]] | None = None,
    umis_per_cell: float = GASPERINI_UMIS_PER_CELL,
    program_size: tuple[int, int] = (8, 30),
    frac_ineffective: float = 0.15,
    frac_unassigned: float = 0.1,
) -> SimulatedScreen:
    """Simulate a Perturb-seq screen (see the module docstring for the model).

    Parameters
    ----------
    n_genes
        Measured genes: the ``n_genes`` most expressed genes of ``baseline`` (a screen measures
        expressed genes), or synthetic ones without a baseline.
    n_perturbations
        Single-gene perturbations; targets are measured genes, ``1 - frac_unassigned`` of them in
        programs.
    n_combinations
        Two-gene combinations of the single perturbations' targets.
    n_programs
        Gene programs (functional classes).
    cells_per_perturbation, n_control_cells
        Cells per condition (each perturbation gets a Poisson number around the mean, at least 5).
    seed
        Seed of everything.
    baseline
        From :func:`load_baseline`; ``None`` draws a log-normal stand-in (use only without data).
    gene_sets
        Gene sets to take programs from (e.g. ``pertsci.knowledge_graphs.gene_sets("go_bp", kg_dir)``).
    umis_per_cell
        Mean UMIs per cell over all genes of the baseline; a cell's counts on the measured genes
        are this times their share of relative expression.
    program_size
        Min and max measured members of a program.
    frac_ineffective, frac_unassigned
        Share of program perturbations without a downstream effect; share of targets outside
        every program.
    """
    rng = np.random.default_rng(seed)
    if baseline is None:
        baseline = _synthetic_baseline(max(4 * n_genes, 2000), rng)
    if len(baseline) < n_genes:
        raise ValueError(f"the baseline has {len(baseline)} genes; {n_genes} were asked for")
    # The n_genes most expressed; the cut may fall among equal values, ordered by symbol (pertsci.ordering).
    base = baseline.iloc[ordering.descending(baseline["relative_expression"], baseline.index.astype(str))[:n_genes]]
    genes = list(base.index.astype(str))
    share = float(base["relative_expression"].sum())
    p0 = base["relative_expression"].to_numpy(dtype=float) / share
    size = np.clip(base["expression_size"].to_numpy(dtype=float), *_SIZE_BOUNDS)
    library = umis_per_cell * share

    programs = choose_programs(genes, n_programs, gene_sets=gene_sets, size_range=program_size, rng=rng)
    gene_pos = {g: i for i, g in enumerate(genes)}
    members_all = sorted({g for m in programs.values() for g in m})
    outside = sorted(set(genes) - set(members_all))
    n_unassigned = int(round(frac_unassigned * n_perturbations))
    n_assigned = n_perturbations - n_unassigned
    if n_assigned > len(members_all) or n_unassigned > len(outside):
        raise ValueError(f"{n_perturbations} perturbations need {n_assigned} program members (have {len(members_all)}) "
                         f"and {n_unassigned} other genes (have {len(outside)})")
    targets = sorted(rng.choice(members_all, n_assigned, replace=False).tolist()
                     + rng.choice(outside, n_unassigned, replace=False).tolist())
    program_of = {g: name for name, m in programs.items() for g in m}

    n = len(genes)
    generic = _sparse_normal(rng, n, 0.05, 0.35)
    signatures = {}
    for name, members in programs.items():
        idx = np.array([gene_pos[g] for g in members])
        sig = _sparse_normal(rng, n, 0.04, 0.5, exclude=idx)
        sig[idx] = -rng.uniform(0.4, 1.0, size=len(idx))
        signatures[name] = sig
    effects: dict[str, np.ndarray] = {}
    classes: dict[str, str] = {}
    for t in targets:
        prog = program_of.get(t)
        delta = _sparse_normal(rng, n, 0.01, 0.25)
        if prog is None:
            delta += rng.uniform(0.0, 0.5) * generic
        elif rng.random() >= frac_ineffective:
            delta += rng.lognormal(0.0, 0.4) * signatures[prog] + rng.uniform(0.2, 1.0) * generic
        else:
            delta[:] = 0.0
        delta[gene_pos[t]] += np.log(rng.uniform(0.1, 0.3))
        effects[t] = delta
        classes[t] = prog or UNASSIGNED
    pairs: set[tuple[str, str]] = set()
    max_pairs = len(targets) * (len(targets) - 1) // 2
    if n_combinations > max_pairs:
        raise ValueError(f"{n_combinations} combinations asked for, but {len(targets)} targets give only {max_pairs}")
    while len(pairs) < n_combinations:
        a, b = sorted(rng.choice(targets, 2, replace=False).tolist())
        pairs.add((a, b))
    for a, b in sorted(pairs):
        da, db = effects[a], effects[b]
        same = np.sign(da) == np.sign(db)
        buffering = np.where(same, -0.3 * np.sign(da) * np.minimum(np.abs(da), np.abs(db)), 0.0)
        effects[f"{a}+{b}"] = da + db + buffering + _sparse_normal(rng, n, 0.02, 0.2)
        classes[f"{a}+{b}"] = " + ".join(sorted({classes[a], classes[b]}))

    # Cells, one condition at a time (a gamma-Poisson draw per cell and gene).
    keys = [CONTROL, *effects]
    blocks, labels = [], []
    for key in keys:
        n_cells = n_control_cells if key == CONTROL else max(5, int(rng.poisson(cells_per_perturbation)))
        delta = np.zeros(n) if key == CONTROL else effects[key]
        q = p0 * np.exp(delta)
        q /= q.sum()
        lib = library * rng.lognormal(0.0, 0.25, size=n_cells)
        mu = lib[:, None] * q[None, :]
        counts = rng.poisson(rng.gamma(shape=size[None, :], scale=mu / size[None, :]))
        blocks.append(sp.csr_matrix(counts.astype(np.int32)))
        labels.extend([condition_name(key.split("+")) if key != CONTROL else CONTROL] * n_cells)
    counts = sp.vstack(blocks, format="csr")
    obs = pd.DataFrame({
        "condition": labels,
        "cell_type": "K562",
        "control": np.array([lab == CONTROL for lab in labels], dtype=np.int64),
    }, index=[f"cell{i:06d}" for i in range(len(labels))])
    var = pd.DataFrame({"gene_name": genes}, index=genes)
    cells = ad.AnnData(X=log_normalize(counts), obs=obs, var=var, layers={"counts": counts})
    cells.uns["simulation"] = {"seed": int(seed), "umis_per_cell": float(umis_per_cell), "n_programs": int(n_programs)}
    effect_frame = pd.DataFrame(np.vstack(list(effects.values())), index=[condition_key(k.split("+")) for k in effects], columns=genes)
    class_series = pd.Series({condition_key(k.split("+")): v for k, v in classes.items()}, name="functional_class")
    return SimulatedScreen(cells=cells, effects=effect_frame, programs=programs, functional_class=class_series)
