"""Tests of biome_bench_lib.metric_averages: means of per-item values and the paper's normalised average."""

from __future__ import annotations

import numpy as np
import pytest
from biome_bench_lib.metric_averages import finite_mean, normalised_average


@pytest.mark.parametrize("row, avg", [
    ((47.43, 43.72, 3.12, 3.31, 3.97, 4.64, 78.73, 42.38), 64.13),   # Qwen3-14B, Table 2
    ((54.66, 50.70, 3.68, 4.58, 4.69, 4.62, 71.38, 37.49), 70.70),   # GPT-5.2
    ((54.68, 50.41, 4.02, 4.48, 4.76, 4.83, 77.36, 44.45), 73.59),   # S1-Base-671B
])
def test_normalised_average_reproduces_table_2(row, avg):
    acc, f1, pc, cr, fa, ha, sim, cov = row
    value = normalised_average(accuracy=acc / 100, macro_f1=f1 / 100, similarity=sim / 100, coverage=cov / 100,
                               judge={"phenotype_coverage": pc, "causal_reasoning": cr, "factuality": fa, "hallucination": ha})
    assert value == pytest.approx(avg, abs=0.006)


def test_normalised_average_leaves_out_missing_metrics():
    assert normalised_average(accuracy=None, macro_f1=float("nan"), similarity=0.5, judge={"a": 5.0}) == pytest.approx(75)
    assert np.isnan(normalised_average())


def test_finite_mean_leaves_out_items_without_a_value():
    assert finite_mean([1.0, float("nan"), 3.0]) == 2.0
    assert np.isnan(finite_mean([float("nan")])) and np.isnan(finite_mean([]))
