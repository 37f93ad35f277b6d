"""Per-item values beside results.json: written reproducibly, read back exactly, bad files refused."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from openpert.results.item_scores import ItemScoresError, read_item_scores, write_item_scores


def _items() -> dict[tuple[str, str, str], pd.Series]:
    return {("k562", "mlp", "auroc"): pd.Series([0.1, 1 / 3, np.nan], index=["TP53", "MYC", "GATA1"]),
            ("k562", "gat", "auroc"): pd.Series([0.25], index=[17])}


def test_values_round_trip_exactly_and_bytes_are_reproducible(tmp_path: Path) -> None:
    a, b = write_item_scores(tmp_path / "a.csv.gz", _items()), write_item_scores(tmp_path / "b.csv.gz", _items())
    assert a.read_bytes() == b.read_bytes()
    back = read_item_scores(a)
    assert list(back) == [("k562", "gat", "auroc"), ("k562", "mlp", "auroc")]
    mlp = back["k562", "mlp", "auroc"]
    assert mlp.index.tolist() == ["TP53", "MYC"] and mlp.tolist() == [0.1, 1 / 3]  # NaN dropped, 1/3 exact
    assert back["k562", "gat", "auroc"].index.tolist() == ["17"]


def test_empty_items_write_a_readable_file(tmp_path: Path) -> None:
    assert read_item_scores(write_item_scores(tmp_path / "e.csv.gz", {})) == {}


@pytest.mark.parametrize(("text", "problem"), [
    ("dataset_id,method_id,item,value\nk,m,a,1\n", "missing column(s) metric_id"),
    ("dataset_id,method_id,metric_id,item,value\nk,m,x,a,high\n", "row 2 has a value that is not a number"),
    ("dataset_id,method_id,metric_id,item,value\nk,m,x,a,1\nk,m,x,a,2\n", "item 'a' appears twice for k/m/x"),
])
def test_bad_files_are_refused_naming_the_problem(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "bad.csv.gz"
    path.write_bytes(gzip.compress(text.encode()))
    with pytest.raises(ItemScoresError, match=f"bad.csv.gz: {problem.replace('(', '.').replace(')', '.')}"):
        read_item_scores(path)


def test_a_file_that_is_not_gzip_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "item_scores.csv.gz"
    path.write_bytes(b"\x1f\x8b broken")
    with pytest.raises(ItemScoresError, match="not a readable item scores file"):
        read_item_scores(path)
