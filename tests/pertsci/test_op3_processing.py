"""pertsci.op3_processing: pseudobulk, and the task files it derives from single-cell counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pertsci import op3_processing, op3_simulation


@pytest.fixture(scope="module")
def small_sc():
    meta = op3_simulation.synthetic_metadata(n_genes=300, n_compounds=12, n_test_compounds=4, seed=5)
    return op3_simulation.simulate_op3(meta, n_donors=3, plates_per_donor=1, dmso_wells_per_plate=4, cells_per_well=80,
                                       mean_library_size=4000, n_mechanisms=5, seed=5)


def test_pseudobulk_sums_cells(small_sc):
    pb = op3_processing.pseudobulk(small_sc, min_cells=1)
    assert pb.X.sum() == pytest.approx(small_sc.X.sum())
    one = pb.obs.iloc[0]
    mask = ((small_sc.obs["plate_name"] == one["plate_name"]) & (small_sc.obs["well"] == one["well"])
            & (small_sc.obs["cell_type"] == one["cell_type"])).to_numpy()
    np.testing.assert_array_equal(pb.X[0], np.asarray(small_sc.X[mask].sum(axis=0)).ravel())
    assert pb.obs["n_cells"].iloc[0] == mask.sum()
    assert {"sm_name", "donor_id", "split"} <= set(pb.obs.columns)  # one value per sample: carried over
    strict = op3_processing.pseudobulk(small_sc, min_cells=10)
    assert strict.n_obs < pb.n_obs and (strict.obs["n_cells"] >= 10).all()


def test_design_and_contrasts(small_sc):
    """~0 + cell_type:compound + plate, one +1/-1 contrast per row against DMSO of its cell type."""
    pb = op3_processing.pseudobulk(small_sc, min_cells=5)
    rows = op3_processing.estimable_rows(pb, op3_processing.row_table(pb, ["train"], op3_processing.CONTROL_COMPOUND))
    design, contrasts = op3_processing.design_and_contrasts(pb, rows)
    n_groups = sum(name.startswith("group") for name in design.columns)
    n_plates = pb.obs["plate_name"].nunique()
    assert design.shape == (pb.n_obs, n_groups + n_plates - 1)
    assert contrasts.shape == (design.shape[1], len(rows))
    dense = contrasts.toarray()
    np.testing.assert_array_equal(np.sort(dense, axis=0)[[0, -1]], np.tile([[-1.0], [1.0]], (1, len(rows))))
    row = rows.iloc[0]
    plus, minus = design.columns[dense[:, 0] == 1][0], design.columns[dense[:, 0] == -1][0]
    assert plus == f"group{row['cell_type']}\t{row['sm_name']}"
    assert minus == f"group{row['cell_type']}\t{op3_processing.CONTROL_COMPOUND}"


def test_process_sc_counts_outputs(small_sc):
    de_train, de_test, id_map = op3_processing.process_sc_counts(small_sc, min_cells=5, dataset_uns={"dataset_id": "x"})
    sim = small_sc.uns["simulation"]
    test_pairs = set(zip(sim["test_rows"]["cell_type"], sim["test_rows"]["sm_name"]))
    train_pairs = set(zip(de_train.obs["cell_type"], de_train.obs["sm_name"]))
    assert not (train_pairs & test_pairs)  # methods never see a test row
    assert op3_simulation.CONTROL_COMPOUND not in set(de_train.obs["sm_name"])
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
        op3_processing.process_sc_counts(bad, where="bad.h5ad")
    missing = small_sc.copy()
    del missing.obs["plate_name"]
    with pytest.raises(ValueError, match="bad.h5ad: obs lacks"):
        op3_processing.process_sc_counts(missing, where="bad.h5ad")


def test_half_of_cells_takes_half_of_every_group():
    codes = np.repeat(np.arange(5), [1, 2, 3, 10, 7])
    rng = np.random.default_rng(0)
    mask = op3_processing.half_of_cells(codes, rng)
    np.testing.assert_array_equal(np.bincount(codes[mask], minlength=5), [1, 1, 2, 5, 4])
    # Random within a group: another draw picks other cells of the group of 10.
    other = op3_processing.half_of_cells(codes, rng)
    assert not np.array_equal(mask[codes == 3], other[codes == 3])
    assert op3_processing.half_of_cells(np.array([], dtype=int), rng).shape == (0,)


def test_pseudobulk_with_a_half_mask(small_sc):
    codes = pd.factorize(pd.MultiIndex.from_frame(small_sc.obs[["plate_name", "well", "cell_type"]].astype(str)))[0]
    half = op3_processing.half_of_cells(codes, np.random.default_rng(1))
    pb = op3_processing.pseudobulk(small_sc, min_cells=5, half=half)
    plain = op3_processing.pseudobulk(small_sc, min_cells=5)
    np.testing.assert_array_equal(pb.X, plain.X)
    one = pb.obs.iloc[0]
    mask = ((small_sc.obs["plate_name"] == one["plate_name"]) & (small_sc.obs["well"] == one["well"])
            & (small_sc.obs["cell_type"] == one["cell_type"])).to_numpy()
    np.testing.assert_array_equal(pb.layers["counts_half"][0], np.asarray(small_sc.X[mask & half].sum(axis=0)).ravel())
    assert pb.obs["n_cells_half"].iloc[0] == (mask & half).sum() == (mask.sum() + 1) // 2
    with pytest.raises(ValueError, match="half-cell mask has shape"):
        op3_processing.pseudobulk(small_sc, half=half[:-1])


def test_half_cell_de_matches_de_test_rows_and_tracks_it(small_sc):
    """The ceiling: the test rows' DE from half the cells, same rows and genes, close to de_test."""
    _, de_test, id_map = op3_processing.process_sc_counts(small_sc, min_cells=5, dataset_uns={"dataset_id": "x"})
    half = op3_processing.half_cell_de_from_cells(small_sc, de_test, seed=0, min_cells=5)
    assert list(half.obs_names) == list(de_test.obs_names) and list(half.var_names) == list(de_test.var_names)
    assert list(half.obs["cell_type"]) == list(id_map["cell_type"]) and half.uns["dataset_id"] == "x"
    truth, ceiling = de_test.layers["clipped_sign_log10_pval"], half.layers["clipped_sign_log10_pval"]
    assert not np.allclose(truth, ceiling)  # other counts, other statistics
    assert np.corrcoef(truth.ravel(), ceiling.ravel())[0, 1] > 0.6
    # Closer to the truth than predicting no effect at all.
    assert np.sqrt(((truth - ceiling) ** 2).mean(axis=1)).mean() < np.sqrt((truth**2).mean(axis=1)).mean()
    pb = op3_processing.pseudobulk(small_sc, min_cells=5)
    with pytest.raises(ValueError, match="no half-cell counts"):
        op3_processing.half_cell_de(pb, de_test, where="sc.h5ad")
