"""Where the benchmark scripts of this folder leave their figures: ``benchmarks/results/<name>.json``.

Each script writes one small JSON file (the figures of its last run, with when and under what load
they were measured); ``benchmarks/summary.py`` reads them all and sets each figure against its
target. Figures measured on a machine are data, not source: ``results/`` stays out of git.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().with_name("results")


def write_figures(benchmark: str, figures: dict[str, float], path: str | Path | None = None, **details: Any) -> Path:
    """Write ``figures`` (name -> number) of ``benchmark`` with the machine's state; return the path.

    Parameters
    ----------
    benchmark
        The benchmark's name (the file is ``results/<benchmark>.json`` unless ``path`` is given).
    figures
        The headline numbers, each a plain number.
    path
        Another file to write.
    details
        Anything else worth keeping beside them (settings, per-step tables); must be JSON.
    """
    bad = {name: value for name, value in figures.items() if not isinstance(value, (int, float))}
    if bad:
        raise TypeError(f"{benchmark}: figures must be numbers, got {bad}")
    dest = Path(path) if path is not None else RESULTS / f"{benchmark}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    record = {"benchmark": benchmark, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "host": platform.node(), "cpus": os.cpu_count(), "load_average": os.getloadavg()[0],
              "figures": figures, **details}
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_text(json.dumps(record, indent=1, default=float))
    os.replace(tmp, dest)
    return dest
