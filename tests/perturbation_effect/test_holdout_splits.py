"""GEARS simulation and LOGO splits and the task's files (perturbation_effect_lib.holdout_splits)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from perturbation_effect_lib import holdout_splits as splits
from perturbation_effect_lib import pseudobulk, xlsx_tables
from project_paths import SHARED_DATA

needs_data = pytest.mark.skipif(not (SHARED_DATA / "knowledge_graphs").is_dir(),
                                reason=f"shared data not found at {SHARED_DATA} (set OPENPERT_SHARED_DATA)")
PUBLISHED = SHARED_DATA / "published" / "ahlmann_eltze_2025"
needs_published = pytest.mark.skipif(not (PUBLISHED / "suppl-dataset_overview.xlsx").is_file(),
                                     reason=f"the paper's supplementary tables are not at {PUBLISHED}")


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


def test_simulation_split_draws_as_gears_does():
    """GEARS seeds NumPy's legacy generator, draws the seen genes (sorted), then seeds again for the combinations."""
    genes = [f"G{i:02d}" for i in range(30)]
    combos = [f"G{i:02d}+G{j:02d}" for i in range(0, 30, 3) for j in range(i + 1, 30, 7)]
    perts = list(reversed(genes)) + combos
    for seed in (1, 2, 7):
        split = splits.simulation_split(perts, seed=seed, train_gene_set_size=0.6, combo_seen2_train_frac=0.5)
        seen = set(np.random.RandomState(seed).choice(np.array(sorted(genes)), 18, replace=False).tolist())
        assert {g for g in genes if split.loc[g, "split"] == "train"} == seen
        both_seen = sorted(c for c in combos if set(c.split("+")) <= seen)
        assert len(both_seen) >= 4
        trained = set(np.random.RandomState(seed).choice(np.array(both_seen), len(both_seen) // 2, replace=False).tolist())
        assert {c for c in combos if split.loc[c, "split"] == "train"} == trained
        assert (split.loc[sorted(set(both_seen) - trained), "subgroup"] == "combo_seen2").all()


def test_simulation_split_refuses_a_perturbation_listed_twice():
    with pytest.raises(ValueError, match="listed twice"):
        splits.simulation_split(["A", "B", "C", "A"])


def test_double_split_trains_on_singles_and_half_of_the_combinations():
    singles = [f"G{i:02d}" for i in range(12)]
    combos = [f"G{i:02d}+G{j:02d}" for i in range(12) for j in range(i + 1, 12) if (i + j) % 3 == 0][:22]
    split = splits.double_split(singles + combos, seed=3)
    assert (split.loc[singles, "split"] == "train").all()
    counts = split.loc[combos, "split"].value_counts()
    assert counts["train"] == 11 and counts["test"] == 5 and counts["validation"] == 6
    assert (split.loc[split["split"] != "train", "subgroup"] == "combo_seen2").all()
    # The draws: half of the sorted combinations, then half of the sorted rest, from one generator seeded once.
    rng = np.random.RandomState(3)
    trained = set(rng.choice(np.array(sorted(combos)), 11, replace=False).tolist())
    rest = sorted(set(combos) - trained)
    tested = set(rng.choice(np.array(rest), 5, replace=False).tolist())
    assert set(split.index[split["split"] == "test"]) == tested
    assert split.equals(splits.double_split(list(reversed(singles + combos)), seed=3).loc[split.index])
    with pytest.raises(ValueError, match="at least 4 combinations"):
        splits.double_split(singles + combos[:3])


@needs_published
def test_splits_hold_out_what_the_paper_held_out():
    """Seed for seed, the perturbations the paper scored as test and val (its supplementary tables).

    The perturbations of each screen are those of its dataset overview (after GEARS's filter of
    genes outside its perturbation graph); the held-out labels those of its figures' source data.
    """
    overview = xlsx_tables.read_sheet(PUBLISHED / "suppl-dataset_overview.xlsx", "Panel B")
    # Named as in the paper's files: the scFoundation release of Norman et al.'s screen, which the
    # paper split, writes some combinations unsorted ("CEBPE+CEBPB"), and the draw sorts names as written.
    universe = {name: [splits_key(p) for p in group["pert"].unique() if p != "ctrl"] for name, group in overview.groupby("dataset")}
    checked = 0
    for table, setting, seeds in (("single_perturbation_prediction.xlsx", "simulation", (1, 2)),
                                  ("perturbation_prediction.xlsx", "double", (1, 2, 3, 4, 5))):
        scored = xlsx_tables.read_sheet(PUBLISHED / table, "Panel A")
        for (name, seed), group in scored.groupby(["dataset_name", "seed"]):
            assert int(seed) in seeds
            if setting == "simulation":
                split = splits.simulation_split(universe[name], seed=int(seed), val_gene_set_size=0.9)
            else:
                split = splits.double_split(universe[name], seed=int(seed))
            theirs = group.drop_duplicates("perturbation").set_index("perturbation")["train"]
            ours = split.loc[[splits_key(p) for p in theirs.index], "split"].replace({"validation": "val"})
            assert ours.tolist() == theirs.tolist(), (name, seed)
            # Everything held out is in the table, up to perturbations a method of the paper failed on.
            assert len(theirs) <= int((split["split"] != "train").sum())
            checked += len(theirs)
    assert checked > 1000


def splits_key(condition: str) -> str:
    """A GEARS condition without its ``ctrl`` (``"A+ctrl"`` -> ``"A"``), targets in the order written."""
    return "+".join(pseudobulk.parse_condition(condition))


def test_validation_carve_out_is_a_second_simulation_split_of_the_training_set():
    """GEARS splits the training perturbations again (0.9, 0.9, same seed); what that holds out validates."""
    genes = [f"G{i:02d}" for i in range(60)]
    combos = [f"G{i:02d}+G{i + 1:02d}" for i in range(0, 40, 2)]
    perts = genes + combos
    plain = splits.simulation_split(perts, seed=3)
    split = splits.simulation_split(perts, seed=3, val_gene_set_size=0.9)
    assert (split.loc[plain["split"] == "test"] == plain.loc[plain["split"] == "test"]).all().all()  # test untouched
    first_train = list(plain.index[plain["split"] == "train"])
    second = splits.simulation_split(first_train, train_gene_set_size=0.9, combo_seen2_train_frac=0.9, seed=3)
    held = second.index[second["split"] == "test"]
    assert len(held) > 0
    assert (split.loc[held, "split"] == "validation").all()
    assert split.loc[held, "subgroup"].tolist() == second.loc[held, "subgroup"].tolist()
    assert set(split.index[split["split"] == "train"]) == set(second.index[second["split"] == "train"])


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
    # The reference of the perturbation-specific metrics is the training mean, validation rows excluded.
    np.testing.assert_allclose(solution.var["training_mean"], np.asarray(train.X).mean(axis=0), rtol=0, atol=1e-12)
    assert "training_mean" not in train.var and "training_mean" not in test.var
    assert train.uns["lsft_fraction"] == 0.05 and train.uns["split"] == "simulation"
    # The validation carve-out is scored with the test set and said to be so.
    assert set(test.obs["holdout_set"]) == {"test", "validation"} and "holdout_set" not in train.obs
    assert train.uns["n_test"] + train.uns["n_validation"] == test.n_obs
    assert (solution.obs["holdout_set"] == test.obs["holdout_set"]).all()
    half = pseudobulk.half_pseudobulk(small_screen.cells, profiles, seed=0)
    _, _, with_half = splits.split_profiles(profiles, control, uns={"dataset_id": "x"}, half_profiles=half)
    np.testing.assert_array_equal(with_half.layers["expression_half"], half[0][profiles.obs_names.get_indexer(with_half.obs_names)])
    none = splits.split_profiles(profiles, control, val_gene_set_size=0.0, uns={"dataset_id": "x"})[1]
    assert (none.obs["holdout_set"] == "test").all()
    logo_train, logo_test, _ = splits.split_profiles(profiles, control, split="logo", logo_source="functional_class")
    held = logo_train.uns["heldout_class"]
    assert held == splits.choose_logo_class(profiles.obs)
    assert (logo_test.obs["functional_class"].str.contains(held, regex=False)).all()
    assert not logo_train.obs["functional_class"].eq(held).any()


@needs_data
def test_class_genes_from_real_annotation():
    tfs = splits.class_genes("tf", "", data_dir=SHARED_DATA)
    assert len(tfs) > 1500 and "KLF1" in tfs and "GATA1" in tfs
    translation = splits.class_genes("go_bp", "GO:0006412", data_dir=SHARED_DATA)
    assert "RPL3" in translation
    assert splits.class_genes("go_bp", "translation (GO:0006412)", data_dir=SHARED_DATA) == translation
    with pytest.raises(KeyError):
        splits.class_genes("go_bp", "GO:9999999", data_dir=SHARED_DATA)
    classes = splits.annotate_functional_class(["KLF1", "RPL3", "GATA1+RPL3"], "tf", data_dir=SHARED_DATA)
    assert classes == ["transcription factor", "other", "other + transcription factor"]


def test_annotation_classes_need_the_shared_data_folder(tmp_path):
    with pytest.raises(ValueError, match="needs the shared data folder"):
        splits.class_genes("go_bp", "GO:0006412")
    with pytest.raises(ValueError, match="needs the shared data folder"):
        splits.tf_genes(None)
    with pytest.raises(FileNotFoundError, match="human_TF_names_lambert2018.txt: transcription-factor list not found"):
        splits.tf_genes(tmp_path)
    # A class read from the perturbations' own metadata needs no shared data.
    obs = pd.DataFrame({"functional_class": ["p1", "p1", "p2"], "n_targets": [1, 2, 1], "target_genes": ["B", "A+B", "C"]},
                       index=["B", "A+B", "C"])
    assert splits.class_genes("functional_class", "p1", obs=obs) == ["B"]
