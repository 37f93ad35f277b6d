"""File-format validators: presence, dtype, finiteness and shape rules, with messages naming the file."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time

import anndata as ad
import numpy as np
import pandas as pd
import pytest

from openpert.config import formats
from openpert.config.formats import FileFormat, FormatError

PREDICTION = {
    "type": "h5ad",
    "layers": [{"name": "prediction", "type": "double"}],
    "obs": [{"name": "group", "type": "string", "required": False}],
    "uns": [{"name": "dataset_id", "type": "string"}, {"name": "n", "type": "integer", "required": False}],
    "matches": [{"this": "obs_names", "file": "file_test", "that": "obs_names"},
                {"this": "var_names", "file": "file_genes", "that": "column:gene", "relation": "same_set"}],
}


def fmt(spec, fid="file_prediction") -> FileFormat:
    return FileFormat.from_spec(spec, source="api/x.yaml: info.format", format_id=fid)


def write_h5ad(path, values, obs_names=("a", "b"), var_names=("g1", "g2", "g3"), uns=None, obs=None):
    adata = ad.AnnData(obs=pd.DataFrame(obs or {}, index=list(obs_names)), var=pd.DataFrame(index=list(var_names)),
                       layers={"prediction": np.asarray(values, dtype=float)} if values is not None else None,
                       uns=uns if uns is not None else {"dataset_id": "d"})
    adata.write_h5ad(path)
    return path


@pytest.fixture()
def context(tmp_path):
    test = tmp_path / "test.h5ad"
    ad.AnnData(obs=pd.DataFrame(index=["a", "b"])).write_h5ad(test)
    genes = tmp_path / "genes.csv"
    pd.DataFrame({"gene": ["g3", "g2", "g1"]}).to_csv(genes, index=False)
    return {"file_test": test, "file_genes": genes}


def test_valid_file_passes(tmp_path, context):
    path = write_h5ad(tmp_path / "p.h5ad", np.ones((2, 3)))
    fmt(PREDICTION).validate(path, context)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"values": None}, "required layers['prediction'] is missing"),
        ({"values": [[1, np.nan, 2], [0, 0, np.inf]]}, "2 non-finite values (1 NaN, 1 inf)"),
        ({"values": np.ones((2, 3)), "uns": {"dataset_id": 3}}, "uns['dataset_id'] should hold strings"),
        ({"values": np.ones((2, 3)), "uns": {"dataset_id": "d", "n": 1.5}}, "uns['n'] should hold integers"),
        ({"values": np.ones((3, 3)), "obs_names": ("a", "b", "c")}, "obs_names has 3 entries but file_test's obs_names has 2"),
        ({"values": np.ones((2, 3)), "obs_names": ("b", "a")}, "obs_names is not in the order of file_test's obs_names"),
        ({"values": np.ones((2, 2)), "var_names": ("g1", "g2")}, "var_names lacks 1 of file_genes's column:gene"),
        ({"values": np.ones((2, 3)), "obs": {"group": [1, 2]}}, "obs['group'] should hold strings"),
    ],
)
def test_problems_are_named(tmp_path, context, kwargs, expected):
    path = write_h5ad(tmp_path / "p.h5ad", **kwargs)
    with pytest.raises(FormatError) as err:
        fmt(PREDICTION).validate(path, context)
    message = str(err.value)
    assert str(path) in message and "file_prediction" in message
    assert expected in message


def test_rules_without_their_file_are_not_checked(tmp_path):
    path = write_h5ad(tmp_path / "p.h5ad", np.ones((2, 3)), obs_names=("x", "y"))
    fmt(PREDICTION).validate(path, {})


def test_unreadable_and_missing_files(tmp_path):
    bad = tmp_path / "p.h5ad"
    bad.write_text("not hdf5")
    with pytest.raises(FormatError, match="cannot be read as h5ad"):
        fmt(PREDICTION).validate(bad)
    with pytest.raises(FormatError, match="file not found"):
        fmt(PREDICTION).validate(tmp_path / "nope.h5ad")


def test_csv_json_jsonl(tmp_path):
    csv_fmt = fmt({"type": "csv", "columns": [{"name": "id", "type": "string"}, {"name": "score", "type": "double", "finite": True}]}, "file_t")
    good = tmp_path / "t.csv"
    pd.DataFrame({"id": ["a", "b"], "score": [0.1, 0.2]}).to_csv(good, index=False)
    csv_fmt.validate(good)
    bad = tmp_path / "u.csv"
    pd.DataFrame({"id": ["a", "b"], "score": [0.1, None]}).to_csv(bad, index=False)
    with pytest.raises(FormatError, match="score.*1 non-finite"):
        csv_fmt.validate(bad)
    json_fmt = fmt({"type": "json", "keys": [{"name": "label", "type": "string"}]}, "file_j")
    (tmp_path / "a.json").write_text(json.dumps({"label": "x"}))
    json_fmt.validate(tmp_path / "a.json")
    (tmp_path / "b.json").write_text(json.dumps({"other": 1}))
    with pytest.raises(FormatError, match=r"required keys\['label'\] is missing"):
        json_fmt.validate(tmp_path / "b.json")
    jsonl_fmt = fmt({"type": "jsonl", "keys": [{"name": "id", "type": "string"}, {"name": "score", "type": "double"}]}, "file_l")
    (tmp_path / "c.jsonl").write_text('{"id": "a", "score": 1}\n{"id": "b", "score": 0.5}\n')
    jsonl_fmt.validate(tmp_path / "c.jsonl")
    (tmp_path / "d.jsonl").write_text('{"id": "a", "score": 1}\n{broken\n')
    with pytest.raises(FormatError, match="line 2 is not valid JSON"):
        jsonl_fmt.validate(tmp_path / "d.jsonl")


def test_spec_errors_name_the_source():
    with pytest.raises(FormatError, match=r"api/x.yaml: info.format.type: 'xlsx'"):
        fmt({"type": "xlsx"})
    with pytest.raises(FormatError, match=r"info.format.layerz: not a slot of a h5ad file"):
        fmt({"type": "h5ad", "layerz": []})
    with pytest.raises(FormatError, match=r"matches\[0\].relation"):
        fmt({"type": "h5ad", "matches": [{"this": "obs_names", "file": "f", "relation": "similar"}]})


@pytest.mark.parametrize("ftype", ["h5ad", "csv", "tsv", "parquet", "jsonl", "json"])
def test_min_rows_refuses_an_empty_file(tmp_path, ftype):
    """A file with no rows (no test items) fails its format when the format asks for at least one."""
    path = tmp_path / f"items.{ftype}"
    if ftype == "h5ad":
        ad.AnnData(obs=pd.DataFrame(index=pd.Index([], dtype=str))).write_h5ad(path)
    elif ftype in ("csv", "tsv"):
        pd.DataFrame({"id": []}).to_csv(path, index=False, sep="," if ftype == "csv" else "\t")
    elif ftype == "parquet":
        pd.DataFrame({"id": pd.Series([], dtype=int)}).to_parquet(path)
    elif ftype == "jsonl":
        path.write_text("\n")
    else:
        path.write_text("[]")
    nonempty = fmt({"type": ftype, "min_rows": 1}, fid="file_test")
    with pytest.raises(FormatError, match=rf"items.{ftype} \(file_test\): has 0 \w+.*at least 1 \(min_rows\)"):
        nonempty.validate(path)
    fmt({"type": ftype}, fid="file_test").validate(path)  # without min_rows an empty file is valid


def test_min_rows_passes_enough_rows(tmp_path):
    path = tmp_path / "items.csv"
    pd.DataFrame({"id": [1, 2]}).to_csv(path, index=False)
    fmt({"type": "csv", "min_rows": 2}, fid="file_test").validate(path)
    with pytest.raises(FormatError, match="has 2 rows; the format asks for at least 3"):
        fmt({"type": "csv", "min_rows": 3}, fid="file_test").validate(path)
    h5ad = write_h5ad(tmp_path / "p.h5ad", np.ones((2, 3)))
    fmt({**PREDICTION, "min_rows": 1}).validate(h5ad)


@pytest.mark.parametrize("value", [-1, 1.5, "one", True])
def test_min_rows_must_be_a_count(value):
    with pytest.raises(FormatError, match=r"api/x.yaml: info.format.min_rows: expected a non-negative integer"):
        fmt({"type": "csv", "min_rows": value})


def test_an_unreadable_file_of_a_shape_rule_is_a_problem_not_a_crash(tmp_path, context):
    """A corrupt other file (e.g. a truncated test.h5ad) makes the rule fail with its name, not raise OSError."""
    path = write_h5ad(tmp_path / "p.h5ad", np.ones((2, 3)))
    test = context["file_test"]
    test.write_bytes(test.read_bytes()[:200])
    with pytest.raises(FormatError, match=r"shape rule obs_names ~ file_test:obs_names: cannot read .*test.h5ad"):
        fmt(PREDICTION).validate(path, context)


def test_a_dataset_label_longer_than_a_table_header_is_invalid(tmp_path):
    spec = {"type": "h5ad", "uns": [{"name": "dataset_id", "type": "string"}, {"name": "dataset_name", "type": "string"}]}
    short = write_h5ad(tmp_path / "short.h5ad", None, uns={"dataset_id": "d", "dataset_name": "K562 DE"})
    fmt(spec, "file_train").validate(short)
    long_name = "K562 genome-wide: differential expression of gene clusters"
    long = write_h5ad(tmp_path / "long.h5ad", None, uns={"dataset_id": "d", "dataset_name": long_name})
    with pytest.raises(FormatError, match=r"long.h5ad.*uns\['dataset_name'\] is the dataset's label .*58 characters.*at most 30"):
        fmt(spec, "file_train").validate(long)


@pytest.fixture()
def reads(monkeypatch):
    """The files ``validate`` reads as the file it checks (not those its rules compare), in order."""
    seen = []
    real = formats.load_file

    def counting(path, ftype):
        if path.name not in ("test.h5ad", "genes.csv"):
            seen.append(path.name)
        return real(path, ftype)

    monkeypatch.setattr(formats, "load_file", counting)
    return seen


def test_a_file_that_passed_is_not_read_again(tmp_path, context, reads):
    path = write_h5ad(tmp_path / "p.h5ad", np.ones((2, 3)))
    fmt(PREDICTION).validate(path, context)
    # Another format object with the same spec accepts the same files: nothing is read again.
    fmt(PREDICTION).validate(path, context)
    fmt(PREDICTION).validate(path, {"file_test": context["file_test"]})
    assert reads == ["p.h5ad"]
    # A format with other checks reads it.
    fmt({**PREDICTION, "min_rows": 1}).validate(path, context)
    assert reads == ["p.h5ad", "p.h5ad"]


def _rewrite_and_expect_refusal(path, context):
    """Rewrite ``path`` without its dataset_id: validating it again must read it and refuse it."""
    time.sleep(0.01)  # a new mtime even where the clock is coarse
    write_h5ad(path, np.ones((2, 3)), uns={"other": "d"})
    with pytest.raises(FormatError, match=rf"{path.name} .*required uns\['dataset_id'\] is missing"):
        fmt(PREDICTION).validate(path, context)


def test_a_rewritten_file_is_checked_again(tmp_path, context, reads):
    path = write_h5ad(tmp_path / "p.h5ad", np.ones((2, 3)))
    fmt(PREDICTION).validate(path, context)
    _rewrite_and_expect_refusal(path, context)
    assert reads == ["p.h5ad", "p.h5ad"]


def test_a_changed_file_of_a_rule_is_compared_again(tmp_path, context, reads):
    path = write_h5ad(tmp_path / "p.h5ad", np.ones((2, 3)))
    fmt(PREDICTION).validate(path, context)
    ad.AnnData(obs=pd.DataFrame(index=["b", "a"])).write_h5ad(context["file_test"])
    with pytest.raises(FormatError, match="not in the order of file_test's obs_names"):
        fmt(PREDICTION).validate(path, context)
    # The rule's file gone: the rule fails instead of being passed by memory.
    context["file_test"].unlink()
    with pytest.raises(FormatError, match="cannot read"):
        fmt(PREDICTION).validate(path, context)
    assert reads == ["p.h5ad"] * 3
    # Without the broken rule's file, every check left has passed before: nothing is read.
    fmt(PREDICTION).validate(path, {"file_genes": context["file_genes"]})
    assert reads == ["p.h5ad"] * 3


def test_a_renamed_or_linked_file_keeps_what_it_passed_and_a_copy_does_not(tmp_path, context, reads):
    path = write_h5ad(tmp_path / "p.h5ad", np.ones((2, 3)))
    fmt(PREDICTION).validate(path, context)
    published = tmp_path / "published.h5ad"
    os.replace(path, published)  # as an output is published
    os.link(published, tmp_path / "staged.h5ad")  # as an input is staged
    fmt(PREDICTION).validate(published, context)
    fmt(PREDICTION).validate(tmp_path / "staged.h5ad", context)
    assert reads == ["p.h5ad"]
    copy = tmp_path / "copy.h5ad"
    shutil.copyfile(published, copy)
    fmt(PREDICTION).validate(copy, context)
    assert reads == ["p.h5ad", "copy.h5ad"]


def test_a_noted_copy_passes_what_its_original_passed_until_it_is_edited(tmp_path, context, reads):
    path = write_h5ad(tmp_path / "p.h5ad", np.ones((2, 3)))
    fmt(PREDICTION).validate(path, context)
    copy = tmp_path / "published.h5ad"
    shutil.copyfile(path, copy)
    formats.note_copy(path, copy)  # as the harness publishes an output
    fmt(PREDICTION).validate(copy, context)
    assert reads == ["p.h5ad"]
    # A rule compared against a noted copy of its file is the rule already passed.
    test_copy = tmp_path / "test_published.h5ad"
    shutil.copyfile(context["file_test"], test_copy)
    formats.note_copy(context["file_test"], test_copy)
    fmt(PREDICTION).validate(copy, {**context, "file_test": test_copy})
    assert reads == ["p.h5ad"]
    # Edited afterwards, the copy is a file of its own: read, and its problem found.
    _rewrite_and_expect_refusal(copy, context)
    assert reads == ["p.h5ad", "published.h5ad"]


def test_jobs_validating_one_file_at_once_read_it_once(tmp_path, context, monkeypatch):
    path = write_h5ad(tmp_path / "p.h5ad", np.ones((2, 3)))
    loaded = []
    real = formats.load_file

    def slow(p, ftype):
        loaded.append(p.name)
        time.sleep(0.2)  # long enough for every thread to arrive while the first reads
        return real(p, ftype)

    monkeypatch.setattr(formats, "load_file", slow)
    threads = [threading.Thread(target=fmt(PREDICTION).validate, args=(path, context)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loaded.count("p.h5ad") == 1


def test_the_file_of_a_rule_is_read_once_for_many_files(tmp_path, context, monkeypatch):
    loaded = []
    real = formats.load_file
    monkeypatch.setattr(formats, "load_file", lambda path, ftype: loaded.append(path.name) or real(path, ftype))
    # Of an h5ad file of a rule, only the element compared is read.
    real_element = formats.read_h5ad_attribute
    monkeypatch.setattr(formats, "read_h5ad_attribute", lambda path, *a, **k: loaded.append(path.name) or real_element(path, *a, **k))
    for name in ("p1.h5ad", "p2.h5ad", "p3.h5ad"):
        fmt(PREDICTION).validate(write_h5ad(tmp_path / name, np.ones((2, 3))), context)
    assert sorted(loaded) == ["genes.csv", "p1.h5ad", "p2.h5ad", "p3.h5ad", "test.h5ad"]
    # A changed rule file is read again, and its new values are the ones compared.
    ad.AnnData(obs=pd.DataFrame(index=["a", "b", "c"])).write_h5ad(context["file_test"])
    with pytest.raises(FormatError, match="obs_names has 2 entries but file_test's obs_names has 3"):
        fmt(PREDICTION).validate(tmp_path / "p1.h5ad", context)
    assert loaded.count("test.h5ad") == 2


def test_a_few_long_strings_are_validated_as_objects_not_as_a_fixed_width_array(tmp_path):
    """One 200 kB text among 400 short ones: as a fixed-width array of the widest string, the column
    alone would take 400 x 200,000 x 4 bytes (320 MB); as Python objects, a few hundred kB."""
    import tracemalloc

    spec = {"type": "h5ad", "obs": [{"name": "text", "type": "string"}],
            "uns": [{"name": "names", "type": "string"}]}
    texts = [f"short text {i}" for i in range(400)]
    texts[0] = "x" * 200_000
    adata = ad.AnnData(obs=pd.DataFrame({"text": pd.Categorical(texts)}, index=[f"i{i}" for i in range(400)]),
                       uns={"names": texts})
    path = tmp_path / "long.h5ad"
    adata.write_h5ad(path)
    tracemalloc.start()
    try:
        fmt(spec).validate(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2**20, f"validating took {peak / 2**20:.0f} MB"
