"""Conditions, readers and pseudobulks of Perturb-seq screens (perturbation_effect_lib.pseudobulk)."""

from __future__ import annotations

import itertools

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from perturbation_effect_lib import pseudobulk
from project_paths import ROOT

GEARS_FILE = ROOT / "resources_test/perturbation_effect/raw/gears_perturbseq.h5ad"


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


def test_half_pseudobulk_averages_a_random_half_of_each_perturbations_cells():
    rng = np.random.default_rng(0)
    conditions = ["ctrl"] * 4 + ["A+ctrl"] * 6 + ["A+B"] * 5 + ["C+ctrl"] * 1
    X = rng.normal(size=(len(conditions), 3))
    cells = ad.AnnData(X=X, obs=pd.DataFrame({"condition": conditions}, index=[f"c{i}" for i in range(len(conditions))]),
                       var=pd.DataFrame(index=["g1", "g2", "g3"]))
    profiles, _ = pseudobulk.pseudobulk(cells)
    means, n_half = pseudobulk.half_pseudobulk(cells, profiles, seed=1)
    assert list(profiles.obs_names) == ["A", "A+B", "C"] and n_half.tolist() == [3, 2, 1]
    for row, cells_of in zip(means, (X[4:10], X[10:15], X[15:16])):
        # The mean of some subset of that perturbation's own cells, of the stated size.
        matches = [np.allclose(row, cells_of[list(c)].mean(axis=0)) for c in itertools.combinations(range(len(cells_of)), max(1, len(cells_of) // 2))]
        assert any(matches)
    again, _ = pseudobulk.half_pseudobulk(cells, profiles, seed=1)
    np.testing.assert_array_equal(means, again)


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


def write_perturbench(cells: ad.AnnData, path, screens=(("screenA", "K562"), ("screenB", "RPE1")), *, control="control"):
    """``cells`` (GEARS conditions) in PerturBench's layout, once per (dataset, cell_type): the second
    screen's expression is doubled, so that pooling the two would change every pseudobulk."""
    parts = []
    for i, (dataset, cell_type) in enumerate(screens):
        targets = [pseudobulk.parse_condition(c) for c in cells.obs["condition"]]
        conditions = ["+".join(t) if t else control for t in targets]
        obs = pd.DataFrame({"condition": conditions, "perturbation": conditions, "dataset": dataset, "cell_type": cell_type,
                            "treatment": "none", "dose": ["1+1" if len(t) > 1 else "1" for t in targets]},
                           index=[f"{dataset}-{cell_type}-{name}" for name in cells.obs_names])
        X = sp.csr_matrix(cells.X, dtype=np.float64) * (1.0 + i)
        parts.append(ad.AnnData(X=X, obs=obs, var=pd.DataFrame(index=cells.var_names.copy())))
    both = ad.concat(parts)
    both.obs = both.obs.astype("category")  # as PerturBench writes them
    both.uns["log1p"] = {}
    both.write_h5ad(path)
    return both


def test_perturbench_layout_reads_one_screen_as_the_gears_layout_does(small_screen, tmp_path):
    write_perturbench(small_screen.cells, tmp_path / "bench.h5ad")
    direct, direct_control = pseudobulk.pseudobulk(small_screen.cells)
    for screen, factor in ((["dataset=screenA"], 1.0), (["dataset=screenB", "cell_type=RPE1"], 2.0)):
        cells = pseudobulk.read_perturbseq(tmp_path / "bench.h5ad", obs_filter=screen)
        assert cells.uns["layout"] == "perturbench" and cells.uns["obs_filter"] == screen
        assert set(cells.obs["condition"]) == set(small_screen.cells.obs["condition"])  # GEARS style: ctrl, A+ctrl, A+B
        profiles, control = pseudobulk.pseudobulk(cells)
        assert list(profiles.obs_names) == list(direct.obs_names)
        np.testing.assert_allclose(profiles.X, factor * direct.X, rtol=1e-6)
        np.testing.assert_allclose(control, factor * direct_control, rtol=1e-6)
    explicit = pseudobulk.read_perturbench(tmp_path / "bench.h5ad", obs_filter=["dataset=screenA"])
    assert explicit.obs["condition"].equals(pseudobulk.read_perturbseq(tmp_path / "bench.h5ad", "perturbench", ["dataset=screenA"]).obs["condition"])
    # The filter is the layout's own business only in that PerturBench files need it: GEARS files take it too.
    gears = small_screen.cells.copy()
    gears.obs["batch"] = np.where(np.arange(gears.n_obs) % 2 == 0, "b1", "b2")
    gears.write_h5ad(tmp_path / "gears.h5ad")
    half = pseudobulk.read_perturbseq(tmp_path / "gears.h5ad", obs_filter=["batch=b1"])
    assert half.uns["layout"] == "gears" and half.n_obs == int((gears.obs["batch"] == "b1").sum())


def test_a_perturbench_file_of_several_screens_is_never_pooled(small_screen, tmp_path):
    path = tmp_path / "two_screens.h5ad"
    write_perturbench(small_screen.cells, path, screens=(("screenA", "K562"), ("screenA", "RPE1")))
    with pytest.raises(ValueError, match=r"two_screens.h5ad: the cells come from more than one screen or context "
                                         r"\(obs\['cell_type'\]: \['K562', 'RPE1'\]\).*e\.g\. cell_type=K562"):
        pseudobulk.read_perturbseq(path)
    with pytest.raises(ValueError, match=r"two_screens.h5ad: the cells selected by obs filter dataset=screenA come from more than one"):
        pseudobulk.read_perturbench(path, obs_filter=["dataset=screenA"])
    assert pseudobulk.read_perturbseq(path, obs_filter=["cell_type=RPE1"]).n_obs == small_screen.cells.n_obs


def test_an_obs_filter_that_selects_nothing_names_the_file(small_screen, tmp_path):
    path = tmp_path / "bench.h5ad"
    write_perturbench(small_screen.cells, path)
    with pytest.raises(ValueError, match=r"bench.h5ad: obs filter dataset=screenC selects no cell \(obs\['dataset'\] has \['screenA', 'screenB'\]\)"):
        pseudobulk.read_perturbseq(path, obs_filter=["dataset=screenC"])
    with pytest.raises(ValueError, match=r"bench.h5ad: obs filter dataset=screenA, cell_type=RPE1 selects no cell"):
        pseudobulk.read_perturbseq(path, obs_filter=["dataset=screenA", "cell_type=RPE1"])
    with pytest.raises(ValueError, match=r"bench.h5ad: obs filter batch=1: obs has no column 'batch'"):
        pseudobulk.read_perturbseq(path, obs_filter=["batch=1"])
    with pytest.raises(ValueError, match=r"obs filter 'screenA': expected <obs column>=<value>"):
        pseudobulk.read_perturbseq(path, obs_filter=["screenA"])
    # Cells selected without their controls: no baseline to measure a change from.
    cells = small_screen.cells[small_screen.cells.obs["condition"] != "ctrl"].copy()
    write_perturbench(cells, tmp_path / "no_control.h5ad", screens=(("screenA", "K562"),))
    obs = ad.read_h5ad(tmp_path / "no_control.h5ad").obs
    with pytest.raises(ValueError, match="no_control.h5ad: cannot tell the layout"):
        pseudobulk.detect_layout(obs, path=tmp_path / "no_control.h5ad")
    with pytest.raises(ValueError, match=r"no_control.h5ad: no control cells \(obs\['condition'\] == 'control'\)"):
        pseudobulk.read_perturbench(tmp_path / "no_control.h5ad")


@pytest.mark.parametrize("conditions,layout", [
    (["ctrl", "A+ctrl", "A+B"], "gears"),
    (["control", "A", "A+B"], "perturbench"),
    (["non-targeting", "A", "A+B"], None),
    (["ctrl", "control", "A"], None),
])
def test_the_layout_is_told_by_the_control_label(conditions, layout):
    obs = pd.DataFrame({"condition": conditions, "perturbation": conditions})
    if layout is None:
        with pytest.raises(ValueError, match=r"screen.h5ad: cannot tell the layout: obs\['condition'\] labels control cells with"):
            pseudobulk.detect_layout(obs, path="screen.h5ad")
    else:
        assert pseudobulk.detect_layout(obs, path="screen.h5ad") == layout
    assert pseudobulk.detect_layout(obs[["perturbation"]], path="screen.h5ad") == "scperturb"
