"""The synthetic Perturb-seq screen (perturbation_effect_lib.perturbseq_simulation)."""

from __future__ import annotations

import numpy as np
import pytest
from perturbation_effect_lib import perturbseq_simulation as perturb_sim
from perturbation_effect_lib import pseudobulk
from project_paths import SHARED_DATA

from pertsci import knowledge_graphs as kg

needs_data = pytest.mark.skipif(not (SHARED_DATA / "basal_expression").is_dir(),
                                reason=f"shared data not found at {SHARED_DATA} (set OPENPERT_SHARED_DATA)")


def test_simulated_screen_structure(small_screen):
    sim = small_screen
    cells = sim.cells
    assert set(cells.obs["condition"]) >= {"ctrl"}
    profiles, control = pseudobulk.pseudobulk(cells)
    assert len(profiles) == 24 + 4 and (profiles.obs["n_targets"] == 2).sum() == 4
    # CRISPRi: each single perturbation's target is knocked down relative to control.
    singles = [p for p in profiles.obs_names if "+" not in p]
    drop = [profiles[p, p].X[0, 0] - control[p] for p in singles]
    assert np.mean(np.array(drop) < 0) > 0.9
    # Functional structure: perturbations of one program resemble each other more than others.
    delta = profiles[singles].X - control.to_numpy()
    delta = delta - delta.mean(axis=0)
    corr = np.corrcoef(delta)
    cls = sim.functional_class.reindex(singles).to_numpy()
    same = (cls[:, None] == cls[None, :]) & (cls[:, None] != perturb_sim.UNASSIGNED)
    np.fill_diagonal(same, False)
    other = cls[:, None] != cls[None, :]
    assert corr[same].mean() > corr[other].mean() + 0.1
    # Deterministic.
    again = perturb_sim.simulate_screen(n_genes=200, n_perturbations=24, n_combinations=4, n_programs=3,
                                        program_size=(8, 10), cells_per_perturbation=20, n_control_cells=300, seed=2)
    assert (again.cells.layers["counts"] != cells.layers["counts"]).nnz == 0


@needs_data
def test_simulated_counts_follow_the_k562_baseline():
    baseline = perturb_sim.load_baseline(SHARED_DATA / perturb_sim.GASPERINI_BASELINE, kg.ensembl_to_symbol(SHARED_DATA / "perturbqa" / "k562_gw_mapping_full.json"))
    sim = perturb_sim.simulate_screen(n_genes=300, n_perturbations=10, n_combinations=0, n_programs=2,
                                      program_size=(5, 10), cells_per_perturbation=10, n_control_cells=400,
                                      seed=0, baseline=baseline)
    genes = list(sim.cells.var_names)
    assert genes == list(baseline.index[:300])  # the most expressed K562 genes
    ctrl = sim.cells[sim.cells.obs["condition"] == "ctrl"].layers["counts"]
    mean = np.asarray(ctrl.mean(axis=0)).ravel()
    expected = perturb_sim.GASPERINI_UMIS_PER_CELL * baseline["relative_expression"].iloc[:300].to_numpy()
    ratio = mean / expected
    assert 0.9 < np.median(ratio) < 1.15  # log-normal library sizes have mean exp(sigma^2 / 2)
    # Overdispersion: variance above the Poisson's for genes with a small NB size.
    var = np.asarray(ctrl.power(2).mean(axis=0)).ravel() - mean**2
    size = baseline["expression_size"].iloc[:300].to_numpy()
    low = size < 2
    assert np.median(var[low] / mean[low]) > 2


def test_load_baseline_names_a_missing_or_malformed_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="baseline.tsv: single-cell baseline not found"):
        perturb_sim.load_baseline(tmp_path / "baseline.tsv", {})
    (tmp_path / "odd.tsv").write_text("response_id\tmean\nENSG1\t1.0\n")
    with pytest.raises(ValueError, match="odd.tsv: expected columns"):
        perturb_sim.load_baseline(tmp_path / "odd.tsv", {})
    (tmp_path / "ok.tsv").write_text("response_id\trelative_expression\texpression_size\n"
                                     "ENSG1\t0.1\t2.0\nENSG2\t0.3\t1.0\nENSG3\t0.2\t5.0\nENSG4\t0.4\t1.0\n")
    table = perturb_sim.load_baseline(tmp_path / "ok.tsv", {"ENSG1": "A", "ENSG2": "B", "ENSG3": "B"})
    # ENSG4 has no symbol; B keeps its most expressed id; most expressed first.
    assert list(table.index) == ["B", "A"] and table.loc["B", "expression_size"] == 1.0


def test_equal_expression_is_ordered_by_name_whatever_the_file_order(tmp_path):
    # Real baselines hold many equal values: the most expressed n_genes, and the id a symbol keeps,
    # must not depend on the file's row order (nor on the CPU's sort of equal values).
    rows = [("ENSG1", 0.3, 1.0), ("ENSG2", 0.1, 2.0), ("ENSG3", 0.1, 3.0), ("ENSG4", 0.1, 4.0),
            ("ENSG5", 0.3, 5.0), ("ENSG6", 0.1, 6.0), ("ENSG7", 0.05, 7.0)]
    symbols = {"ENSG1": "M", "ENSG2": "D", "ENSG3": "B", "ENSG4": "C", "ENSG5": "A", "ENSG6": "C", "ENSG7": "Z"}
    tables = []
    for k, perm in enumerate([range(7), [6, 5, 4, 3, 2, 1, 0], [3, 0, 6, 2, 5, 1, 4]]):
        path = tmp_path / f"baseline{k}.tsv"
        path.write_text("response_id\trelative_expression\texpression_size\n"
                        + "".join(f"{rows[i][0]}\t{rows[i][1]}\t{rows[i][2]}\n" for i in perm))
        tables.append(perturb_sim.load_baseline(path, symbols))
    for table in tables:
        assert list(table.index) == ["A", "M", "B", "C", "D", "Z"]
        assert table.loc["C", "expression_size"] == 4.0  # C's two ids tie: the first id by name
    # The cut after 4 genes falls among the ties at 0.1: B and C, whatever the baseline's row order.
    for base in (tables[0], tables[0].iloc[::-1], tables[0].sample(frac=1.0, random_state=3)):
        sim = perturb_sim.simulate_screen(n_genes=4, n_perturbations=2, n_combinations=0, n_programs=1,
                                          program_size=(2, 2), cells_per_perturbation=2, n_control_cells=4,
                                          seed=0, baseline=base)
        assert list(sim.cells.var_names) == ["A", "M", "B", "C"]
