"""What files declare, read before their contents; refusals and bounded reads of files too large to read here."""

from __future__ import annotations

import zlib

import anndata as ad
import h5py
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from openpert.config import declared as declared_mod
from openpert.config import formats
from openpert.config.declared import RefusedFile, declared_size
from openpert.config.formats import FileFormat, FormatError, validation_memory_mb
from openpert.results.collect import read_score

PREDICTION = {
    "type": "h5ad",
    "layers": [{"name": "prediction", "type": "double"}],
    "uns": [{"name": "dataset_id", "type": "string"}],
    "matches": [{"this": "obs_names", "file": "file_test", "that": "obs_names"},
                {"this": "var_names", "file": "file_train", "that": "var_names"}],
}
TABLE = {"type": "parquet", "columns": [{"name": "value", "type": "integer"}]}


def fmt(spec, fid="file_prediction") -> FileFormat:
    return FileFormat.from_spec(spec, source="api/x.yaml: info.format", format_id=fid)


def prediction(path, n_obs=3, n_vars=4):
    ad.AnnData(obs=pd.DataFrame(index=[f"r{i}" for i in range(n_obs)]), var=pd.DataFrame(index=[f"g{j}" for j in range(n_vars)]),
               layers={"prediction": np.zeros((n_obs, n_vars))}, uns={"dataset_id": "d"}).write_h5ad(path)
    return path


def add_layer(path, name, shape, **kwargs):
    """A layer declared with ``shape`` and nothing written (HDF5 returns its fill value)."""
    with h5py.File(path, "r+") as fh:
        layer = fh["layers"].create_dataset(name, shape=shape, dtype="f8", chunks=(1, min(shape[1], 1 << 16)), **kwargs)
        layer.attrs["encoding-type"], layer.attrs["encoding-version"] = "array", "0.2.0"
    return path


def add_inflating_chunk(path, inflated_bytes):
    """A 3 x 4 float64 obsm entry (one 96-byte chunk) whose stored chunk inflates to ``inflated_bytes``."""
    with h5py.File(path, "r+") as fh:
        entry = fh["obsm"].create_dataset("lie", shape=(3, 4), dtype="f8", chunks=(3, 4), compression="gzip")
        entry.attrs["encoding-type"], entry.attrs["encoding-version"] = "array", "0.2.0"
        packer, block = zlib.compressobj(1), bytes(16 * 2**20)
        data = b"".join(packer.compress(block) for _ in range(inflated_bytes // len(block))) + packer.flush()
        entry.id.write_direct_chunk((0, 0), data)
    return path


@pytest.fixture()
def context(tmp_path):
    test = tmp_path / "test.h5ad"
    ad.AnnData(obs=pd.DataFrame(index=["r0", "r1", "r2"])).write_h5ad(test)
    train = tmp_path / "train.h5ad"
    ad.AnnData(X=np.ones((5, 4)), var=pd.DataFrame(index=[f"g{j}" for j in range(4)])).write_h5ad(train)
    return {"file_test": test, "file_train": train}


@pytest.fixture()
def unread(monkeypatch):
    """Fail the test if this process reads a whole file."""
    def refuse(path, ftype):
        raise AssertionError(f"{path} was read in the harness's process")

    monkeypatch.setattr(formats, "load_file", refuse)


# --- what files declare ---------------------------------------------------------------------------
def test_a_declared_layer_counts_in_full_and_names_itself(tmp_path):
    path = add_layer(prediction(tmp_path / "p.h5ad"), "extra", (3, 40_000_000), fillvalue=0.5)
    got = declared_size(path, "h5ad")
    assert got.nbytes >= 3 * 40_000_000 * 8 and got.on_disk < 100_000
    assert got.largest == "layers/extra: 3 x 40,000,000 float64 (916 MB)"
    assert (got.n_obs, got.n_vars, got.n_rows) == (3, 4, 3)
    assert got.elements["obs/_index"].nbytes == 3 * declared_mod.STRING_BYTES
    assert "layers/extra" in got.elements and not [p for p in got.elements if "@" in p]


def test_a_dataset_reached_by_many_links_counts_once_per_link(tmp_path):
    path = prediction(tmp_path / "p.h5ad")
    one = declared_size(path, "h5ad").nbytes
    with h5py.File(path, "r+") as fh:
        fh["uns"].create_dataset("block", data=np.zeros(2**17))  # 1 MB
        for i in range(20):
            fh["uns"][f"again{i}"] = fh["uns/block"]  # a hard link: anndata reads it once per link
    assert declared_size(path, "h5ad").nbytes - one >= 21 * 2**20


@pytest.mark.parametrize("attack", ["external_link", "external_storage", "cycle", "objects"])
def test_links_out_of_the_file_cycles_and_swarms_of_objects_are_refused(tmp_path, monkeypatch, attack):
    path = prediction(tmp_path / "p.h5ad")
    with h5py.File(path, "r+") as fh:
        if attack == "external_link":
            fh["uns"]["stolen"] = h5py.ExternalLink("/elsewhere/solution.h5ad", "/layers/truth")
        elif attack == "external_storage":
            (tmp_path / "raw.bin").write_bytes(bytes(64))
            fh["uns"].create_dataset("outside", shape=(8,), dtype="f8", external=[(str(tmp_path / "raw.bin"), 0, 64)])
        elif attack == "cycle":
            fh["uns"].create_group("loop")["back"] = h5py.SoftLink("/uns")
        else:
            for i in range(60):
                fh["uns"].create_group(f"g{i}")
            monkeypatch.setattr(declared_mod, "MAX_OBJECTS", 50)
    expected = {"external_link": r"uns/stolen: a link to another file \(/elsewhere/solution.h5ad:/layers/truth\)",
                "external_storage": r"uns/outside: stores its data in another file", "cycle": r"uns/loop/back: .*cycle",
                "objects": r"uns: more than 50 objects"}[attack]
    with pytest.raises(RefusedFile, match=expected):
        declared_size(path, "h5ad")
    with pytest.raises(FormatError, match="refused without reading it: " + expected):
        fmt({"type": "h5ad"}).validate(path)


def test_a_chunk_that_inflates_beyond_its_declared_size_bounds_the_peak(tmp_path):
    """HDF5 inflates a chunk whole, whatever its declared size: the stored size x zlib's ratio bounds it."""
    path = add_inflating_chunk(prediction(tmp_path / "p.h5ad"), 64 * 2**20)
    got = declared_size(path, "h5ad")
    assert got.elements["obsm/lie"].nbytes == 96
    assert got.elements["obsm/lie"].inflation >= 64 * 2**20
    assert got.peak > formats.IN_PROCESS_BYTES / 2


def test_a_parquet_footer_gives_rows_and_column_sizes_but_no_peak(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"value": np.zeros(1000, dtype=np.int64), "name": [f"n{i}" for i in range(1000)]}), path)
    got = declared_size(path, "parquet")
    assert got.n_rows == 1000 and got.nbytes >= 8000 + 1000 * declared_mod.STRING_BYTES
    assert got.largest.startswith("column name: 1,000 strings") and got.peak is None


# --- validation -----------------------------------------------------------------------------------
def test_a_file_beyond_its_inputs_is_refused_unread(tmp_path, context, unread):
    path = add_layer(prediction(tmp_path / "p.h5ad"), "extra", (3, 10_000_000), fillvalue=0.5)
    with pytest.raises(FormatError) as err:
        fmt(PREDICTION).validate(path, context)
    message = str(err.value)
    assert "declares 229 MB of data in" in message and "(largest: layers/extra: 3 x 10,000,000 float64 (229 MB))" in message
    assert ("a file_prediction of these inputs may declare at most 64 MB (4 x the larger of file_test's 3 rows x "
            "file_train's 4 columns x 8 bytes (96 bytes) and file_test's") in message
    assert message.endswith("+ 64 MB): refused without reading it")


def test_a_file_tied_by_its_rows_alone_may_hold_wide_layers(tmp_path, context):
    # A real dataset file: OP3's de_test (255 rows tied to its id_map) holds a dozen layers of
    # 18,211 genes, hundreds of MB; its rows alone say nothing of how much it may hold.
    path = prediction(tmp_path / "p.h5ad")
    with h5py.File(path, "r+") as fh:  # 72 MB declared, a few kB on disk
        wide = fh["obsm"].create_dataset("wide", shape=(3, 3_000_000), dtype="f8", chunks=(1, 1 << 16), fillvalue=0.5)
        wide.attrs["encoding-type"], wide.attrs["encoding-version"] = "array", "0.2.0"
    rows_only = {"type": "h5ad", "matches": [{"this": "obs_names", "file": "file_test", "that": "obs_names"}]}
    fmt(rows_only, "file_de_test").validate(path, context, memory_mb=1000)
    with pytest.raises(FormatError, match="a file_prediction of these inputs may declare at most 64 MB"):
        fmt(PREDICTION).validate(path, context, memory_mb=1000)


def test_a_file_beyond_its_memory_is_refused_unread(tmp_path, unread):
    path = add_layer(prediction(tmp_path / "p.h5ad"), "extra", (3, 10_000_000), fillvalue=0.5)
    with pytest.raises(FormatError, match=r"reading it may take at most 100 MB \(the memory of its validation\): refused"):
        fmt({"type": "h5ad"}).validate(path, memory_mb=100)


def test_a_rule_reads_only_the_element_it_compares(tmp_path, context, monkeypatch):
    """A training file declaring 229 MB is not read to compare 4 gene names; the prediction is read here."""
    add_layer(context["file_train"], "big", (5, 6_000_000))
    loaded = []
    real = formats.load_file
    monkeypatch.setattr(formats, "load_file", lambda path, ftype: loaded.append(path.name) or real(path, ftype))
    fmt(PREDICTION).validate(prediction(tmp_path / "p.h5ad"), context)
    assert loaded == ["p.h5ad"]


def test_an_inflating_chunk_is_read_in_a_bounded_process(tmp_path, unread):
    """Not in this process (``unread``); within the limit it is valid, beyond it refused, naming the limit."""
    small = add_inflating_chunk(prediction(tmp_path / "small.h5ad"), 160 * 2**20)
    fmt({"type": "h5ad", "layers": [{"name": "prediction", "type": "double"}]}).validate(small, memory_mb=512)
    large = add_inflating_chunk(prediction(tmp_path / "large.h5ad"), 2**29)
    # The reader's resident memory outgrows the limit: it is stopped, and the message names the limit.
    with pytest.raises(FormatError, match=r"large.h5ad \(file_prediction\): reading it needs more than its memory "
                                          r"limit of 64 MB: refused"):
        fmt({"type": "h5ad", "layers": [{"name": "prediction", "type": "double"}]}).validate(large, memory_mb=64)


def test_a_parquet_file_is_read_in_a_bounded_process_and_its_problems_come_back(tmp_path, unread):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"value": [0.5, 1.5]}), path)
    with pytest.raises(FormatError, match=r"t.parquet \(file_table\): columns\['value'\] should hold integers"):
        fmt(TABLE, "file_table").validate(path)
    pq.write_table(pa.table({"value": [1, 2]}), path)
    fmt(TABLE, "file_table").validate(path)


def test_the_validation_memory_is_the_jobs_capped_by_the_environment(monkeypatch):
    monkeypatch.delenv("OPENPERT_VALIDATION_MEMORY_MB", raising=False)
    assert validation_memory_mb(None) == formats.DEFAULT_MEMORY_MB and validation_memory_mb(300) == 300
    monkeypatch.setenv("OPENPERT_VALIDATION_MEMORY_MB", "256")
    assert (validation_memory_mb(None), validation_memory_mb(4096), validation_memory_mb(100)) == (256, 256, 100)
    monkeypatch.setenv("OPENPERT_VALIDATION_MEMORY_MB", "lots")
    with pytest.raises(FormatError, match="expected a number of MB, got 'lots'"):
        validation_memory_mb(None)


def test_a_value_quoted_in_a_message_is_cut(tmp_path):
    path = prediction(tmp_path / "p.h5ad")
    with h5py.File(path, "r+") as fh:
        name = fh["uns"].create_dataset("dataset_name", data="x" * 100_000)
        name.attrs["encoding-type"], name.attrs["encoding-version"] = "string", "0.2.0"
    with pytest.raises(FormatError) as err:
        fmt({"type": "h5ad", "uns": [{"name": "dataset_name", "type": "string"}]}).validate(path)
    assert "is the dataset's label" in str(err.value) and len(str(err.value)) < len(str(path)) + 2 * formats.PROBLEM_MAX


def test_a_score_file_whose_obs_declares_too_much_is_not_collected(tmp_path):
    path = tmp_path / "score.h5ad"
    ad.AnnData(obs=pd.DataFrame({"rmse": [0.5, 0.25]}, index=["a", "b"]),
               uns={"metric_ids": ["rmse"], "metric_values": [0.375]}).write_h5ad(path)
    raw, items, uns = read_score(path)
    assert raw == {"rmse": 0.375} and list(items["rmse"]) == [0.5, 0.25] and uns["metric_ids"].tolist() == ["rmse"]
    with h5py.File(path, "r+") as fh:
        fh["obs"].create_dataset("padding", shape=(2, 2**26), dtype="f8", chunks=(1, 2**16))
    with pytest.raises(ValueError, match=r"score.h5ad: its obs and uns declare 1.0 GB; the results read at most 64 MB"):
        read_score(path)


def test_what_a_rule_compares_of_a_large_file_is_read_in_a_bounded_process_once(context, monkeypatch):
    from openpert.config import bounded

    asked = []
    real = bounded.attribute_in_bounded_process
    monkeypatch.setattr(bounded, "attribute_in_bounded_process", lambda path, name, **kw: asked.append(name) or real(path, name, **kw))
    monkeypatch.setattr(formats, "IN_PROCESS_BYTES", 1000)  # every element of the training file is "large" here
    train = context["file_train"]
    for _ in range(2):
        assert list(formats.compared_attribute(train, "var_names")) == ["g0", "g1", "g2", "g3"]
    with pytest.raises(KeyError, match="no attribute 'obs:nope' in a h5ad file"):
        formats.compared_attribute(train, "obs:nope")  # an element it does not hold is not read at all
    assert asked == ["var_names"]
