"""The Task B file of the benchmark's species, made from the original repository's ``TASK-B.jsonl``.

BIOME-Bench publishes its Task B items of every species in one file, ``data/TASK-B.jsonl``
(human, mouse and rat). The benchmark reads those of human and mouse: the file
``biome_bench/task_b_hsa_mmu.jsonl`` is the original's rows whose ``species`` is one of them, in
their order, each written as Python's ``json.dumps`` writes it (non-ASCII characters escaped).
The data manifest names :func:`task_b_rows` as the way to make it (``docs/data.md``, ``derive``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from biome_bench_lib.items import read_jsonl

__all__ = ["task_b_rows"]


def task_b_rows(sources: dict[str, Path], output: Path, *, species: Sequence[str]) -> None:
    """Write the rows of the original Task B file whose species is one of ``species``.

    Parameters
    ----------
    sources
        ``{"task_b": <the original TASK-B.jsonl>}``.
    output
        The file to write.
    species
        KEGG organism codes to keep (``hsa``, ``mmu``, ``rno``).

    Raises
    ------
    ValueError
        Naming the file: a line that is not a JSON object with a ``species``, or no row kept.
    """
    original = Path(sources["task_b"])
    wanted = set(species)
    kept = []
    for number, record in enumerate(read_jsonl(original), start=1):
        if "species" not in record:
            raise ValueError(f"{original}: item {number} is not a Task B item (no species)")
        if record["species"] in wanted:
            kept.append(json.dumps(record) + "\n")
    if not kept:
        raise ValueError(f"{original}: no Task B item of species {', '.join(sorted(wanted))}")
    with open(output, "w", encoding="utf-8") as fh:
        fh.writelines(kept)
