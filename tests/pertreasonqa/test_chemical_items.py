"""The chemical modality's items: drug targets of the simulated compounds, outcome labels of the
simulated screen (section 2.2) and the compound split (B.1).

Every expected value is worked out by hand in the comments.
"""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from pertreasonqa_lib import chemical_items as pc
from pertreasonqa_lib.functional_splits import fold_of_items

from pertsci import op3_simulation as op3_sim


def test_compound_targets_from_the_simulation_record():
    simulation = {
        "compounds": pd.DataFrame({"sm_name": ["X", "Y", "Z"], "mechanism": ["m0", "m1", "m0"],
                                   "secondary_mechanism": ["", "m2", "m0"]}),
        "mechanisms": pd.DataFrame({"mechanism": ["m0", "m1", "m2"], "tfs": ["TF1|TF2", "TF3", "TF3|TF4"],
                                    "direction": [1.0, -1.0, 1.0]}),
    }
    t = pc.compound_targets(simulation)
    rows = {(r.drug, r.target): (r.sign, r.mechanisms) for r in t.itertuples()}
    # Y: TF3 is switched off by m1 and on by m2 -> unknown sign; TF4 on by m2
    assert rows == {("X", "TF1"): (1, "m0"), ("X", "TF2"): (1, "m0"), ("Y", "TF3"): (0, "m1;m2"),
                    ("Y", "TF4"): (1, "m2"), ("Z", "TF1"): (1, "m0"), ("Z", "TF2"): (1, "m0")}
    with pytest.raises(ValueError, match="unknown mechanism 'm9'"):
        pc.compound_targets({**simulation, "compounds": simulation["compounds"].assign(mechanism="m9")})


def test_chemical_splits_by_share_of_ood_targets():
    targets = pd.DataFrame({"drug": ["a", "a"] + ["b"] * 11, "target": ["g0", "g1"] + [f"g{i}" for i in range(1, 12)]})
    clusters = pd.Series({f"g{i}": (1 if i == 0 or i == 11 else 0) for i in range(12)})
    splits = pc.chemical_splits(targets, ["a", "b", "c"], clusters, ood_clusters=[1], seed=0)
    # a: 1 of 2 targets in OOD cluster 1 (50% > 10%) -> OOD; b: 1 of 11 (9.1%) -> ID; c has no target -> ID
    assert splits.loc["a", "distribution"] == "OOD" and splits.loc["a", "split"] == "test"
    assert splits.loc["b", "ood_target_share"] == pytest.approx(1 / 11) and splits.loc["b", "distribution"] == "ID"
    assert splits.loc["c", ["n_targets", "distribution"]].tolist() == [0, "ID"]
    with pytest.raises(ValueError, match="no functional cluster"):
        pc.chemical_splits(targets, ["a"], clusters.drop("g0"), [1])


def screen(seed: int = 0) -> ad.AnnData:
    """Two cell types, DMSO and compound K: K doubles G_up and halves G_down in both; G_flat unchanged;
    G_rare is detected in under 5% of cells. A subset of the genes with library sizes kept apart."""
    rng = np.random.default_rng(seed)
    rows, obs = [], []
    for cell in ("B cells", "T cells CD4+"):
        for comp, n in (("Dimethyl Sulfoxide", 300), ("K", 200), ("few", 5)):
            mu = np.array([20.0, 20.0, 20.0, 0.01])
            if comp == "K":
                mu = mu * np.array([2.0, 0.5, 1.0, 1.0])
            rows.append(rng.poisson(mu, size=(n, 4)))
            obs.append(pd.DataFrame({"cell_type": cell, "sm_name": comp, "total_counts": 10_000.0}, index=range(n)))
    obs = pd.concat(obs, ignore_index=True)
    obs.index = obs.index.astype(str)
    return ad.AnnData(X=sp.csr_matrix(np.vstack(rows)), obs=obs, var=pd.DataFrame(index=["G_up", "G_down", "G_flat", "G_rare"]))


def test_outcome_labels_wilcoxon_against_dmso_per_cell_type():
    items, summary = pc.outcome_labels(screen(), min_cells=10)
    got = items.set_index(["cell", "gene"])["label"].to_dict()
    assert got == {("B cells", "G_up"): "up", ("B cells", "G_down"): "down", ("B cells", "G_flat"): "unchanged",
                   ("T cells CD4+", "G_up"): "up", ("T cells CD4+", "G_down"): "down", ("T cells CD4+", "G_flat"): "unchanged"}
    assert set(items["perturbation"]) == {"K"} and set(items["perturbation_type"]) == {"chemical"}
    assert (items.loc[items["label"] != "unchanged", "pvalue_adj"] < 0.01).all()
    assert (items.loc[items["label"] == "unchanged", "pvalue"] > 0.1).all()
    assert summary[["n_genes_tested", "n_up", "n_down", "n_unchanged"]].values.tolist() == [[3, 1, 1, 1]] * 2
    # caps: the strongest changed gene only (G_up and G_down are both significant), every unchanged one (0: all)
    capped, _ = pc.outcome_labels(screen(), min_cells=10, max_changed=1, max_unchanged=0)
    assert len(capped) == 4 and (capped.groupby("cell")["label"].apply(lambda s: (s != "unchanged").sum()) == 1).all()
    assert (capped.groupby("cell")["label"].apply(lambda s: (s == "unchanged").sum()) == 1).all()


def test_fold_of_chemical_items_keeps_ood_cells_for_test_compounds():
    items = pd.DataFrame({"cell": ["B cells", "B cells", "T cells CD8+", "T cells CD8+", "NK cells"],
                          "perturbation": ["tr", "te", "tr", "ood", "ood"]})
    splits = pd.DataFrame({"distribution": ["ID", "ID", "OOD"], "split": ["train", "test", "test"]}, index=["tr", "te", "ood"])
    assert fold_of_items(items, splits, pc.CELLS).tolist() == [
        "train", "id_cell_id_pert", "unused", "ood_cell_ood_pert", "id_cell_ood_pert"]
    assert [c for c, v in pc.CELLS.items() if v["distribution"] == "OOD"] == ["T cells CD4+", "T cells CD8+", "T regulatory cells"]


def test_simulation_subset_keeps_the_draws_and_library_sizes():
    meta = op3_sim.synthetic_metadata(n_genes=120, n_compounds=6)
    kw = dict(n_compounds=6, n_test_compounds=2, n_donors=1, plates_per_donor=1, dmso_wells_per_plate=2, cells_per_well=8, seed=3)
    full = op3_sim.simulate_op3(meta, **kw)
    keep = list(full.var_names[::7])
    sub = op3_sim.simulate_op3(meta, keep_genes=keep, **kw)
    assert list(sub.var_names) == keep
    assert (sub.X != full[:, keep].X).nnz == 0
    assert np.array_equal(sub.obs["total_counts"].to_numpy(), np.asarray(full.X.sum(axis=1)).ravel())


def test_simulation_design_of_a_reduced_screen():
    design = pc.simulation_design(16, 1, 4, 40.0, 0)
    assert design == {"n_compounds": 16, "plates_per_donor": 1, "dmso_wells_per_plate": 4, "cells_per_well": 40.0,
                      "seed": 0, "n_test_compounds": 5}  # a third of the compounds are the simulator's test compounds
    assert pc.simulation_design(0, 2, 16, 180.0, 3)["n_compounds"] is None  # 0: the full-size design
    assert "n_test_compounds" not in pc.simulation_design(0, 2, 16, 180.0, 3)
    assert pc.simulation_design(2, 1, 4, 40.0, 0)["n_test_compounds"] == 1




def test_signed_rank_cannot_call_genes_with_three_donor_pairs():
    """Why the outcomes use the rank-sum test: three paired donors give a smallest p of 0.25."""
    from pertreasonqa_lib.chemical_items import min_signed_rank_pvalue
    from scipy.stats import wilcoxon

    assert min_signed_rank_pvalue(3) == 0.25
    assert min_signed_rank_pvalue(3) == pytest.approx(wilcoxon([1.0, 2.0, 3.0]).pvalue)  # all one sign, exact
    assert min_signed_rank_pvalue(8) == pytest.approx(wilcoxon(range(1, 9)).pvalue)
    with pytest.raises(ValueError):
        min_signed_rank_pvalue(0)
