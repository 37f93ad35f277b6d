"""GEARS's Dataverse downloads derived for the data store (perturbation_effect_lib.gears_downloads)."""

from __future__ import annotations

import pickle
import zipfile

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from perturbation_effect_lib import gears_downloads, pseudobulk
from perturbation_effect_lib import holdout_splits as splits
from project_paths import ROOT

from openpert.data.fetching import run_derivation
from openpert.data.manifest import read_manifest

MANIFEST = ROOT / "src/perturbation_effect/api/data_manifest.yaml"
MEMBER = "norman/perturb_processed.h5ad"


def gears_h5ad(path, *, n_cells: int = 240, seed: int = 0):
    """A small h5ad in the layout of GEARS's published ``perturb_processed.h5ad``.

    ``obs``: ``condition`` (``ctrl``, ``A+ctrl``, ``ctrl+B``, ``A+B``), ``cell_type``, ``dose_val``,
    ``control``, ``condition_name``; ``var``: Ensembl ids with ``gene_name``; log-normalised sparse
    ``X``; ``uns``: GEARS's per-condition DE gene lists.
    """
    rng = np.random.default_rng(seed)
    genes = [f"GENE{i}" for i in range(30)]
    conditions = ["ctrl"] * 60 + [c for c in ["GENE1+ctrl", "ctrl+GENE2", "GENE3+ctrl", "GENE4+ctrl", "GENE5+ctrl",
                                                "GENE1+GENE2", "GENE4+GENE3", "NOTGO+ctrl", "GENE6+ctrl"] for _ in range(20)]
    conditions = conditions[:n_cells]
    counts = rng.poisson(3.0, size=(len(conditions), len(genes))).astype(np.float64)
    X = sp.csr_matrix(pseudobulk.log_normalize(counts))
    obs = pd.DataFrame({"condition": pd.Categorical(conditions), "cell_type": "A549",
                        "dose_val": ["1+1" if "ctrl" not in c else "1" for c in conditions],
                        "control": [int(c == "ctrl") for c in conditions]},
                       index=[f"cell{i}" for i in range(len(conditions))])
    obs["condition_name"] = [f"A549_{c}_{d}" for c, d in zip(obs["condition"], obs["dose_val"])]
    obs = obs.astype("category")
    var = pd.DataFrame({"gene_name": genes}, index=[f"ENSG{i:011d}" for i in range(len(genes))])
    names = sorted(set(obs["condition_name"]))
    uns = {"rank_genes_groups_cov_all": {n: np.array(var.index[rng.permutation(len(genes))]) for n in names},
           "top_non_dropout_de_20": {n: np.array(var.index[:20]) for n in names},
           "non_dropout_gene_idx": {n: np.arange(len(genes)) for n in names}}
    ad.AnnData(X=X, obs=obs, var=var, uns=uns).write_h5ad(path)
    return path


@pytest.fixture()
def archive(tmp_path):
    """A zip laid out as GEARS's ``norman.zip``: the h5ad and the folders GEARS writes beside it."""
    h5ad = gears_h5ad(tmp_path / "perturb_processed.h5ad")
    path = tmp_path / "norman.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("norman/", "")
        zf.write(h5ad, MEMBER)
        zf.writestr("norman/go.csv", "source,target,importance\n")
        zf.writestr("__MACOSX/norman/._perturb_processed.h5ad", b"\0" * 10)
    return path


def test_perturb_processed_extracts_the_member_unchanged_and_streaming(archive, tmp_path, monkeypatch):
    # Never the whole member in memory at once: ZipFile.read would load it all.
    monkeypatch.setattr(zipfile.ZipFile, "read", lambda *a, **k: pytest.fail("ZipFile.read loads the whole member"))
    out = tmp_path / "store" / "perturbseq/gears/norman/perturb_processed.h5ad"
    gears_downloads.perturb_processed({"zip": archive}, out, member=MEMBER)
    assert out.read_bytes() == (tmp_path / "perturb_processed.h5ad").read_bytes()
    assert sorted(p.name for p in out.parent.iterdir()) == ["perturb_processed.h5ad"]  # no partial left


def test_the_loader_reads_gears_published_layout(archive, tmp_path):
    out = tmp_path / "perturb_processed.h5ad"
    gears_downloads.perturb_processed({"zip": archive}, out, member=MEMBER)
    cells = pseudobulk.read_perturbseq(out)
    assert cells.uns["layout"] == "gears"
    assert list(cells.var_names[:3]) == ["GENE0", "GENE1", "GENE2"]  # symbols from var["gene_name"]
    assert set(cells.obs["condition"]) == {"ctrl", "GENE1+ctrl", "GENE2+ctrl", "GENE3+ctrl", "GENE4+ctrl", "GENE5+ctrl",
                                           "GENE1+GENE2", "GENE3+GENE4", "NOTGO+ctrl", "GENE6+ctrl"}
    source = ad.read_h5ad(out)
    np.testing.assert_array_equal(cells.X.toarray(), source.X.toarray())  # log-normalised X kept as it is
    profiles, control = pseudobulk.pseudobulk(cells)
    assert list(profiles.obs_names) == ["GENE1", "GENE1+GENE2", "GENE2", "GENE3", "GENE3+GENE4", "GENE4", "GENE5",
                                        "GENE6", "NOTGO"]
    np.testing.assert_allclose(control.to_numpy(), source.X[:60].toarray().astype(np.float64).mean(axis=0), rtol=1e-12)


def test_perturb_processed_names_the_archive_when_it_is_not_gears_download(archive, tmp_path):
    out = tmp_path / "out.h5ad"
    page = tmp_path / "norman.zip.html"
    page.write_text("<!DOCTYPE html><html>Dataverse: file not found</html>")
    with pytest.raises(ValueError, match=r"norman\.zip\.html: not a zip archive"):
        gears_downloads.perturb_processed({"zip": page}, out, member=MEMBER)
    with pytest.raises(ValueError, match=r"norman\.zip: the archive has no member 'adamson/perturb_processed\.h5ad'; "
                                         r"it holds \['norman/perturb_processed\.h5ad'\]"):
        gears_downloads.perturb_processed({"zip": archive}, out, member="adamson/perturb_processed.h5ad")
    with pytest.raises(ValueError, match="is a folder in the archive"):
        gears_downloads.perturb_processed({"zip": archive}, out, member="norman/")
    with pytest.raises(ValueError, match=r"member norman/go\.csv is not an HDF5"):
        gears_downloads.perturb_processed({"zip": archive}, out, member="norman/go.csv")
    with pytest.raises(KeyError, match="needs the source 'zip'"):
        gears_downloads.perturb_processed({"archive": archive}, out, member=MEMBER)
    with pytest.raises(FileNotFoundError, match="not found"):
        gears_downloads.perturb_processed({"zip": tmp_path / "missing.zip"}, out, member=MEMBER)
    assert not out.exists() and not list(tmp_path.glob(".*partial"))


def test_perturb_processed_refuses_a_damaged_member_or_another_layout(tmp_path):
    h5ad = gears_h5ad(tmp_path / "perturb_processed.h5ad")
    data = bytearray(h5ad.read_bytes())
    stored = tmp_path / "stored.zip"
    with zipfile.ZipFile(stored, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr(MEMBER, bytes(data))
    raw = bytearray(stored.read_bytes())
    at = raw.find(bytes(data[4096:4160]))
    raw[at] ^= 0xFF  # one flipped byte inside the member: its CRC no longer matches
    stored.write_bytes(bytes(raw))
    out = tmp_path / "out.h5ad"
    with pytest.raises(ValueError, match=r"stored\.zip: damaged zip archive .*CRC"):
        gears_downloads.perturb_processed({"zip": stored}, out, member=MEMBER)
    assert not out.exists()
    # An h5ad of another layout (no obs["condition"]) is not GEARS's file.
    other = tmp_path / "other.h5ad"
    ad.AnnData(X=np.ones((3, 2)), obs=pd.DataFrame({"perturbation": ["a", "b", "c"]}, index=list("xyz"))).write_h5ad(other)
    wrong = tmp_path / "wrong.zip"
    with zipfile.ZipFile(wrong, "w") as zf:
        zf.write(other, MEMBER)
    with pytest.raises(ValueError, match=r"member norman/perturb_processed\.h5ad has no obs column 'condition' \(GEARS's layout\)"):
        gears_downloads.perturb_processed({"zip": wrong}, out, member=MEMBER)


def _pickle(path, obj):
    path.write_bytes(pickle.dumps(obj, protocol=2))
    return path


def test_go_perturbable_genes_are_graph_genes_with_go_annotation(tmp_path):
    gene2go = _pickle(tmp_path / "gene2go_all.pkl", {"GENE1": {"GO:1", "GO:2"}, "GENE2": {"GO:3"}, "GENE9": {"GO:4"},
                                                      "ZZZ": set()})
    for essential in (["GENE2", "GENE1", "NOTGO", "GENE1"], np.array(["GENE2", "GENE1", "NOTGO"], dtype=object),
                      np.array(["GENE2", "GENE1", "NOTGO"])):
        out = tmp_path / "genes.txt"
        gears_downloads.go_perturbable_genes({"gene2go": gene2go, "essential": _pickle(tmp_path / "ess.pkl", essential)}, out)
        assert pseudobulk.read_gene_list(out) == ["GENE1", "GENE2"]
    with pytest.raises(ValueError, match="share no gene"):
        gears_downloads.go_perturbable_genes({"gene2go": gene2go, "essential": _pickle(tmp_path / "e.pkl", ["NOTGO"])}, out)
    with pytest.raises(ValueError, match="expected a mapping of gene names"):
        gears_downloads.go_perturbable_genes({"gene2go": _pickle(tmp_path / "g.pkl", ["GENE1"]),
                                              "essential": _pickle(tmp_path / "e.pkl", ["GENE1"])}, out)


class _Payload:
    """A pickle that runs code on loading (here: creating a file)."""

    def __init__(self, target):
        self.target = str(target)

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_a_pickle_that_would_run_code_is_refused_without_running_it(tmp_path):
    target = tmp_path / "pwned"
    evil = _pickle(tmp_path / "gene2go_all.pkl", {"GENE1": _Payload(target)})
    with pytest.raises(ValueError, match=r"gene2go_all\.pkl: not a pickle of plain data .*refusing to load (builtins|io)\.open"):
        gears_downloads.go_perturbable_genes({"gene2go": evil, "essential": _pickle(tmp_path / "e.pkl", ["GENE1"])},
                                             tmp_path / "out.txt")
    assert not target.exists() and not (tmp_path / "out.txt").exists()


def _entry(path: str):
    return next(f for f in read_manifest(MANIFEST) if f.path == path)


@pytest.mark.parametrize("name, file_id", [("norman", 6154020), ("adamson", 6154417),
                                           ("replogle_k562_essential", 7458695), ("replogle_rpe1_essential", 7458694)])
def test_manifest_derives_each_screen_from_gears_dataverse_zip(name, file_id, tmp_path):
    """The manifest's entry, run as the data store runs it (a child process importing the task library)."""
    entry = _entry(f"perturbseq/gears/{name}/perturb_processed.h5ad")
    assert entry.derive.function == "perturbation_effect_lib.gears_downloads:perturb_processed"
    assert entry.derive.args == {"member": f"{name}/perturb_processed.h5ad"}
    (source_name, download), = entry.derive.sources
    assert (source_name, download.path) == ("zip", f"originals/gears/{name}.zip")
    assert download.url == f"https://dataverse.harvard.edu/api/access/datafile/{file_id}"
    assert entry.sha256 is None and download.sha256 is None  # unpinned: no machine here reaches Dataverse
    assert entry.datasets and all(d.startswith(name.removesuffix("_essential") + "_") for d in entry.datasets)
    zipped = tmp_path / f"{name}.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.write(gears_h5ad(tmp_path / "x.h5ad"), f"{name}/perturb_processed.h5ad")
    run_derivation(entry, {"zip": zipped}, tmp_path / "out.h5ad")
    assert (tmp_path / "out.h5ad").read_bytes() == (tmp_path / "x.h5ad").read_bytes()


def test_the_perturbable_gene_filter_is_gears_and_the_split_draws_over_every_perturbation(tmp_path):
    """GEARS drops perturbations outside its graph before splitting; a min_cells filter comes after the draw."""
    entry = _entry("perturbseq/gears/go_perturbable_genes.txt")
    assert [(n, d.url.rsplit("/", 1)[1]) for n, d in entry.derive.sources] == [("gene2go", "6153417"), ("essential", "6934320")]
    gene2go = _pickle(tmp_path / "gene2go_all.pkl", {f"GENE{i}": {f"GO:{i}"} for i in range(1, 7)})
    essential = _pickle(tmp_path / "essential.pkl", [f"GENE{i}" for i in range(0, 7)])
    run_derivation(entry, {"gene2go": gene2go, "essential": essential}, tmp_path / "genes.txt")
    h5ad = gears_h5ad(tmp_path / "cells.h5ad")
    cells, dropped = pseudobulk.keep_perturbable(pseudobulk.read_gears(h5ad), pseudobulk.read_gene_list(tmp_path / "genes.txt"))
    assert dropped == ["NOTGO+ctrl"]
    universe = pseudobulk.perturbation_keys(cells)
    assert universe == ["GENE1", "GENE1+GENE2", "GENE2", "GENE3", "GENE3+GENE4", "GENE4", "GENE5", "GENE6"]
    same, _ = pseudobulk.keep_perturbable(cells, [f"GENE{i}" for i in range(10)])
    assert same is cells  # nothing dropped, nothing copied
    profiles, control = pseudobulk.pseudobulk(cells)
    profiles.obs["functional_class"] = "c"
    few = profiles[[p for p in profiles.obs_names if p != "GENE6"]].copy()  # as if GENE6 had too few cells
    for seed in (1, 2, 3):
        train, test, _ = splits.split_profiles(few, control, seed=seed, universe=universe, val_gene_set_size=0.0)
        expected = splits.simulation_split(universe, seed=seed).drop(index="GENE6")
        assert set(test.obs_names) == set(expected.index[expected["split"] == "test"])
        assert set(train.obs_names) == set(expected.index[expected["split"] == "train"])
    with pytest.raises(ValueError, match="split universe lacks 1 perturbations"):
        splits.split_profiles(profiles, control, universe=universe[:-1])
