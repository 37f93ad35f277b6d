"""pertsci.op3_simulation: the simulated OP3 screen, its design from the shared data, and its streaming pseudobulk."""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest
from project_paths import SHARED_DATA

from pertsci import op3_processing, op3_simulation

HAS_SHARED = (SHARED_DATA / "op3" / "id_map.csv").is_file()
needs_shared = pytest.mark.skipif(not HAS_SHARED, reason=f"real OP3 metadata not found in {SHARED_DATA / 'op3'}")

DESIGN = dict(n_genes=80, n_compounds=6, n_test_compounds=2, n_donors=3, plates_per_donor=1, dmso_wells=2,
              cells_per_well=10.0, mean_library_size=6000.0, seed=0)


@pytest.fixture(scope="module")
def small_sc():
    meta = op3_simulation.synthetic_metadata(n_genes=300, n_compounds=12, n_test_compounds=4, seed=5)
    return op3_simulation.simulate_op3(meta, n_donors=3, plates_per_donor=1, dmso_wells_per_plate=4, cells_per_well=80,
                                       mean_library_size=4000, n_mechanisms=5, seed=5)


def test_simulation_structure(small_sc):
    sc = small_sc
    for col in op3_processing.SC_REQUIRED_OBS + ["sm_lincs_id", "SMILES", "control"]:
        assert col in sc.obs.columns
    data = sc.X.data
    assert np.all(data == np.round(data)) and data.min() >= 0
    sim = sc.uns["simulation"]
    assert set(sim["compounds"]["sm_name"]) == set(sc.obs["sm_name"].astype(str)) - {op3_simulation.CONTROL_COMPOUND}
    # Every compound's mechanism has recorded target genes in every cell type.
    mech_with_targets = set(sim["mechanism_targets"]["mechanism"])
    assert set(sim["compounds"]["mechanism"]) <= mech_with_targets
    assert set(sim["mechanism_targets"]["gene"]) <= set(sc.var_names)
    # Cells of test rows are exactly the test split; DMSO and positive controls are 'control'.
    test_pairs = set(zip(sim["test_rows"]["cell_type"], sim["test_rows"]["sm_name"]))
    obs = sc.obs.astype({"cell_type": str, "sm_name": str, "split": str})
    is_test = np.array([(c, s) in test_pairs for c, s in zip(obs["cell_type"], obs["sm_name"])])
    assert np.array_equal(is_test, obs["split"].eq("test").to_numpy())
    assert obs.loc[obs["sm_name"] == op3_simulation.CONTROL_COMPOUND, "split"].eq("control").all()
    # Each donor has its own plate(s), and every plate has DMSO wells.
    assert (obs.groupby("plate_name", observed=True)["donor_id"].nunique() == 1).all()
    assert set(obs.loc[obs["sm_name"] == op3_simulation.CONTROL_COMPOUND, "plate_name"]) == set(obs["plate_name"])


def test_simulation_is_deterministic():
    meta = op3_simulation.synthetic_metadata(n_genes=80, n_compounds=6, n_test_compounds=2, seed=1)
    a = op3_simulation.simulate_op3(meta, n_donors=2, plates_per_donor=1, dmso_wells_per_plate=2, cells_per_well=10, seed=9)
    b = op3_simulation.simulate_op3(meta, n_donors=2, plates_per_donor=1, dmso_wells_per_plate=2, cells_per_well=10, seed=9)
    c = op3_simulation.simulate_op3(meta, n_donors=2, plates_per_donor=1, dmso_wells_per_plate=2, cells_per_well=10, seed=10)
    assert (a.X != b.X).nnz == 0
    assert a.X.shape != c.X.shape or (a.X != c.X).nnz > 0


def test_keep_genes_keeps_the_draws_of_the_whole_simulation():
    meta = op3_simulation.synthetic_metadata(n_genes=80, n_compounds=6, n_test_compounds=2, seed=1)
    kw = dict(n_donors=2, plates_per_donor=1, dmso_wells_per_plate=2, cells_per_well=10, seed=9)
    full = op3_simulation.simulate_op3(meta, **kw)
    keep = list(full.var_names[::7])
    some = op3_simulation.simulate_op3(meta, keep_genes=keep, **kw)
    assert list(some.var_names) == keep
    assert (some.X != full[:, keep].X).nnz == 0
    np.testing.assert_array_equal(some.obs["total_counts"], np.asarray(full.X.sum(axis=1)).ravel())


def test_simulation_design_without_data_uses_made_up_names(tmp_path):
    """No folder, or one without the OP3 files: the design keeps its shape with made-up names."""
    for data_dir in (None, tmp_path):
        meta, params = op3_simulation.simulation_design(data_dir, **DESIGN)
        assert meta.source == "synthetic names" and meta.genes[0] == "GENE00000"
        assert len(meta.genes) == 200 and len(meta.compounds) == 12  # at least 200 genes and 12 compounds to draw from
    assert params == dict(n_genes=80, n_compounds=6, n_test_compounds=2, n_donors=3, plates_per_donor=1,
                          dmso_wells_per_plate=2, cells_per_well=10.0, mean_library_size=6000.0, seed=0)
    sc = op3_simulation.simulate_op3(meta, **params)
    assert sc.n_vars == 80 and sc.var_names[0].startswith("GENE")
    assert set(sc.obs["sm_name"].astype(str)) <= set(meta.compounds["sm_name"]) | {op3_simulation.CONTROL_COMPOUND}


def test_simulation_design_zero_means_all():
    _, params = op3_simulation.simulation_design(None, **{**DESIGN, "n_genes": 0, "n_compounds": 0, "n_test_compounds": 0})
    assert params["n_genes"] is None and params["n_compounds"] is None and params["n_test_compounds"] is None


@needs_shared
def test_simulation_design_reads_the_real_design():
    meta, params = op3_simulation.simulation_design(SHARED_DATA, **DESIGN)
    assert meta.source == "OP3 metadata files (op3/ of the shared data)" and len(meta.genes) == 18211
    sc = op3_simulation.simulate_op3(meta, **params)
    assert set(sc.obs["sm_name"].astype(str)) <= set(meta.compounds["sm_name"]) | {op3_simulation.CONTROL_COMPOUND}


@needs_shared
def test_real_metadata():
    meta = op3_simulation.load_op3_metadata(SHARED_DATA)
    assert len(meta.genes) == 18211 and meta.genes[0] == "A1BG"
    assert len(meta.compounds) == 146 and meta.compounds["control"].sum() == 2
    assert len(meta.test_rows) == 255
    assert set(meta.grn) == set(op3_simulation.CELL_TYPES)
    assert meta.baseline.notna().all(axis=1).sum() > 5000  # HPA profiles of mapped genes


def test_missing_metadata_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"op3/peptideInfo_smiles.csv: OP3 metadata file not found"):
        op3_simulation.load_op3_metadata(tmp_path)


@needs_shared
def test_full_design_gives_the_real_test_rows():
    """With all compounds, the simulated screen has exactly the 255 real test rows, in id_map order."""
    meta = op3_simulation.load_op3_metadata(SHARED_DATA)
    sc = op3_simulation.simulate_op3(meta, n_genes=120, cells_per_well=40, mean_library_size=3000, seed=0)
    assert sc.obs["sm_name"].nunique() == 147  # 146 compounds and DMSO
    assert sc.obs["plate_name"].nunique() == 6 and sc.obs["donor_id"].nunique() == 3
    pb = op3_processing.pseudobulk(sc, min_cells=1)
    rows = op3_processing.row_table(pb, ["test"], op3_simulation.CONTROL_COMPOUND)
    order = {(c, s): i for i, (c, s) in enumerate(zip(meta.test_rows["cell_type"], meta.test_rows["sm_name"]))}
    rows = rows.iloc[np.argsort([order[(c, s)] for c, s in zip(rows["cell_type"], rows["sm_name"])])]
    real = pd.read_csv(SHARED_DATA / "op3" / "id_map.csv")
    assert list(zip(rows["cell_type"], rows["sm_name"])) == list(zip(real["cell_type"], real["sm_name"]))
    assert set(sc.var_names) <= set(meta.genes)


def test_streaming_pseudobulk_equals_pseudobulk_of_cells():
    """simulate_op3_pseudobulk draws the same cells as simulate_op3, summed well by well."""
    meta = op3_simulation.synthetic_metadata(n_genes=90, n_compounds=7, n_test_compounds=2, seed=2)
    kw = dict(n_donors=2, plates_per_donor=1, dmso_wells_per_plate=2, cells_per_well=25, seed=6)
    pb_cells = op3_processing.pseudobulk(op3_simulation.simulate_op3(meta, **kw), min_cells=4)
    pb_stream = op3_simulation.simulate_op3_pseudobulk(meta, min_cells=4, **kw)
    assert list(pb_cells.obs_names) == list(pb_stream.obs_names)
    np.testing.assert_array_equal(np.asarray(pb_cells.X), np.asarray(pb_stream.X))
    cols = sorted(pb_cells.obs.columns)
    assert cols == sorted(pb_stream.obs.columns)
    assert (pb_cells.obs[cols].astype(str).to_numpy() == pb_stream.obs[cols].astype(str).to_numpy()).all()
    assert "simulation" in pb_stream.uns
    with pytest.raises(TypeError, match="unknown arguments"):
        op3_simulation.simulate_op3_pseudobulk(meta, dmso_wells=2)


def test_t_cells_are_grouped_as_in_the_final_annotation(small_sc):
    """obs["cell_type"] groups the three T-cell populations as "T cells"; cell_type_orig keeps them."""
    obs = small_sc.obs.astype({"cell_type": str, "cell_type_orig": str})
    assert set(obs["cell_type"]) == {"B cells", "Myeloid cells", "NK cells", "T cells"}
    assert set(obs["cell_type_orig"]) == set(op3_simulation.CELL_TYPES)
    t_cells = obs["cell_type_orig"].str.startswith("T ")
    assert obs.loc[t_cells, "cell_type"].eq("T cells").all()
    assert (obs.loc[~t_cells, "cell_type"] == obs.loc[~t_cells, "cell_type_orig"]).all()
    annotation = small_sc.uns["simulation"]["annotation"]
    assert dict(zip(annotation["cell_type_orig"], annotation["cell_type"])) == op3_simulation.GROUPED_ANNOTATION
    assert op3_simulation.ANNOTATED_CELL_TYPES == ["B cells", "Myeloid cells", "NK cells", "T cells"]


def test_ungrouped_annotation_is_the_same_draws():
    meta = op3_simulation.synthetic_metadata(n_genes=80, n_compounds=6, n_test_compounds=2, seed=1)
    kw = dict(n_donors=2, plates_per_donor=1, dmso_wells_per_plate=2, cells_per_well=20, seed=4)
    grouped = op3_simulation.simulate_op3(meta, **kw)
    six = op3_simulation.simulate_op3(meta, group_t_cells=False, **kw)
    assert (grouped.X != six.X).nnz == 0
    assert list(six.obs["cell_type"].astype(str)) == list(grouped.obs["cell_type_orig"].astype(str))
    assert set(six.obs["cell_type"].astype(str)) == set(op3_simulation.CELL_TYPES)


def test_grouped_pseudobulk_sums_the_t_cell_populations():
    """One pseudobulk sample per (plate, well) holds all T cells, as the OP3 processing groups them."""
    meta = op3_simulation.synthetic_metadata(n_genes=90, n_compounds=7, n_test_compounds=2, seed=2)
    kw = dict(n_donors=2, plates_per_donor=1, dmso_wells_per_plate=2, cells_per_well=60, seed=6)
    grouped = op3_simulation.simulate_op3_pseudobulk(meta, min_cells=0, **kw)
    six = op3_simulation.simulate_op3_pseudobulk(meta, min_cells=0, group_t_cells=False, **kw)
    assert set(grouped.obs["cell_type"]) == set(op3_simulation.ANNOTATED_CELL_TYPES)
    t_six = six[six.obs["cell_type"].astype(str).str.startswith("T ").to_numpy()]
    t_grouped = grouped[grouped.obs["cell_type"].astype(str).eq("T cells").to_numpy()]
    assert t_grouped.obs["n_cells"].sum() == t_six.obs["n_cells"].sum()
    np.testing.assert_array_equal(np.asarray(t_grouped.X).sum(axis=0), np.asarray(t_six.X).sum(axis=0))


def test_streaming_pseudobulk_half_split():
    """With half_seed, each sample also sums ceil(n/2) of its cells; the full counts do not change."""
    meta = op3_simulation.synthetic_metadata(n_genes=90, n_compounds=7, n_test_compounds=2, seed=2)
    kw = dict(n_donors=2, plates_per_donor=1, dmso_wells_per_plate=2, cells_per_well=25, seed=6)
    plain = op3_simulation.simulate_op3_pseudobulk(meta, min_cells=4, **kw)
    split = op3_simulation.simulate_op3_pseudobulk(meta, min_cells=4, half_seed=11, **kw)
    np.testing.assert_array_equal(np.asarray(plain.X), np.asarray(split.X))
    half = split.layers["counts_half"]
    assert np.all(half <= np.asarray(split.X)) and np.all(half >= 0)
    np.testing.assert_array_equal(split.obs["n_cells_half"], (split.obs["n_cells"] + 1) // 2)
    # A real split: some but not all of the counts of a sample with several cells.
    several = split.obs["n_cells"].to_numpy() > 3
    totals, half_totals = np.asarray(split.X).sum(axis=1), half.sum(axis=1)
    assert np.all(half_totals[several] < totals[several]) and np.all(half_totals[several] > 0)


def test_well_expressed_genes_with_equal_means_are_drawn_in_name_order():
    # HPA's nTPM has one decimal: many genes share a mean. The genes the simulation keeps must not
    # depend on the baseline's row order (nor on the CPU's sort of equal values).
    genes = [f"G{i:03d}" for i in range(60)]
    means = np.repeat([5.0, 2.0, 1.0], 20)
    kept = set()
    for perm in (np.arange(60), np.arange(60)[::-1], np.random.default_rng(4).permutation(60)):
        meta = types.SimpleNamespace(genes=genes, grn={},
                                     baseline=pd.DataFrame({"c1": means[perm], "c2": means[perm]}, index=np.array(genes)[perm]))
        kept.add(tuple(op3_simulation._choose_genes(meta, 12, [], np.random.default_rng(0))))
    assert len(kept) == 1
