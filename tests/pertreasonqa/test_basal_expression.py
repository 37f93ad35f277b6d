"""Basal expression of the cells from the Human Protein Atlas v20 NX tables."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest
from pertreasonqa_lib.basal_expression import (
    BLOOD_FILE,
    fill_from_symbol_table,
    hpa_profiles,
    load_basal_expression,
    load_blood_basal,
    log1p_nx,
)
from pertreasonqa_lib.cell_state import VALUE_GRID
from pertreasonqa_lib.signed_graph import load_signed_graph
from project_paths import SHARED_DATA

from pertsci import op3_simulation as op3_sim

needs_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data not found at {SHARED_DATA}")


def test_hpa_profiles_average_columns_and_map_symbols(tmp_path):
    (tmp_path / "perturbqa").mkdir()
    (tmp_path / "perturbqa" / "k562_gw_mapping_full.json").write_text(json.dumps({"GA": "ENSG01", "GB": "ENSG02"}))
    pd.DataFrame({"GeneID": ["ENSG01", "ENSG02", "ENSG03"], "x1": [1.0, 2.0, 3.0], "x2": [3.0, 4.0, 5.0], "y": [0.0, 1.0, 9.0]}
                 ).to_csv(tmp_path / "hpa.tsv", sep="\t", index=False)
    by_symbol, all_genes, stats = hpa_profiles("hpa.tsv", {"X": ["x1", "x2"], "Y": ["y"]}, tmp_path)
    assert all_genes.loc["ENSG03"].tolist() == [4.0, 9.0]  # every gene, mapped or not
    assert by_symbol.to_dict("index") == {"GA": {"X": 2.0, "Y": 0.0}, "GB": {"X": 3.0, "Y": 1.0}}
    assert stats == {"n_hpa_genes": 3, "n_mapped": 2}
    with pytest.raises(ValueError, match=r"hpa.tsv: missing columns \['z'\]"):
        hpa_profiles("hpa.tsv", {"Z": ["z"]}, tmp_path)


@needs_data
def test_load_basal_expression_of_the_cell_lines():
    basal, profile, stats = load_basal_expression(SHARED_DATA)
    # the K562 screen's map names 8,163 HPA genes; HGNC's genome-wide table names the rest but 341
    assert stats["n_hpa_genes"] == 19670 and stats["n_mapped"] == 19329 and stats["n_filled_K562"] > 35000
    assert list(basal.columns) == ["K562", "RPE1"] and len(profile) == 19670
    # every graph gene with a value in the shared data has one: K562 from HPA or ENCODE, RPE1 from HPA only
    graph_genes = load_signed_graph(SHARED_DATA / "knowledge_graphs").nodes
    covered = basal.reindex(graph_genes).notna().sum()
    assert covered["RPE1"] == 8690 and covered["K562"] > 8700  # of 9,186 (4,306 with the K562 map alone)


def test_fill_from_symbol_table_quantile_maps_onto_the_reference_scale():
    rng = np.random.default_rng(0)
    genes = [f"G{i}" for i in range(200)]
    ref = pd.DataFrame({"C": np.sort(rng.gamma(2.0, 3.0, 200)), "D": 1.0}, index=genes)
    other = pd.Series(np.sort(rng.gamma(1.0, 50.0, 200)) ** 2, index=genes)  # another scale, same order
    other["NEW_LOW"], other["NEW_HIGH"], other["NEW_MID"] = -1.0, 1e9, other["G100"]
    filled, n = fill_from_symbol_table(ref, "C", other)
    assert n == 3 and np.isnan(filled.loc["NEW_MID", "D"])
    assert filled.loc["NEW_LOW", "C"] == ref["C"].min() and filled.loc["NEW_HIGH", "C"] == ref["C"].max()  # clamped
    assert filled.loc["NEW_MID", "C"] == pytest.approx(ref.loc["G100", "C"])  # same rank, same value
    assert filled.loc[genes, "C"].equals(ref["C"])  # measured genes untouched
    with pytest.raises(ValueError, match="too few"):
        fill_from_symbol_table(ref.iloc[:50], "C", other)


@needs_data
def test_blood_basal_averages_the_simulators_columns():
    by_symbol, all_genes, stats = load_blood_basal(SHARED_DATA)
    assert list(by_symbol.columns) == op3_sim.CELL_TYPES and stats["n_mapped"] > 5000
    with gzip.open(SHARED_DATA / BLOOD_FILE, "rt") as fh:
        raw = pd.read_csv(fh, sep="\t").set_index("GeneID")
    gene = raw.index[raw["naive_B_cell"] != raw["memory_B_cell"]][0]
    assert all_genes.loc[gene, "B cells"] == pytest.approx(raw.loc[gene, ["naive_B_cell", "memory_B_cell"]].mean())


def test_log1p_nx_is_on_the_grid_and_ignores_last_bits():
    nx = pd.DataFrame({"K562": [0.0, 0.1, 12.3, 250.7, np.nan], "RPE1": [1.0, 2.5, 3.3, 4.4, 5.5]},
                      index=list("abcde"))
    out = log1p_nx(nx)
    assert out.index.equals(nx.index) and out.columns.equals(nx.columns)
    finite = out.to_numpy()[np.isfinite(out.to_numpy())]
    assert np.array_equal(finite / VALUE_GRID, np.rint(finite / VALUE_GRID))
    assert np.allclose(out, np.log1p(nx), atol=VALUE_GRID / 2, equal_nan=True)
    # last-bit differences of log1p's input (as another CPU's log1p would make in its output) vanish
    nudged = pd.DataFrame(np.nextafter(nx.to_numpy(), np.inf), index=nx.index, columns=nx.columns)
    assert log1p_nx(nudged).equals(out)
