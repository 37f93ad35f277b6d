"""Per-item metric values of a run, kept beside ``results.json`` so that two runs can be paired item by item.

``results.json`` holds each score's mean; comparing two runs needs the values it is the mean of.
``item_scores.csv.gz`` has one row per (dataset, method, metric, item): the metric's value on that
item (a seeded component's value averaged over its seeds, as the bootstrap intervals use it).
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

#: The file's name in a task's results folder.
ITEM_SCORES = "item_scores.csv.gz"
COLUMNS = ["dataset_id", "method_id", "metric_id", "item", "value"]


class ItemScoresError(ValueError):
    """An item scores file that cannot be read; the message names the file and the problem."""


def item_mean(series: Sequence[pd.Series]) -> pd.Series:
    """The item-by-item mean of a seeded component's per-item values (one run's values as they are)."""
    return series[0] if len(series) == 1 else pd.concat(series, axis=1).mean(axis=1)


def write_item_scores(path: Path, items: Mapping[tuple[str, str, str], pd.Series]) -> Path:
    """Write per-item values to ``path`` (gzip-compressed CSV, byte-identical for identical input).

    Parameters
    ----------
    path
        The file to write.
    items
        ``(dataset_id, method_id, metric_id) -> values indexed by item``.

    Returns
    -------
    Path
        ``path``: one row per item of each key (columns :data:`COLUMNS`), sorted by key and then
        item, NaN values dropped.
    """
    frames = []
    for (dataset_id, method_id, metric_id), values in sorted(items.items()):
        values = pd.to_numeric(pd.Series(values), errors="coerce").dropna()
        frames.append(pd.DataFrame({"dataset_id": dataset_id, "method_id": method_id, "metric_id": metric_id,
                                    "item": values.index.astype(str), "value": values.to_numpy(dtype=float)}))
    if not frames:
        table = pd.DataFrame({c: pd.Series(dtype=float if c == "value" else object) for c in COLUMNS})
    else:
        table = pd.concat(frames, ignore_index=True)
    text = table.to_csv(index=False, float_format="%.17g")
    # mtime=0: the same values give the same bytes, so archived copies compare by checksum.
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz:
        gz.write(text.encode())
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(buffer.getvalue())
    tmp.replace(path)
    return path


def read_item_scores(path: Path) -> dict[tuple[str, str, str], pd.Series]:
    """Read a file written by :func:`write_item_scores`.

    Parameters
    ----------
    path
        The ``item_scores.csv.gz`` file.

    Returns
    -------
    dict
        ``(dataset_id, method_id, metric_id) -> float values indexed by item`` (item ids as text).

    Raises
    ------
    ItemScoresError
        When the file cannot be read, lacks a column, or repeats an item of a key.
    """
    try:
        # round_trip: the default parser may be an ulp off, and paired differences of 0 must stay 0.
        table = pd.read_csv(path, dtype={"dataset_id": str, "method_id": str, "metric_id": str, "item": str},
                            float_precision="round_trip")
    except (OSError, EOFError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise ItemScoresError(f"{path}: not a readable item scores file ({err})") from None
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise ItemScoresError(f"{path}: missing column(s) {', '.join(missing)}")
    values = pd.to_numeric(table["value"], errors="coerce")
    if values.isna().any():
        row = int(np.flatnonzero(values.isna().to_numpy())[0])
        raise ItemScoresError(f"{path}: row {row + 2} has a value that is not a number: {table['value'].iloc[row]!r}")
    table = table.assign(value=values.astype(float))
    if table.duplicated(["dataset_id", "method_id", "metric_id", "item"]).any():
        first = table[table.duplicated(["dataset_id", "method_id", "metric_id", "item"])].iloc[0]
        raise ItemScoresError(f"{path}: item {first['item']!r} appears twice for "
                              f"{first['dataset_id']}/{first['method_id']}/{first['metric_id']}")
    return {key: group.set_index("item")["value"]
            for key, group in table.groupby(["dataset_id", "method_id", "metric_id"], sort=True)}
