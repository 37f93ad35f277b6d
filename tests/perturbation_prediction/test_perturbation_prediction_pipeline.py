"""The synthetic generator and the processing pipeline of perturbation_prediction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from project_paths import SHARED_DATA

from pertsci import op3_processing as pseudobulk_de
from pertsci import op3_simulation as op3_sim

HAS_SHARED = (SHARED_DATA / "op3" / "id_map.csv").is_file()
needs_shared = pytest.mark.skipif(not HAS_SHARED, reason=f"real OP3 metadata not found in {SHARED_DATA / 'op3'}")


@pytest.fixture(scope="module")
def small_sc():
    meta = op3_sim.synthetic_metadata(n_genes=300, n_compounds=12, n_test_compounds=4, seed=5)
    return op3_sim.simulate_op3(meta, n_donors=3, plates_per_donor=1, dmso_wells_per_plate=4, cells_per_well=80,
                                mean_library_size=4000, n_mechanisms=5, seed=5)


def test_simulation_structure(small_sc):
    sc = small_sc
    for col in pseudobulk_de.SC_REQUIRED_OBS + ["sm_lincs_id", "SMILES", "control"]:
        assert col in sc.obs.columns
    data = sc.X.data
    assert np.all(data == np.round(data)) and data.min() >= 0
    sim = sc.uns["simulation"]
    assert set(sim["compounds"]["sm_name"]) == set(sc.obs["sm_name"].astype(str)) - {op3_sim.CONTROL_COMPOUND}
    # Every compound's mechanism has recorded target genes in every cell type.
    mech_with_targets = set(sim["mechanism_targets"]["mechanism"])
    assert set(sim["compounds"]["mechanism"]) <= mech_with_targets
    assert set(sim["mechanism_targets"]["gene"]) <= set(sc.var_names)
    # Cells of test rows are exactly the test split; DMSO and positive controls are 'control'.
    test_pairs = set(zip(sim["test_rows"]["cell_type"], sim["test_rows"]["sm_name"]))
    obs = sc.obs.astype({"cell_type": str, "sm_name": str, "split": str})
    is_test = np.array([(c, s) in test_pairs for c, s in zip(obs["cell_type"], obs["sm_name"])])
    assert np.array_equal(is_test, obs["split"].eq("test").to_numpy())
    assert obs.loc[obs["sm_name"] == op3_sim.CONTROL_COMPOUND, "split"].eq("control").all()
    # Each donor has its own plate(s), and every plate has DMSO wells.
    assert (obs.groupby("plate_name", observed=True)["donor_id"].nunique() == 1).all()
    assert set(obs.loc[obs["sm_name"] == op3_sim.CONTROL_COMPOUND, "plate_name"]) == set(obs["plate_name"])


def test_simulation_is_deterministic():
    meta = op3_sim.synthetic_metadata(n_genes=80, n_compounds=6, n_test_compounds=2, seed=1)
    a = op3_sim.simulate_op3(meta, n_donors=2, plates_per_donor=1, dmso_wells_per_plate=2, cells_per_well=10, seed=9)
    b = op3_sim.simulate_op3(meta, n_donors=2, plates_per_donor=1, dmso_wells_per_plate=2, cells_per_well=10, seed=9)
    c = op3_sim.simulate_op3(meta, n_donors=2, plates_per_donor=1, dmso_wells_per_plate=2, cells_per_well=10, seed=10)
    assert (a.X != b.X).nnz == 0
    assert a.X.shape != c.X.shape or (a.X != c.X).nnz > 0


def test_pseudobulk_sums_cells(small_sc):
    pb = pseudobulk_de.pseudobulk(small_sc, min_cells=1)
    assert pb.X.sum() == pytest.approx(small_sc.X.sum())
    one = pb.obs.iloc[0]
    mask = ((small_sc.obs["plate_name"] == one["plate_name"]) & (small_sc.obs["well"] == one["well"])
            & (small_sc.obs["cell_type"] == one["cell_type"])).to_numpy()
    np.testing.assert_array_equal(pb.X[0], np.asarray(small_sc.X[mask].sum(axis=0)).ravel())
    assert pb.obs["n_cells"].iloc[0] == mask.sum()
    assert {"sm_name", "donor_id", "split"} <= set(pb.obs.columns)  # one value per sample: carried over
    strict = pseudobulk_de.pseudobulk(small_sc, min_cells=10)
    assert strict.n_obs < pb.n_obs and (strict.obs["n_cells"] >= 10).all()


def test_process_sc_counts_outputs(small_sc):
    de_train, de_test, id_map = pseudobulk_de.process_sc_counts(small_sc, min_cells=5, dataset_uns={"dataset_id": "x"})
    sim = small_sc.uns["simulation"]
    test_pairs = set(zip(sim["test_rows"]["cell_type"], sim["test_rows"]["sm_name"]))
    train_pairs = set(zip(de_train.obs["cell_type"], de_train.obs["sm_name"]))
    assert not (train_pairs & test_pairs)  # methods never see a test row
    assert op3_sim.CONTROL_COMPOUND not in set(de_train.obs["sm_name"])
    assert list(zip(de_test.obs["cell_type"], de_test.obs["sm_name"])) == list(zip(id_map["cell_type"], id_map["sm_name"]))
    assert list(id_map["id"]) == list(range(len(id_map)))
    assert list(de_train.var_names) == list(de_test.var_names)
    assert de_train.uns["dataset_id"] == "x"
    for de in (de_train, de_test):
        p, lfc = de.layers["P.Value"], de.layers["logFC"]
        np.testing.assert_allclose(de.layers["sign_log10_pval"], np.sign(lfc) * -np.log10(p))
        np.testing.assert_allclose(de.layers["clipped_sign_log10_pval"], np.sign(lfc) * -np.log10(np.maximum(p, 1e-4)))
        assert np.abs(de.layers["clipped_sign_log10_pval"]).max() <= 4
        assert np.all(de.layers["adj.P.Value"] >= p - 1e-15)
        np.testing.assert_array_equal(de.layers["is_de"], p < 0.05)
        np.testing.assert_array_equal(de.layers["is_de_adj"], de.layers["adj.P.Value"] < 0.05)
    # The planted effects come through: the strong positive controls change many more genes than
    # the nearly inert compounds.
    comp = sim["compounds"].set_index("sm_name")
    strength = np.abs(de_train.layers["clipped_sign_log10_pval"]).mean(axis=1)
    potency = comp.loc[de_train.obs["sm_name"].astype(str), "potency"].to_numpy()
    assert strength[potency > 2].mean() > 1.5 * strength[potency < 0.3].mean()


def test_process_rejects_bad_counts(small_sc):
    bad = small_sc.copy()
    bad.X = bad.X.astype(float) * 0.5
    with pytest.raises(ValueError, match="non-negative integers"):
        pseudobulk_de.process_sc_counts(bad, where="bad.h5ad")
    missing = small_sc.copy()
    del missing.obs["plate_name"]
    with pytest.raises(ValueError, match="bad.h5ad: obs lacks"):
        pseudobulk_de.process_sc_counts(missing, where="bad.h5ad")


@needs_shared
def test_real_metadata():
    meta = op3_sim.load_op3_metadata()
    assert len(meta.genes) == 18211 and meta.genes[0] == "A1BG"
    assert len(meta.compounds) == 146 and meta.compounds["control"].sum() == 2
    assert len(meta.test_rows) == 255
    assert set(meta.grn) == set(op3_sim.CELL_TYPES)
    assert meta.baseline.notna().all(axis=1).sum() > 5000  # HPA profiles of mapped genes


@needs_shared
def test_full_design_gives_the_real_test_rows():
    """With all compounds, the simulated screen has exactly the 255 real test rows, in id_map order."""
    meta = op3_sim.load_op3_metadata()
    sc = op3_sim.simulate_op3(meta, n_genes=120, cells_per_well=40, mean_library_size=3000, seed=0)
    assert sc.obs["sm_name"].nunique() == 147  # 146 compounds and DMSO
    assert sc.obs["plate_name"].nunique() == 6 and sc.obs["donor_id"].nunique() == 3
    pb = pseudobulk_de.pseudobulk(sc, min_cells=1)
    rows = pseudobulk_de._row_table(pb, ["test"], op3_sim.CONTROL_COMPOUND)
    order = {(c, s): i for i, (c, s) in enumerate(zip(meta.test_rows["cell_type"], meta.test_rows["sm_name"]))}
    rows = rows.iloc[np.argsort([order[(c, s)] for c, s in zip(rows["cell_type"], rows["sm_name"])])]
    real = pd.read_csv(SHARED_DATA / "op3" / "id_map.csv")
    assert list(zip(rows["cell_type"], rows["sm_name"])) == list(zip(real["cell_type"], real["sm_name"]))
    assert set(sc.var_names) <= set(meta.genes)


def test_streaming_pseudobulk_equals_pseudobulk_of_cells():
    """simulate_op3_pseudobulk draws the same cells as simulate_op3, summed well by well."""
    meta = op3_sim.synthetic_metadata(n_genes=90, n_compounds=7, n_test_compounds=2, seed=2)
    kw = dict(n_donors=2, plates_per_donor=1, dmso_wells_per_plate=2, cells_per_well=25, seed=6)
    pb_cells = pseudobulk_de.pseudobulk(op3_sim.simulate_op3(meta, **kw), min_cells=4)
    pb_stream = op3_sim.simulate_op3_pseudobulk(meta, min_cells=4, **kw)
    assert list(pb_cells.obs_names) == list(pb_stream.obs_names)
    np.testing.assert_array_equal(np.asarray(pb_cells.X), np.asarray(pb_stream.X))
    cols = sorted(pb_cells.obs.columns)
    assert cols == sorted(pb_stream.obs.columns)
    assert (pb_cells.obs[cols].astype(str).to_numpy() == pb_stream.obs[cols].astype(str).to_numpy()).all()
    assert "simulation" in pb_stream.uns
