"""Comparing test resources with their regeneration: by content, floats within a stated tolerance and the
rest exactly, naming the first difference."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from tooling import reproducible_resources as rr


def _adata(x_sparse: bool = False) -> ad.AnnData:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 3))
    obs = pd.DataFrame({"cell_type": pd.Categorical(["B", "T", "B", "NK"]), "n": [1, 2, 3, 4],
                        "note": ["a", None, "c", "d"]}, index=[f"c{i}" for i in range(4)])
    var = pd.DataFrame(index=["g0", "g1", "g2"])
    adata = ad.AnnData(sp.csr_matrix(np.where(x > 0, x, 0)) if x_sparse else x, obs=obs, var=var)
    adata.layers["counts"] = np.arange(12, dtype=np.int64).reshape(4, 3)
    adata.obsm["pca"] = rng.normal(size=(4, 2))
    adata.uns["dataset_id"] = "tiny"
    adata.uns["params"] = {"seed": 1, "scale": np.float64(np.nan), "genes": np.array(["g0", "g1"])}
    return adata


def _pair(tmp_path: Path, adata: ad.AnnData, name: str = "d.h5ad") -> tuple[Path, Path]:
    a, b = tmp_path / "a" / name, tmp_path / "b" / name
    a.parent.mkdir(exist_ok=True)
    b.parent.mkdir(exist_ok=True)
    adata.write_h5ad(a)
    return a, b


def _difference(a: Path, b: Path) -> rr.Difference | None:
    return rr.compare_files(a, b, name="d")


@pytest.mark.parametrize("sparse", [False, True])
def test_the_same_content_written_twice_is_equal(tmp_path, sparse):
    adata = _adata(sparse)
    a, b = _pair(tmp_path, adata)
    adata.write_h5ad(b, compression="gzip")  # other bytes, same content
    assert a.read_bytes() != b.read_bytes()
    assert _difference(a, b) is None


def _set(mapping_name: str, key: str, value) -> callable:
    """An edit of an AnnData: ``getattr(adata, mapping_name)[key] = value``."""
    def edit(d: ad.AnnData) -> None:
        target = getattr(d, mapping_name)  # bound first: pandas warns of chained assignment otherwise
        target[key] = value(d) if callable(value) else value
    return edit


def _set_element(mapping_name: str | None, key: str | None, where: tuple[int, int], value) -> callable:
    """An edit of one element of ``adata.X`` (``mapping_name`` None) or of a layer or obsm matrix."""
    def edit(d: ad.AnnData) -> None:
        matrix = d.X if mapping_name is None else getattr(d, mapping_name)[key]
        matrix[where] = value(matrix[where]) if callable(value) else value
    return edit


EDITS = {
    "X": (_set_element(None, None, (2, 1), lambda v: v + 1), "X['c2', 'g1']", None, None),
    # a generator that changed what it computes: far beyond the tolerance
    "X, stale generator": (_set_element(None, None, (0, 0), lambda v: v * (1 + 1e-3)), "X['c0', 'g0']", None, None),
    "X, 1e-6": (_set_element(None, None, (1, 2), lambda v: v * (1 + 1e-6)), "X['c1', 'g2']", None, None),
    "X, inf": (_set_element(None, None, (1, 2), np.inf), "X['c1', 'g2']", None, None),
    "obs integer by one": (_set("obs", "n", [1, 2, 4, 4]), "obs['n'], row 'c2'", "3", "4"),
    "obs integer": (_set("obs", "n", [1, 2, 30, 4]), "obs['n'], row 'c2'", "3", "30"),
    "obs missing string": (_set("obs", "note", pd.Categorical(["a", "b", "c", "d"])), "obs['note'], row 'c1'", "nan", "'b'"),
    "obs category order": (_set("obs", "cell_type", lambda d: d.obs["cell_type"].cat.reorder_categories(["T", "NK", "B"])),
                           "obs['cell_type'] categories", "['B', 'NK', 'T']", "['T', 'NK', 'B']"),
    "layer": (_set_element("layers", "counts", (3, 2), 0), "layers['counts']['c3', 'g2']", "11", "0"),
    "obsm": (_set_element("obsm", "pca", (1, 0), 0.0), "obsm['pca']['c1', 0]", None, None),
    "uns string": (_set("uns", "dataset_id", "other"), "uns['dataset_id']", "'tiny'", "'other'"),
    "uns nested nan": (lambda d: d.uns["params"].__setitem__("scale", np.float64(1.0)), "uns['params']['scale']", "nan", "1.0"),
    "uns array": (lambda d: d.uns["params"].__setitem__("genes", np.array(["g0", "g2"])), "uns['params']['genes'][1]", "'g1'", "'g2'"),
    "uns key": (_set("uns", "extra", 1), "uns keys", None, None),
    "obs dtype": (_set("obs", "n", [1.0, 2.0, 3.0, 4.0]), "obs['n'] dtype", "'int64'", "'float64'"),
}


@pytest.mark.parametrize("edit_name", list(EDITS))
def test_an_edited_value_is_reported_with_its_field(tmp_path, edit_name):
    edit, field, committed, regenerated = EDITS[edit_name]
    adata = _adata()
    a, b = _pair(tmp_path, adata)
    edit(adata)
    adata.write_h5ad(b)
    diff = _difference(a, b)
    assert diff is not None
    assert diff.field == field
    if committed is not None:
        assert diff.detail == f"committed {committed}, regenerated {regenerated}"


# --- floating point: within RELATIVE_TOLERANCE * max(|a|, |b|) + ABSOLUTE_TOLERANCE ------------------------
def _ulp(v):
    return np.nextafter(v, np.inf)


def _relative(v, r=1e-12):
    return v * (1 + r)


WITHIN_TOLERANCE = {
    "X, one ulp": _set_element(None, None, (0, 0), _ulp),
    "X, 1e-12 relative": _set_element(None, None, (2, 1), _relative),
    "obsm, 1e-12 relative": _set_element("obsm", "pca", (1, 0), _relative),
    "uns nested float, one ulp": lambda d: d.uns["params"].__setitem__("scale_2", np.float64(_ulp(0.8609785310815921))),
    "obs float column, 1e-12 relative": _set("obs", "score", lambda d: np.linspace(0.1, 0.4, 4) * (1 + 1e-12)),
}


@pytest.mark.parametrize("edit_name", list(WITHIN_TOLERANCE))
def test_a_float_within_the_tolerance_matches(tmp_path, edit_name):
    adata = _adata()
    adata.uns["params"]["scale_2"] = np.float64(0.8609785310815921)
    adata.obs["score"] = np.linspace(0.1, 0.4, 4)
    a, b = _pair(tmp_path, adata)
    WITHIN_TOLERANCE[edit_name](adata)
    adata.write_h5ad(b)
    assert a.read_bytes() != b.read_bytes()
    assert _difference(a, b) is None


def test_a_float_beyond_the_tolerance_gives_both_values_and_their_relative_difference(tmp_path):
    adata = _adata()
    adata.layers["P.Value"] = np.full(adata.shape, 0.8609785310815921)
    a, b = _pair(tmp_path, adata)
    adata.layers["P.Value"][2, 1] = 0.8609785310815921 * (1 + 1e-6)
    adata.write_h5ad(b)
    diff = _difference(a, b)
    assert diff.field == "layers['P.Value']['c2', 'g1']"
    assert diff.detail == f"committed 0.8609785310815921, regenerated {0.8609785310815921 * (1 + 1e-6)!r}, relative difference 1e-06"


def test_the_reported_cross_cpu_difference_matches(tmp_path):
    # the 14th digit of a p-value, regenerated on another CPU
    adata = _adata()
    adata.layers["P.Value"] = np.full(adata.shape, 0.8609785310815921)
    a, b = _pair(tmp_path, adata)
    adata.layers["P.Value"][0, 0] = 0.8609785310816085
    adata.write_h5ad(b)
    assert _difference(a, b) is None


@pytest.mark.parametrize(("committed", "regenerated", "match"), [
    (0.0, 1e-13, True),   # the absolute floor: a value that should be 0, off by rounding
    (0.0, 1e-11, False),
    (1e-300, 2e-300, True),
    (1.0, 1.0 + 2e-9, False),
    (np.inf, np.inf, True),
    (np.inf, 1e308, False),
    (np.inf, -np.inf, False),
    (np.nan, np.nan, True),
    (np.nan, 0.0, False),
    (-0.0, 0.0, True),
])
def test_the_tolerance_of_one_float(committed, regenerated, match):
    assert bool(rr._close_mask(np.array([committed]), np.array([regenerated]))[0]) is match


def test_integers_strings_and_booleans_are_exact(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"n": 1000000000000, "s": "abc", "t": True, "f": 1.0}))
    b.write_text(json.dumps({"n": 1000000000001, "s": "abc", "t": True, "f": 1.0}))
    assert rr.compare_files(a, b, name="j").field == "['n']"
    b.write_text(json.dumps({"n": 1000000000000, "s": "abd", "t": True, "f": 1.0}))
    assert rr.compare_files(a, b, name="j").field == "['s']"
    b.write_text(json.dumps({"n": 1000000000000, "s": "abc", "t": False, "f": 1.0}))
    assert rr.compare_files(a, b, name="j").field == "['t']"
    # an integer where a float was is another type, whatever its value
    b.write_text(json.dumps({"n": 1000000000000, "s": "abc", "t": True, "f": 1}))
    assert rr.compare_files(a, b, name="j").field == "['f']"


@pytest.mark.parametrize("name", ["p.json", "p.yaml", "p.jsonl"])
def test_json_and_yaml_numbers_are_floats_within_the_tolerance(tmp_path, name):
    import yaml

    def write(path: Path, value: float) -> None:
        content = {"metrics": [{"id": "r2", "value": value}]}
        path.write_text(yaml.safe_dump(content) if name.endswith(".yaml") else json.dumps(content) + "\n")

    a, b = tmp_path / "a" / name, tmp_path / "b" / name
    a.parent.mkdir()
    b.parent.mkdir()
    write(a, 0.8609785310815921)
    write(b, 0.8609785310816085)
    assert rr.compare_files(a, b) is None
    write(b, 0.8609785310815921 * (1 + 1e-6))
    diff = rr.compare_files(a, b, name="p")
    prefix = "line 1" if name.endswith(".jsonl") else ""
    assert diff.field == f"{prefix}['metrics'][0]['value']"
    assert diff.detail.endswith("relative difference 1e-06")


def test_index_labels_are_exact_even_as_floats(tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    frame = pd.DataFrame({"v": [1.0, 2.0]}, index=pd.Index([0.5, 0.25], name="dose"))
    frame.to_parquet(a)
    frame.set_axis(pd.Index([0.5, np.nextafter(0.25, 1)], name="dose")).to_parquet(b)
    diff = rr.compare_files(a, b, name="t")
    assert diff.field == "index, row 1"
    frame.set_axis(pd.Index([0.5, 0.25], name="dose"), axis=0).astype({"v": "float32"}).to_parquet(b)
    assert rr.compare_files(a, b, name="t").field == "column 'v' dtype"


def test_a_sparse_matrix_within_the_tolerance_matches_and_beyond_it_differs(tmp_path):
    adata = _adata(x_sparse=True)
    a, b = _pair(tmp_path, adata)
    adata.X.data[-1] = _ulp(adata.X.data[-1])
    adata.write_h5ad(b)
    assert _difference(a, b) is None
    row, col = adata.X.nonzero()[0][-1], adata.X.nonzero()[1][-1]
    adata.X.data[-1] *= 1 + 1e-6
    adata.write_h5ad(b)
    diff = _difference(a, b)
    assert diff.field == f"X['c{row}', 'g{col}']"
    assert "relative difference 1e-06" in diff.detail


def test_a_sparse_matrix_names_its_first_differing_element(tmp_path):
    adata = _adata(x_sparse=True)
    a, b = _pair(tmp_path, adata)
    x = adata.X.toarray()
    x[3, 0] = 7.5
    adata.X = sp.csr_matrix(x)
    adata.write_h5ad(b)
    diff = _difference(a, b)
    assert diff.field == "X['c3', 'g0']"
    assert "regenerated 7.5, relative difference " in diff.detail


def test_an_explicitly_stored_zero_is_content(tmp_path):
    adata = _adata(x_sparse=True)
    a, b = _pair(tmp_path, adata)
    dense = adata.X.toarray()
    row, col = np.argwhere(dense == 0)[0]
    # the same values with one zero stored explicitly: another matrix for code that reads .data
    stored = sp.csr_matrix((np.append(adata.X.tocoo().data, 0.0),
                            (np.append(adata.X.tocoo().row, row), np.append(adata.X.tocoo().col, col))), shape=dense.shape)
    assert stored.nnz == adata.X.nnz + 1 and np.array_equal(stored.toarray(), dense)
    adata.X = stored
    adata.write_h5ad(b)
    assert _difference(a, b).field == "X stored entries"


def test_dense_and_sparse_storage_differ(tmp_path):
    adata = _adata()
    a, b = _pair(tmp_path, adata)
    adata.X = sp.csr_matrix(adata.X)
    adata.write_h5ad(b)
    assert _difference(a, b).field == "X storage"


def test_nan_equals_nan(tmp_path):
    adata = _adata()
    adata.X[1, 1] = np.nan
    a, b = _pair(tmp_path, adata)
    adata.write_h5ad(b)
    assert _difference(a, b) is None


@pytest.mark.parametrize("name", ["t.csv", "t.tsv", "t.parquet", "t.csv.gz"])
def test_tables_are_compared_by_value(tmp_path, name):
    frame = pd.DataFrame({"id": [0, 1, 2], "gene": ["A", "B", "C"], "value": [0.1, 0.2, 1 / 3]})
    a, b = tmp_path / "a" / name, tmp_path / "b" / name
    a.parent.mkdir()
    b.parent.mkdir()

    def write(df: pd.DataFrame, path: Path) -> None:
        if name.endswith(".parquet"):
            df.to_parquet(path, index=False)
        else:
            text = df.to_csv(sep="\t" if ".tsv" in name else ",", index=False).encode()
            path.write_bytes(gzip.compress(text, mtime=1 if path.parent.name == "a" else 2) if name.endswith(".gz") else text)

    write(frame, a)
    write(frame, b)
    assert rr.compare_files(a, b) is None  # a gzip header's time stamp is not content
    edited = frame.copy()
    edited.loc[2, "value"] = np.nextafter(1 / 3, 1)  # another CPU's last bit: the same table
    write(edited, b)
    assert rr.compare_files(a, b) is None
    edited.loc[2, "value"] = 1 / 3 * (1 + 1e-6)
    write(edited, b)
    diff = rr.compare_files(a, b, name="t")
    assert (diff.path, diff.field) == ("t", "column 'value', row 2")
    assert diff.detail.endswith(", relative difference 1e-06")
    edited = frame.copy()
    edited.loc[1, "id"] = 2  # an integer by one
    write(edited, b)
    assert rr.compare_files(a, b, name="t").field == "column 'id', row 1"


def test_json_and_jsonl_name_the_key(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"x": {"y": [1, 2, 3]}}))
    b.write_text(json.dumps({"x": {"y": [1, 2, 4]}}, indent=2))
    assert rr.compare_files(a, b, name="j").field == "['x']['y'][2]"
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"id": 1}\n{"id": 2}\n')
    b.write_text('{"id": 1}\n{"id": 3}\n')
    assert rr.compare_files(a, b, name="j").field == "line 2['id']"


def test_other_files_are_compared_by_bytes_naming_the_line(tmp_path):
    a, b = tmp_path / "a.gmt", tmp_path / "b.gmt"
    a.write_text("set1\tdesc\tA\tB\nset2\tdesc\tC\n")
    b.write_text("set1\tdesc\tA\tB\nset2\tdesc\tD\n")
    diff = rr.compare_files(a, b)
    assert diff.field == "line 2"


def test_folders_report_missing_and_extra_files_and_each_first_difference(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    for folder in (old, new):
        (folder / "ds").mkdir(parents=True)
        (folder / "ds" / "same.csv").write_text("a\n1\n")
    (old / "ds" / "gone.csv").write_text("a\n1\n")
    (new / "ds" / "new.csv").write_text("a\n1\n")
    (old / "ds" / "x.csv").write_text("a\n1\n")
    (new / "ds" / "x.csv").write_text("a\n2\n")
    diffs = rr.compare_folders(old, new, prefix="task/")
    assert [(d.path, d.field) for d in diffs] == [
        ("task/ds/gone.csv", "file"), ("task/ds/new.csv", "file"), ("task/ds/x.csv", "column 'a', row 0")]
    assert "bash scripts/create_test_resources.sh task" in rr.report("task", diffs)
    assert rr.report("task", diffs).startswith("resources_test/task/ds/gone.csv: file: ")


def _project(tmp_path: Path, script: str) -> Path:
    root = tmp_path / "project"
    (root / "scripts" / "create_test_resources").mkdir(parents=True)
    (root / "scripts" / "create_test_resources" / "tiny.sh").write_text(script)
    (root / "resources_test" / "tiny").mkdir(parents=True)
    (root / "resources_test" / "tiny" / "values.csv").write_text("a,b\n1,2\n")
    return root


def test_check_task_regenerates_into_the_work_folder_only(tmp_path):
    root = _project(tmp_path, 'set -e\nout="${OPENPERT_TEST_RESOURCES:-resources_test}/tiny"\nmkdir -p "$out"\n'
                              'printf "a,b\\n1,3\\n" > "$out/values.csv"\nmkdir "$TMPDIR/left_behind"\n')
    diffs = rr.check_task(root, "tiny", tmp_path / "work")
    assert [str(d) for d in diffs] == ["tiny/values.csv: column 'b', row 0: committed 2, regenerated 3"]
    assert (root / "resources_test" / "tiny" / "values.csv").read_text() == "a,b\n1,2\n"
    # the script's temporary files (openpert run-component's job folders) stay in the work folder
    assert (tmp_path / "work" / "tmp" / "left_behind").is_dir()
    assert rr.generator_tasks(root) == ["tiny"]


def test_a_script_writing_into_the_committed_resources_is_refused(tmp_path):
    root = _project(tmp_path, 'set -e\nprintf "a,b\\n1,3\\n" > resources_test/tiny/values.csv\n')
    with pytest.raises(RuntimeError, match="wrote into resources_test/tiny"):
        rr.check_task(root, "tiny", tmp_path / "work")


def test_a_failing_script_shows_the_end_of_its_output(tmp_path):
    root = _project(tmp_path, 'echo "no shared data here" >&2\nexit 3\n')
    with pytest.raises(RuntimeError, match=r"(?s)exit 3.*no shared data here"):
        rr.check_task(root, "tiny", tmp_path / "work")


def test_the_command_line_reports_and_exits_nonzero(tmp_path):
    root = _project(tmp_path, 'out="$OPENPERT_TEST_RESOURCES/tiny"\nmkdir -p "$out"\ncp resources_test/tiny/values.csv "$out"\n'
                              'echo x > "$out/more.txt"\n')
    proc = subprocess.run([sys.executable, rr.__file__, "--root", str(root)],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert "resources_test/tiny/more.txt: file: made by the script, but not committed" in proc.stdout
    shutil.rmtree(root / "resources_test" / "tiny")
    (root / "resources_test" / "tiny").mkdir()
    (root / "resources_test" / "tiny" / "values.csv").write_text("a,b\n1,2\n")
    (root / "resources_test" / "tiny" / "more.txt").write_text("x\n")
    proc = subprocess.run([sys.executable, rr.__file__, "tiny", "--root", str(root)],
                          capture_output=True, text=True)
    assert (proc.returncode, proc.stdout.strip()) == (0, "resources_test/tiny: as its script makes it")
