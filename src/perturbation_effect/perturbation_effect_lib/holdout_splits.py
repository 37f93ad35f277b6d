"""Train/test splits of perturbations for the unseen-perturbation task.

* :func:`simulation_split`: GEARS's ``simulation`` split (Roohani et al., Nature Biotechnology
  2024, Methods "Data splits"), as used by Ahlmann-Eltze, Huber & Anders (2025): a seeded random
  subset of the perturbed genes is "seen"; single perturbations of the other genes are test
  perturbations (``unseen_single``); combinations are test perturbations when one
  (``combo_seen1``) or none (``combo_seen0``) of their genes is seen, and a fraction of the
  combinations of two seen genes goes to training, the rest to test (``combo_seen2``). GEARS
  then carves a validation set out of the training perturbations by a second simulation split of
  them (90% of their genes seen, 90% of their two-seen-gene combinations kept): those
  perturbations do not train, and Ahlmann-Eltze, Huber & Anders score test and validation
  perturbations together, so they join the test file with ``split`` ``validation``. The draws
  are GEARS's own (NumPy's legacy generator, seeded as GEARS seeds it), so a seed holds out the
  same perturbations as in GEARS and in the paper.
* :func:`double_split`: the paper's split of Norman et al.'s double-perturbation screen: all
  single perturbations and half of the combinations train; a quarter of the combinations is the
  test set and a quarter the held-out ``val`` set, scored together.
* :func:`logo_split`: leave one functional group out (methods appendix, "LOGO"): every perturbation
  that targets a gene of the held-out class is a test perturbation; all others train.
* :func:`class_genes`: the genes of a functional class, from a GO biological-process term of
  ``knowledge_graphs/GO_Biological_Process_2021.gmt``, the transcription factors of
  ``gene_lists/human_TF_names_lambert2018.txt`` (both below the shared data folder, which the
  caller passes), or a metadata column.
* :func:`make_task_files`: the task's train / test / solution AnnData of a pseudobulk and a split.

LSFT (local similarity-filtered training) is not a split of the perturbations but a way of
training for each test perturbation; it lives in :mod:`perturbation_effect_lib.lsft` and is switched on
per dataset through ``uns["lsft_fraction"]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd

__all__ = [
    "simulation_split",
    "double_split",
    "logo_split",
    "class_genes",
    "tf_genes",
    "choose_logo_class",
    "annotate_functional_class",
    "split_profiles",
    "make_task_files",
]

TF_LIST = Path("gene_lists") / "human_TF_names_lambert2018.txt"
UNASSIGNED = "unassigned"


def _targets(perturbations: Sequence[str]) -> list[list[str]]:
    return [str(p).split("+") for p in perturbations]


def _legacy_choice(values: Sequence, size: int, seed: int) -> list:
    """``size`` of ``values`` drawn as GEARS draws them: ``np.random.seed(seed)`` then ``np.random.choice``.

    NumPy's legacy generator (``RandomState``), not :func:`numpy.random.default_rng`: a seed
    then gives the same draw as in GEARS and in Ahlmann-Eltze et al.'s scripts, so that a split
    of this task holds out the same perturbations as theirs.
    """
    if size == 0:
        return []
    return np.random.RandomState(seed).choice(np.asarray(values, dtype=object), size, replace=False).tolist()


def simulation_split(
    perturbations: Sequence[str],
    *,
    train_gene_set_size: float = 0.75,
    combo_seen2_train_frac: float = 0.75,
    seed: int = 1,
    val_gene_set_size: float = 0.0,
    val_combo_seen2_train_frac: float = 0.9,
) -> pd.DataFrame:
    """GEARS's ``simulation`` split of perturbations into train and test.

    Draw for draw as GEARS 0.1.2 (``gears/data_utils.py``, ``DataSplitter.get_simulation_split``
    and ``split_data``): the perturbed genes, sorted, are drawn from ``np.random.seed(seed)``
    (``int(n_genes * train_gene_set_size)`` of them are seen); the generator is seeded again with
    ``seed`` and ``int(n * combo_seen2_train_frac)`` of the ``n`` combinations of two seen genes,
    sorted by id, go to training. Single perturbations of seen genes train; the others are
    ``unseen_single``; combinations with one or no seen gene are ``combo_seen1`` / ``combo_seen0``.
    The result depends only on the set of perturbations, not their order. On the single-gene
    screens of Ahlmann-Eltze, Huber & Anders (2025) it holds out exactly the perturbations they
    held out, for their seeds 1 and 2 (``tests/perturbation_effect/test_holdout_splits.py``).

    Parameters
    ----------
    perturbations
        Perturbation ids: targets joined by ``+`` (``"A"``, ``"A+B"``), as
        :func:`perturbation_effect_lib.pseudobulk.condition_key` writes them (targets sorted, so
        that combinations sort as in a GEARS file whose names are sorted, as the paper's are).
    train_gene_set_size
        Fraction of the perturbed genes whose single perturbations are training data.
    combo_seen2_train_frac
        Fraction of the combinations of two seen genes put into training.
    seed
        Seed of NumPy's legacy generator, as GEARS's ``seed``.
    val_gene_set_size, val_combo_seen2_train_frac
        GEARS's validation carve-out (0.9 and 0.9 there): the training perturbations are split
        again with these fractions and the same seed, and what that second split holds out gets
        ``split`` ``validation`` (its subgroup named as in the first split). 0 makes no
        validation set.

    Returns
    -------
    pandas.DataFrame
        Indexed by perturbation (input order), with ``split`` (``train``/``test``/``validation``)
        and ``subgroup`` (``train``, ``unseen_single``, ``combo_seen0``, ``combo_seen1``,
        ``combo_seen2``).

    Raises
    ------
    ValueError
        When a fraction is outside its range, a perturbation is listed twice, or no
        perturbation is left for training.
    """
    if not 0 < train_gene_set_size < 1:
        raise ValueError(f"train_gene_set_size must be in (0, 1), got {train_gene_set_size}")
    if not 0 <= combo_seen2_train_frac <= 1:
        raise ValueError(f"combo_seen2_train_frac must be in [0, 1], got {combo_seen2_train_frac}")
    ids = [str(p) for p in perturbations]
    if len(set(ids)) != len(ids):
        raise ValueError("a perturbation is listed twice; GEARS splits distinct conditions")
    targets = _targets(ids)
    genes = sorted({g for t in targets for g in t})
    seen = set(_legacy_choice(genes, int(len(genes) * train_gene_set_size), seed))
    split, subgroup = [], []
    for t in targets:
        n_known = sum(g in seen for g in t)
        if len(t) == 1:
            split.append("train" if n_known else "test")
            subgroup.append("train" if n_known else "unseen_single")
        elif n_known == len(t):
            split.append("test")  # decided below, among all combinations of seen genes
            subgroup.append("combo_seen2")
        else:
            split.append("test")
            subgroup.append(f"combo_seen{n_known}")
    seen2 = sorted(p for p, s in zip(ids, subgroup) if s == "combo_seen2")
    to_train = set(_legacy_choice(seen2, int(len(seen2) * combo_seen2_train_frac), seed))
    for i, p in enumerate(ids):
        if p in to_train:
            split[i], subgroup[i] = "train", "train"
    frame = pd.DataFrame({"split": split, "subgroup": subgroup}, index=pd.Index(ids))
    if not (frame["split"] == "train").any():
        raise ValueError("the simulation split left no training perturbation")
    if val_gene_set_size:
        train = frame.index[frame["split"] == "train"]
        val = simulation_split(list(train), train_gene_set_size=val_gene_set_size,
                               combo_seen2_train_frac=val_combo_seen2_train_frac, seed=seed)
        held = val.index[val["split"] == "test"]
        frame.loc[held, "split"] = "validation"
        frame.loc[held, "subgroup"] = val.loc[held, "subgroup"]
    return frame


def double_split(perturbations: Sequence[str], *, seed: int = 1) -> pd.DataFrame:
    """Ahlmann-Eltze, Huber & Anders's split of a screen of double perturbations (Norman et al. 2019).

    Every single perturbation trains, and half of the combinations (``len // 2``, drawn from
    NumPy's legacy generator seeded with ``seed`` among the combinations sorted by id); of the
    other half, sorted, half is drawn as the test set by the same generator and the rest is the
    paper's held-out ``val`` set (here ``validation``). The paper scores test and ``val``
    together (``benchmark/src/prepare_perturbation_data.py`` of const-ae/linear_perturbation_prediction-Paper,
    the ``norman_from_scfoundation`` branch; its seeds 1 to 5 are reproduced exactly by this function).

    The draws sort the combinations by id as given. The paper's run split scFoundation's
    release of the screen, whose names are as that file writes them (some unsorted, such as
    ``CEBPE+CEBPB``); its script sorts the targets of GEARS's release of the screen
    (``normalize_condition_names``), as :func:`perturbation_effect_lib.pseudobulk.condition_key`
    does, so on GEARS's release a loader passes those ids.

    Parameters
    ----------
    perturbations
        Perturbation ids: targets joined by ``+``.
    seed
        Seed of NumPy's legacy generator, as the paper's ``--seed``.

    Returns
    -------
    pandas.DataFrame
        Indexed by perturbation (input order), with ``split`` (``train``/``test``/``validation``)
        and ``subgroup`` (``train``; ``combo_seen2`` for held-out combinations, both of whose genes
        are seen as single perturbations when the screen has them).

    Raises
    ------
    ValueError
        When a perturbation is listed twice, or there are fewer than four combinations (nothing
        would be left to test).
    """
    ids = [str(p) for p in perturbations]
    if len(set(ids)) != len(ids):
        raise ValueError("a perturbation is listed twice")
    doubles = sorted(p for p, t in zip(ids, _targets(ids)) if len(t) > 1)
    if len(doubles) < 4:
        raise ValueError(f"the double-perturbation split needs at least 4 combinations, got {len(doubles)}")
    # One generator for both draws, as the paper's script seeds NumPy once (np.random.seed(args.seed)).
    rng = np.random.RandomState(seed)
    train = set(rng.choice(np.asarray(doubles, dtype=object), len(doubles) // 2, replace=False).tolist())
    rest = [p for p in doubles if p not in train]  # sorted, as np.setdiff1d returns it
    test = set(rng.choice(np.asarray(rest, dtype=object), len(rest) // 2, replace=False).tolist())
    held = set(doubles) - train
    split = [("test" if p in test else "validation") if p in held else "train" for p in ids]
    subgroup = ["train" if s == "train" else "combo_seen2" for s in split]
    return pd.DataFrame({"split": split, "subgroup": subgroup}, index=pd.Index(ids))


def logo_split(perturbations: Sequence[str], held_out_genes: Sequence[str]) -> pd.DataFrame:
    """Leave one group out: perturbations with any target in ``held_out_genes`` are the test set.

    A combination with one held-out gene is held out too, so that no training perturbation
    touches the class.

    Returns
    -------
    pandas.DataFrame
        Indexed by perturbation, with ``split`` (``train``/``test``) and ``subgroup``
        (``train``/``heldout_class``).

    Raises
    ------
    ValueError
        When no perturbation, or every perturbation, falls in the class.
    """
    held = set(held_out_genes)
    test = np.array([any(g in held for g in t) for t in _targets(perturbations)])
    if not test.any():
        raise ValueError("no perturbation targets a gene of the held-out class")
    if test.all():
        raise ValueError("every perturbation targets a gene of the held-out class; nothing is left to train on")
    return pd.DataFrame({"split": np.where(test, "test", "train"), "subgroup": np.where(test, "heldout_class", "train")},
                        index=pd.Index([str(p) for p in perturbations]))


def _shared_data(data_dir: str | Path | None, what: str) -> Path:
    """``data_dir`` as a path; an error saying what needed it when it was not given."""
    if data_dir is None:
        raise ValueError(f"{what} needs the shared data folder (data_dir)")
    return Path(data_dir)


def tf_genes(data_dir: str | Path) -> list[str]:
    """The 1,639 human transcription factors of Lambert et al. (2018).

    Parameters
    ----------
    data_dir
        The shared data folder (the list is ``gene_lists/human_TF_names_lambert2018.txt`` below it).

    Raises
    ------
    FileNotFoundError
        Naming the list, when it is not there.
    """
    path = _shared_data(data_dir, "the transcription-factor list") / TF_LIST
    if not path.is_file():
        raise FileNotFoundError(f"{path}: transcription-factor list not found")
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def class_genes(source: str, class_name: str, *, obs: pd.DataFrame | None = None,
                data_dir: str | Path | None = None) -> list[str]:
    """Genes of one functional class.

    Parameters
    ----------
    source
        ``"go_bp"`` (``class_name`` is a GO BP term, e.g. ``"translation (GO:0006412)"``, or just
        its id ``"GO:0006412"``), ``"tf"`` (the transcription factors; ``class_name`` ignored) or
        ``"functional_class"`` (targets of single perturbations whose ``obs["functional_class"]``
        equals ``class_name``; needs ``obs``).
    class_name
        The class.
    obs
        Perturbation metadata with ``target_genes`` and ``functional_class``.
    data_dir
        The shared data folder; needed for ``go_bp`` and ``tf``.
    """
    if source == "tf":
        return tf_genes(data_dir)
    if source == "go_bp":
        from pertsci import knowledge_graphs as kg

        sets = kg.gene_sets("go_bp", _shared_data(data_dir, "a GO BP class") / "knowledge_graphs")
        if class_name in sets:
            return sets[class_name]
        by_id = [name for name in sets if name.endswith(f"({class_name})")]
        if len(by_id) == 1:
            return sets[by_id[0]]
        raise KeyError(f"GO BP term {class_name!r} not found in {kg.GENE_SET_FILES['go_bp']}")
    if source == "functional_class":
        if obs is None or "functional_class" not in obs.columns:
            raise ValueError("source 'functional_class' needs perturbation metadata with a functional_class column")
        rows = obs[(obs["functional_class"] == class_name) & (obs["n_targets"] == 1)]
        if rows.empty:
            raise KeyError(f"no single perturbation has functional_class {class_name!r}")
        return sorted(rows["target_genes"].astype(str))
    raise ValueError(f"unknown class source {source!r}; expected go_bp, tf or functional_class")


def choose_logo_class(obs: pd.DataFrame) -> str:
    """The functional class with the most single perturbations (ties by name), never ``unassigned``."""
    singles = obs[(obs["n_targets"] == 1) & (obs["functional_class"] != UNASSIGNED)]
    if singles.empty:
        raise ValueError("no single perturbation has a functional class to hold out")
    counts = singles["functional_class"].value_counts()
    best = counts.max()
    return sorted(counts.index[counts == best])[0]


def annotate_functional_class(target_genes: Sequence[str], source: str, *, data_dir: str | Path,
                              min_size: int = 3) -> list[str]:
    """A functional class per perturbation, from real annotation.

    ``source="tf"``: ``"transcription factor"`` or ``"other"``. ``source="go_bp"``: among the GO BP
    terms containing a target, the one containing the most targets of the screen (ties by name),
    or ``"unassigned"`` when no term holds ``min_size`` targets. Combinations get the classes of
    their targets joined by ``" + "`` (sorted, distinct).

    Parameters
    ----------
    target_genes
        Perturbation ids (targets joined by ``+``).
    source
        ``"go_bp"`` or ``"tf"``.
    data_dir
        The shared data folder (GO BP terms, transcription factors).
    min_size
        Fewest targets of the screen a GO BP term needs to be a class.
    """
    targets = _targets(target_genes)
    if source == "tf":
        tfs = set(tf_genes(data_dir))
        per_gene = {g: ("transcription factor" if g in tfs else "other") for t in targets for g in t}
    elif source == "go_bp":
        from pertsci import knowledge_graphs as kg

        sets = kg.gene_sets("go_bp", _shared_data(data_dir, "a GO BP annotation") / "knowledge_graphs")
        screen = {g for t in targets for g in t}
        sizes = {name: len(screen.intersection(genes)) for name, genes in sets.items()}
        per_gene = {}
        for g in screen:
            terms = [name for name, genes in sets.items() if sizes[name] >= min_size and g in genes]
            per_gene[g] = min(terms, key=lambda n: (-sizes[n], n)) if terms else UNASSIGNED
    else:
        raise ValueError(f"unknown annotation source {source!r}; expected go_bp or tf")
    return [" + ".join(sorted({per_gene[g] for g in t})) for t in targets]


def split_profiles(
    profiles: ad.AnnData,
    control: pd.Series,
    *,
    split: str = "simulation",
    lsft_fraction: float = 0.0,
    logo_source: str = "functional_class",
    logo_class: str = "auto",
    seed: int = 1,
    train_gene_set_size: float = 0.75,
    combo_seen2_train_frac: float = 0.75,
    val_gene_set_size: float = 0.9,
    uns: dict | None = None,
    data_dir: str | Path | None = None,
    half_profiles: tuple[np.ndarray, np.ndarray] | None = None,
    universe: Sequence[str] | None = None,
) -> tuple[ad.AnnData, ad.AnnData, ad.AnnData]:
    """Split a screen's pseudobulk into the task's files for one evaluation setting.

    Parameters
    ----------
    profiles, control
        From :func:`perturbation_effect_lib.pseudobulk.pseudobulk`, with ``obs["functional_class"]`` added.
    split
        ``"simulation"`` (:func:`simulation_split`), ``"double"`` (:func:`double_split`) or
        ``"logo"`` (:func:`logo_split`).
    lsft_fraction
        Written to ``uns["lsft_fraction"]``: 0 trains on all training perturbations, a value in
        (0, 1] asks methods for LSFT with that share of training perturbations.
    logo_source, logo_class
        The held-out class: ``logo_source`` as in :func:`class_genes`; ``logo_class="auto"`` takes
        the functional class with the most single perturbations (:func:`choose_logo_class`; for
        ``tf`` the class is always the transcription factors).
    seed, train_gene_set_size, combo_seen2_train_frac, val_gene_set_size
        Of the simulation split (``val_gene_set_size`` 0: no validation carve-out).
    uns
        Dataset metadata (``dataset_id``, ``dataset_name``...) copied into every file.
    data_dir
        The shared data folder; needed for a LOGO split of a ``go_bp`` or ``tf`` class.
    half_profiles
        From :func:`perturbation_effect_lib.pseudobulk.half_pseudobulk` (rows as ``profiles``):
        written to the solution for the ceiling control.
    universe
        The perturbations a simulation or double split is drawn over (default: those of
        ``profiles``); it must hold every row of ``profiles``. GEARS and the paper split every
        condition of the file, so a loader that drops perturbations with too few cells passes
        all of them here: the split then holds out what theirs does, less the dropped ones.

    Raises
    ------
    ValueError
        For an unknown split, an LSFT fraction outside [0, 1], or a ``universe`` that lacks a
        perturbation of ``profiles``.
    """
    if not 0 <= lsft_fraction <= 1:
        raise ValueError(f"lsft_fraction must be in [0, 1], got {lsft_fraction}")
    perts = list(profiles.obs_names)
    drawn_over = perts if universe is None else [str(p) for p in universe]
    missing = sorted(set(perts) - set(drawn_over))
    if missing:
        raise ValueError(f"the split universe lacks {len(missing)} perturbations of the pseudobulk, e.g. {missing[:3]}")
    meta = dict(uns or {})
    meta["split"] = split
    meta["lsft_fraction"] = float(lsft_fraction)
    if split == "simulation":
        labels = simulation_split(drawn_over, train_gene_set_size=train_gene_set_size,
                                  combo_seen2_train_frac=combo_seen2_train_frac, seed=seed,
                                  val_gene_set_size=val_gene_set_size).loc[perts]
    elif split == "double":
        labels = double_split(drawn_over, seed=seed).loc[perts]
    elif split == "logo":
        if logo_source == "tf":
            name, genes = "transcription factors", tf_genes(data_dir)
        else:
            name = choose_logo_class(profiles.obs) if logo_class == "auto" else logo_class
            genes = class_genes(logo_source, name, obs=profiles.obs, data_dir=data_dir)
        labels = logo_split(perts, genes)
        meta["heldout_class"] = name
    else:
        raise ValueError(f"unknown split {split!r}; expected simulation, double or logo")
    return make_task_files(profiles, control, labels, meta, half_profiles=half_profiles)


def make_task_files(profiles: ad.AnnData, control: pd.Series, split: pd.DataFrame, uns: dict, *,
                    half_profiles: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[ad.AnnData, ad.AnnData, ad.AnnData]:
    """The task's train, test and solution AnnData of a pseudobulk and a split.

    Parameters
    ----------
    profiles
        Perturbations x genes pseudobulk (``X``) with ``obs`` columns ``condition``,
        ``target_genes``, ``n_targets``, ``n_cells`` and ``functional_class``.
    control
        Control mean per gene (same genes).
    split
        From :func:`simulation_split` or :func:`logo_split`, indexed like ``profiles.obs_names``.
    uns
        Written to every file's ``uns`` (``dataset_id``, ``split``, ``lsft_fraction``...).
    half_profiles
        Half-cell means and their cell counts (rows as ``profiles``), written to the solution as
        ``layers["expression_half"]`` and ``obs["n_cells_half"]``.

    Returns
    -------
    train, test, solution
        ``train``: training profiles in ``X``; ``test``: the test and validation perturbations'
        metadata only (``obs["holdout_set"]`` says which); ``solution``: their profiles in
        ``layers["expression"]`` and the mean training profile in ``var["training_mean"]``. Every
        file carries ``var["control_mean"]``, and ``uns`` the counts ``n_test`` and ``n_validation``. A held-out perturbation's profile is written
        nowhere but the solution.
    """
    missing = profiles.obs_names.difference(split.index)
    if len(missing):
        raise ValueError(f"split lacks {len(missing)} perturbations, e.g. {list(missing[:3])}")
    if not control.index.equals(profiles.var_names):
        raise ValueError("control profile and pseudobulk have different genes")
    labels = split.loc[profiles.obs_names]
    unknown = sorted(set(labels["split"]) - {"train", "test", "validation"})
    if unknown:
        raise ValueError(f"split has unknown labels {unknown}; expected train, test or validation")
    is_test = labels["split"].isin(["test", "validation"]).to_numpy()
    if not is_test.any() or is_test.all():
        raise ValueError("a split needs both training and test perturbations")
    columns = ["condition", "target_genes", "n_targets", "functional_class", "n_cells"]
    obs = profiles.obs[columns].copy()
    obs["subgroup"] = labels["subgroup"].to_numpy()
    obs["holdout_set"] = labels["split"].to_numpy()
    uns = {**uns, "n_test": int((labels["split"] == "test").sum()), "n_validation": int((labels["split"] == "validation").sum())}
    var = pd.DataFrame({"control_mean": control.to_numpy(dtype=np.float64)}, index=profiles.var_names.copy())
    X = np.asarray(profiles.X, dtype=np.float64)
    train = ad.AnnData(X=X[~is_test], obs=obs[~is_test].drop(columns=["holdout_set"]), var=var.copy(), uns=dict(uns))
    test = ad.AnnData(obs=obs[is_test].drop(columns=["n_cells"]).copy(), var=var.copy(), uns=dict(uns))
    layers = {"expression": X[is_test]}
    sol_obs = obs[is_test].copy()
    if half_profiles is not None:
        half, n_half = half_profiles
        if np.shape(half) != X.shape or len(n_half) != X.shape[0]:
            raise ValueError(f"half profiles have shape {np.shape(half)}, expected {X.shape}")
        layers["expression_half"] = np.asarray(half, dtype=np.float64)[is_test]
        sol_obs["n_cells_half"] = np.asarray(n_half, dtype=np.int64)[is_test]
    sol_var = var.copy()
    # The mean training profile (the mean baseline's prediction): the reference of the
    # perturbation-specific metrics, which score only what differs from the average perturbation.
    sol_var["training_mean"] = X[~is_test].mean(axis=0)
    solution = ad.AnnData(obs=sol_obs, var=sol_var, layers=layers, uns=dict(uns))
    return train, test, solution
