"""Timings of openpert.results.resampling at benchmark-sized inputs.

Run with ``PYTHONPATH=common python benchmarks/statistics_speed.py``.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
from figures import write_figures

from openpert.results.resampling import (
    bootstrap_ci,
    bootstrap_ci_matrix,
    compare_to_best,
    paired_permutation_test,
    regression_with_ci,
)

TIMINGS_MS: dict[str, float] = {}


def _time(label: str, func, repeat: int = 3) -> None:
    best = min(_once(func) for _ in range(repeat))
    TIMINGS_MS[label] = best * 1e3
    print(f"{label:55s} {best * 1e3:9.1f} ms")


def _once(func) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def main() -> None:
    rng = np.random.default_rng(0)
    for n in (100, 1_000, 20_000):
        x = rng.normal(size=n)
        y = x + rng.normal(size=n)
        _time(f"bootstrap_ci n={n} B=1000", lambda: bootstrap_ci(x))
        _time(f"paired_permutation_test n={n} P=10000", lambda: paired_permutation_test(x, y))
        _time(f"regression_with_ci n={n} B=1000", lambda: regression_with_ci(x, y))
    matrix = rng.normal(size=(2_000, 10))
    _time("bootstrap_ci_matrix 2000 items x 10 columns B=1000", lambda: bootstrap_ci_matrix(matrix))
    table = pd.DataFrame(rng.normal(size=(500, 20)), columns=[f"m{i}" for i in range(20)])
    _time("compare_to_best 500 items x 20 methods P=10000", lambda: compare_to_best(table))
    print(f"figures: {write_figures('statistics_speed', {f'{k} (ms)': v for k, v in TIMINGS_MS.items()})}")


if __name__ == "__main__":
    main()
