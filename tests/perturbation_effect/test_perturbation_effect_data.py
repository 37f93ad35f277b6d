"""Pseudobulks, readers, splits and the synthetic screen (perturbation_effect_lib.pseudobulk, .splits, .perturb_sim)."""

from __future__ import annotations

from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from perturbation_effect_lib import holdout_splits as splits
from perturbation_effect_lib import perturbseq_simulation as perturb_sim
from perturbation_effect_lib import pseudobulk
from project_paths import SHARED_DATA

from openpert.config.viash import find_project_root

ROOT = find_project_root(Path(__file__).resolve().parent)
GEARS_FILE = ROOT / "resources_test/perturbation_effect/raw/gears_perturbseq.h5ad"
HAS_DATA = (SHARED_DATA / "knowledge_graphs").is_dir()
needs_data = pytest.mark.skipif(not HAS_DATA, reason=f"shared data not found at {SHARED_DATA} (set OPENPERT_SHARED_DATA)")


@pytest.fixture(scope="module")
def small_screen():
    return perturb_sim.simulate_screen(n_genes=200, n_perturbations=24, n_combinations=4, n_programs=3,
                                       program_size=(8, 10), cells_per_perturbation=20, n_control_cells=300, seed=2)


# --- conditions ----------------------------------------------------------------------------------


@pytest.mark.parametrize("condition,targets", [
    ("ctrl", ()), ("KLF1+ctrl", ("KLF1",)), ("ctrl+KLF1", ("KLF1",)), ("CBL+CNN1", ("CBL", "CNN1")), (" A + ctrl ", ("A",)),
])
def test_parse_condition(condition, targets):
    assert pseudobulk.parse_condition(condition) == targets


def test_condition_names_are_canonical():
    assert pseudobulk.condition_key(("B", "A")) == "A+B"
    assert pseudobulk.condition_name(["B", "A"]) == "A+B"
    assert pseudobulk.condition_name(["A"]) == "A+ctrl"
    assert pseudobulk.condition_name([]) == "ctrl"
    with pytest.raises(ValueError, match="appears twice"):
        pseudobulk.parse_condition("A+A")
    with pytest.raises(ValueError, match="empty"):
        pseudobulk.parse_condition("A+")


# --- pseudobulk and readers ----------------------------------------------------------------------


def test_pseudobulk_is_the_mean_per_perturbation():
    X = np.arange(24, dtype=float).reshape(8, 3)
    obs = pd.DataFrame({"condition": ["ctrl", "ctrl", "A+ctrl", "ctrl+A", "A+B", "B+A", "C+ctrl", "B+ctrl"]},
                       index=[f"c{i}" for i in range(8)])
    cells = ad.AnnData(X=sp.csr_matrix(X), obs=obs, var=pd.DataFrame(index=["g1", "g2", "g3"]))
    profiles, control = pseudobulk.pseudobulk(cells, min_cells=2)
    np.testing.assert_array_equal(control.to_numpy(), X[:2].mean(axis=0))
    assert list(profiles.obs_names) == ["A", "A+B"]  # C and B have one cell each
    np.testing.assert_array_equal(profiles["A"].X[0], X[2:4].mean(axis=0))
    np.testing.assert_array_equal(profiles["A+B"].X[0], X[4:6].mean(axis=0))
    assert profiles.obs.loc["A+B", "condition"] == "A+B" and profiles.obs.loc["A", "condition"] == "A+ctrl"
    assert profiles.obs["n_cells"].tolist() == [2, 2]
    cells.obs["condition"] = "A+ctrl"
    with pytest.raises(ValueError, match="no control cells"):
        pseudobulk.pseudobulk(cells)


def test_log_normalize():
    counts = sp.csr_matrix(np.array([[1, 3, 0], [0, 0, 0], [5, 5, 10]]))
    X = pseudobulk.log_normalize(counts).toarray()
    np.testing.assert_allclose(X[0], np.log1p([2500.0, 7500.0, 0.0]), rtol=1e-6)
    assert not X[1].any()
    assert pseudobulk.is_count_matrix(counts) and not pseudobulk.is_count_matrix(X)


def test_read_gears_resource():
    cells = pseudobulk.read_gears(GEARS_FILE)
    assert "ctrl" in set(cells.obs["condition"])
    assert any("+" in c and "ctrl" not in c for c in cells.obs["condition"])  # combinations are kept
    assert not pseudobulk.is_count_matrix(cells.X)  # log-normalised values, read as they are
    assert pseudobulk.read_perturbseq(GEARS_FILE).obs["condition"].equals(cells.obs["condition"])


def test_scperturb_and_gears_layouts_give_the_same_pseudobulk(small_screen, tmp_path):
    cells = small_screen.cells
    counts = cells.layers["counts"]
    gears = ad.AnnData(X=counts.astype(np.float32), obs=cells.obs[["condition"]].copy(), var=cells.var.copy())
    gears.write_h5ad(tmp_path / "gears.h5ad")
    targets = [pseudobulk.parse_condition(c) for c in cells.obs["condition"]]
    scp_obs = pd.DataFrame({"perturbation": ["_".join(t) if t else "control" for t in targets],
                            "nperts": [len(t) for t in targets]}, index=cells.obs_names)
    ad.AnnData(X=counts, obs=scp_obs, var=pd.DataFrame(index=cells.var_names)).write_h5ad(tmp_path / "scp.h5ad")
    a, ctrl_a = pseudobulk.pseudobulk(pseudobulk.read_perturbseq(tmp_path / "gears.h5ad"))
    b, ctrl_b = pseudobulk.pseudobulk(pseudobulk.read_perturbseq(tmp_path / "scp.h5ad"))
    assert list(a.obs_names) == list(b.obs_names)
    np.testing.assert_allclose(a.X, b.X, rtol=1e-6)
    np.testing.assert_allclose(ctrl_a, ctrl_b, rtol=1e-6)
    # counts were normalised on reading: identical to the log-normalised X of the simulation
    direct, _ = pseudobulk.pseudobulk(cells)
    np.testing.assert_allclose(a.X, direct.X, rtol=1e-5)
    scp_obs.iloc[-1, 1] = 5
    ad.AnnData(X=counts, obs=scp_obs, var=pd.DataFrame(index=cells.var_names)).write_h5ad(tmp_path / "bad.h5ad")
    with pytest.raises(ValueError, match="bad.h5ad.*nperts"):
        pseudobulk.read_scperturb(tmp_path / "bad.h5ad")


def test_readers_name_the_file_when_the_layout_is_wrong(tmp_path):
    ad.AnnData(X=np.ones((2, 2)), obs=pd.DataFrame({"x": ["a", "b"]}, index=["c1", "c2"])).write_h5ad(tmp_path / "odd.h5ad")
    with pytest.raises(ValueError, match="odd.h5ad.*condition"):
        pseudobulk.read_gears(tmp_path / "odd.h5ad")
    with pytest.raises(ValueError, match="odd.h5ad: cannot tell the layout"):
        pseudobulk.read_perturbseq(tmp_path / "odd.h5ad")


# --- splits -------------------------------------------------------------------------------------


def test_simulation_split_follows_gears():
    genes = [f"G{i:02d}" for i in range(40)]
    combos = ["G00+G01", "G02+G39", "G38+G39", "G03+G04", "G05+G06", "G07+G08", "G09+G10", "G11+G12"]
    perts = genes + combos
    split = splits.simulation_split(perts, seed=1)
    again = splits.simulation_split(list(reversed(perts)), seed=1)
    assert split.equals(again.loc[split.index])  # independent of the input order
    train_genes = {p for p in genes if split.loc[p, "split"] == "train"}
    assert len(train_genes) == int(0.75 * 40)
    for combo in combos:
        n_seen = sum(g in train_genes for g in combo.split("+"))
        row = split.loc[combo]
        if n_seen < 2:
            assert (row["split"], row["subgroup"]) == ("test", f"combo_seen{n_seen}")
        else:
            assert row["subgroup"] in ("train", "combo_seen2")
    assert (split.loc[[g for g in genes if g not in train_genes], "subgroup"] == "unseen_single").all()
    assert not splits.simulation_split(perts, seed=2).equals(split)


def test_logo_split_holds_out_every_perturbation_touching_the_class():
    perts = ["A", "B", "C", "A+C", "B+C", "D"]
    split = splits.logo_split(perts, ["A", "B"])
    assert split["split"].tolist() == ["test", "test", "train", "test", "test", "train"]
    with pytest.raises(ValueError, match="no perturbation"):
        splits.logo_split(perts, ["Z"])
    with pytest.raises(ValueError, match="nothing is left"):
        splits.logo_split(["A", "B"], ["A", "B"])


def test_task_files_keep_test_profiles_in_the_solution_only(small_screen):
    profiles, control = pseudobulk.pseudobulk(small_screen.cells)
    profiles.obs["functional_class"] = small_screen.functional_class.reindex(profiles.obs_names).to_numpy()
    train, test, solution = splits.split_profiles(profiles, control, lsft_fraction=0.05, uns={"dataset_id": "x"})
    assert set(train.obs_names).isdisjoint(test.obs_names)
    assert set(train.obs_names) | set(test.obs_names) == set(profiles.obs_names)
    assert test.X is None and "n_cells" not in test.obs
    np.testing.assert_array_equal(solution.layers["expression"], profiles[test.obs_names].X)
    np.testing.assert_array_equal(train.X, profiles[train.obs_names].X)
    assert train.uns["lsft_fraction"] == 0.05 and train.uns["split"] == "simulation"
    logo_train, logo_test, _ = splits.split_profiles(profiles, control, split="logo", logo_source="functional_class")
    held = logo_train.uns["heldout_class"]
    assert held == splits.choose_logo_class(profiles.obs)
    assert (logo_test.obs["functional_class"].str.contains(held, regex=False)).all()
    assert not logo_train.obs["functional_class"].eq(held).any()


@needs_data
def test_class_genes_from_real_annotation():
    tfs = splits.class_genes("tf", "")
    assert len(tfs) > 1500 and "KLF1" in tfs and "GATA1" in tfs
    translation = splits.class_genes("go_bp", "GO:0006412")
    assert "RPL3" in translation
    assert splits.class_genes("go_bp", "translation (GO:0006412)") == translation
    with pytest.raises(KeyError):
        splits.class_genes("go_bp", "GO:9999999")
    classes = splits.annotate_functional_class(["KLF1", "RPL3", "GATA1+RPL3"], "tf")
    assert classes == ["transcription factor", "other", "other + transcription factor"]


# --- the simulator ------------------------------------------------------------------------------


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
    baseline = perturb_sim.load_baseline()
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
