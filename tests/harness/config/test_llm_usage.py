"""The ``llm_usage`` record: its checks, its reading from an output, and its slot type in file formats."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest

from openpert.config.formats import FileFormat, FormatError
from openpert.config.llm_usage import USAGE_KEYS, read_usage, usage_problems
from pertsci.llm_usage import USAGE_KEYS as WRITTEN_KEYS


def record(**changes) -> dict:
    base = {"questions": 10, "samples": 30, "abstentions": 4, "fallbacks": 1, "prompts": 25, "generated": 20,
            "cache_hits": 5, "requests": 21, "retries": 1, "prompt_tokens": 9000, "completion_tokens": 700, "unmetered": 0,
            "failed": 2, "context_window": 4096}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def test_the_harness_reads_the_keys_the_components_write():
    # Two rooms that may not import each other agree on one contract.
    assert set(USAGE_KEYS) == set(WRITTEN_KEYS)


def test_a_valid_record_has_no_problem():
    assert usage_problems(record()) == []
    assert usage_problems({k: np.int64(v) for k, v in record().items()}) == []


@pytest.mark.parametrize(("value", "expected"), [
    ("10 questions", "should be a mapping of counts, found str"),
    (record(unmetered=None), "lacks unmetered"),
    (record(extra=3), "unknown keys extra"),
    (record(samples=-1), "['samples'] should be a non-negative integer, found -1"),
    (record(prompt_tokens=1.5), "['prompt_tokens'] should be a non-negative integer, found 1.5"),
    (record(retries=True), "['retries'] should be a non-negative integer, found True"),
    (record(abstentions=31), "abstentions (31) exceeds samples (30)"),
    (record(fallbacks=11), "fallbacks (11) exceeds questions (10)"),
    (record(cache_hits=26), "cache_hits (26) exceeds prompts (25)"),
    (record(failed=None), "lacks failed"),
    (record(failed=26), "failed (26) exceeds prompts (25)"),
    (record(requests=0), "2 failed prompts without any request"),
    (record(failed=0), "a context window (4096) is stated only by refused prompts, and failed is 0"),
])
def test_malformed_records_are_named(value, expected):
    problems = usage_problems(value)
    assert any(expected in p for p in problems), problems


def test_read_usage_reads_only_its_group_and_names_the_file(tmp_path):
    good = tmp_path / "good.h5ad"
    ad.AnnData(obs=pd.DataFrame(index=["a"]), uns={"llm_usage": record()}).write_h5ad(good)
    assert read_usage(good) == record()
    none = tmp_path / "none.h5ad"
    ad.AnnData(obs=pd.DataFrame(index=["a"])).write_h5ad(none)
    assert read_usage(none) is None
    bad = tmp_path / "bad.h5ad"
    ad.AnnData(obs=pd.DataFrame(index=["a"]), uns={"llm_usage": record(fallbacks=11)}).write_h5ad(bad)
    with pytest.raises(ValueError, match=r"bad.h5ad: uns\['llm_usage'\]: fallbacks \(11\) exceeds questions"):
        read_usage(bad)
    array = tmp_path / "array.h5ad"
    ad.AnnData(obs=pd.DataFrame(index=["a"]), uns={"llm_usage": record(samples=np.arange(30))}).write_h5ad(array)
    with pytest.raises(ValueError, match=r"array.h5ad: uns\['llm_usage'\] entries must be single counts, not samples"):
        read_usage(array)
    flat = tmp_path / "flat.h5ad"
    ad.AnnData(obs=pd.DataFrame(index=["a"]), uns={"llm_usage": "lots"}).write_h5ad(flat)
    with pytest.raises(ValueError, match=r"flat.h5ad: uns\['llm_usage'\] should be a mapping"):
        read_usage(flat)


def test_a_format_slot_of_type_llm_usage_fails_a_malformed_output(tmp_path):
    spec = {"type": "h5ad", "uns": [{"name": "dataset_id", "type": "string"},
                                    {"name": "llm_usage", "type": "llm_usage", "required": False}]}
    fmt = FileFormat.from_spec(spec, source="api/file_prediction.yaml: info.format", format_id="file_prediction")
    for name, uns in (("absent", {}), ("valid", {"llm_usage": record()})):
        path = tmp_path / f"{name}.h5ad"
        ad.AnnData(obs=pd.DataFrame(index=["a"]), uns={"dataset_id": "d", **uns}).write_h5ad(path)
        fmt.validate(path)
    path = tmp_path / "bad.h5ad"
    ad.AnnData(obs=pd.DataFrame(index=["a"]), uns={"dataset_id": "d", "llm_usage": record(abstentions=99)}).write_h5ad(path)
    with pytest.raises(FormatError, match=r"bad.h5ad \(file_prediction\): uns\['llm_usage'\]: abstentions \(99\) exceeds samples"):
        fmt.validate(path)
