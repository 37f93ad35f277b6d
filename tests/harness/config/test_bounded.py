"""The bounded reader's memory limit: the resident size of the reader, as a job's is limited."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from openpert.config import bounded


def _gene_table(path, n: int):
    pd.DataFrame({"gene": np.char.add("gene_", np.arange(n).astype(str)).astype(object)}).to_parquet(path)
    return path


def test_a_read_that_outgrows_its_memory_is_refused_and_a_small_one_is_answered(tmp_path, monkeypatch):
    # No slack: the limit is the validation's memory alone, counted from what the ready reader holds.
    monkeypatch.setattr(bounded, "SLACK_BYTES", 0)
    small = _gene_table(tmp_path / "small.parquet", 100)
    values = bounded.attribute_in_bounded_process(small, "column:gene", memory_bytes=64 * 2**20)
    assert list(values[:2]) == ["gene_0", "gene_1"] and len(values) == 100
    # Two million strings as Python objects: several times the 64 MB allowed.
    large = _gene_table(tmp_path / "large.parquet", 2_000_000)
    with pytest.raises(bounded.BoundedReadError, match="needs more than its memory limit of 64 MB"):
        bounded.attribute_in_bounded_process(large, "column:gene", memory_bytes=64 * 2**20)
    # The same reader pool answers again after a refusal.
    assert len(bounded.attribute_in_bounded_process(small, "column:gene", memory_bytes=64 * 2**20)) == 100
