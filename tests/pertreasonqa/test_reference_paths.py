"""The whole reference-path pipeline (appendix B.2) on hand-made graphs, genetic and chemical, and on real items.

Every expected value below is worked out by hand in the comments.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from pertreasonqa_lib.basal_expression import load_basal_expression
from pertreasonqa_lib.cell_state import STATE_HIGH, STATE_LOW, STATE_MEDIUM, cell_thresholds
from pertreasonqa_lib.genetic_items import load_perturbqa_items
from pertreasonqa_lib.path_serialisation import paths_from_json
from pertreasonqa_lib.reference_paths import extract_paths, reference_paths_for_items
from pertreasonqa_lib.sign_filters import path_is_reference, predict_from_paths
from pertreasonqa_lib.signed_graph import load_signed_graph
from project_paths import SHARED_DATA
from toy_graphs import drug_graph, graph_of

needs_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data not found at {SHARED_DATA}")









def names(graph, path):
    return [graph.nodes[graph.src[path[0]]]] + [graph.nodes[graph.dst[e]] for e in path]


def test_reference_paths_for_items_end_to_end():
    chain = [("P", 1, "C1"), ("C1", 1, "C2"), ("C2", 1, "C3"), ("C3", 1, "C4"), ("C4", 1, "G4")]
    g = graph_of([("P", 1, "A"), ("A", 1, "G1"), ("P", 1, "B"), ("B", -1, "G2"), ("A", 0, "G3")] + chain)
    basal = pd.DataFrame({"K562": {"P": 5.0, "A": 5.0, "B": 5.0, "G1": 0.0, "G2": 9.0, "G3": 0.0}})
    thresholds = pd.DataFrame({"tau_low": [1.0], "tau_high": [8.0]}, index=["K562"])
    items = pd.DataFrame([
        ("P", "G1", "down"), ("P", "G1", "up"), ("P", "G1", "unchanged"),  # G1 silent
        ("P", "G2", "up"), ("P", "G2", "down"), ("P", "G2", "unchanged"),  # G2 saturated
        ("P", "G3", "up"), ("P", "G3", "down"), ("P", "G3", "unchanged"),  # ambiguous edge
        ("P", "G4", "down"), ("Z", "G1", "down"),  # 5 hops away; perturbation not in the graph
    ], columns=["perturbation", "gene", "label"])
    items["cell"], items["perturbation_type"] = "K562", "CRISPRi"
    out = reference_paths_for_items(items, g, basal, thresholds)
    n_ref = out["n_reference_paths"].tolist()
    # P-A-G1 (+,+): knockdown gives down; the off signal meets a silent G1: unchanged also explained
    # P-B-G2 (+,-): up; the on signal meets a saturated G2: unchanged explained (ceiling)
    # P-A-G3 (+,0): both signs within budget 1; G3 silent and {0,1} reachable: unchanged too
    assert n_ref == [1, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0]
    assert out["n_candidate_paths"].tolist() == [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0]
    assert json.loads(out.loc[0, "reference_paths"]) == [[["P", 1, "A", "OmniPath"], ["A", 1, "G1", "OmniPath"]]]
    assert paths_from_json(out.loc[3, "reference_paths"]) == [[("P", 1, "B"), ("B", -1, "G2")]]
    assert out["gene_state"].tolist()[:4] == [STATE_LOW] * 3 + [STATE_HIGH]


def test_chemical_search_runs_three_hops_from_the_targets_and_prepends_the_drug_edge():
    g = drug_graph()
    basal = np.full(g.n_nodes, np.nan)  # every gene gated alike: the cost follows PPR only
    queries = pd.DataFrame({"perturbation": ["D", "D", "D", "T1"], "gene": ["C", "E", "T1", "E"]})
    res = extract_paths(g, basal, 0.0, queries)
    # D -> C: T2 -> B -> C (2 hops) and T1 -| A -> B -> C (3 hops), each behind its drug edge
    found = sorted(names(g, p) for p in res.paths[0])
    assert found == [["D", "T1", "A", "B", "C"], ["D", "T2", "B", "C"]]
    # D -> E: from T1 it takes four gene-gene hops (over D_max - 1 = 3), so only T2's route remains
    assert [names(g, p) for p in res.paths[1]] == [["D", "T2", "B", "C", "E"]]
    assert res.hop_distance[1] == 4 and res.hop_distance[0] == 3
    # the effect gene is a target: the drug-target edge alone
    assert [names(g, p) for p in res.paths[2]] == [["D", "T1"]] and res.hop_distance[2] == 1
    # the genetic perturbation of T1 keeps D_max = 4 and reaches E
    assert [names(g, p) for p in res.paths[3]] == [["T1", "A", "B", "C", "E"]]
    # every chemical path starts with a drug-target edge, and no other edge is one
    for bag in res.paths[:3]:
        for p in bag:
            assert g.drug_edge[p[0]] and not g.drug_edge[list(p[1:])].any()


def test_chemical_sign_filters_start_from_the_present_compound():
    g = drug_graph()
    items = pd.DataFrame({"cell": ["c", "c", "c_low", "c_high"], "perturbation": "D", "perturbation_type": "chemical",
                          "gene": ["C", "C", "A", "A"], "label": ["up", "down", "unchanged", "unchanged"]},
                         index=["up C", "down C", "unch A low", "unch A hi"])
    # A is medium in cell c (both routes to C stay open), silent in c_low and saturated in c_high
    basal = pd.DataFrame({"c": {"A": 3.0}, "c_low": {"A": 0.0}, "c_high": {"A": 10.0}})
    thresholds = pd.DataFrame({"tau_low": 1.0, "tau_high": 5.0}, index=["c", "c_low", "c_high"])
    out = reference_paths_for_items(items, g, basal, thresholds)
    # D (+1) -| T1 (-1) -| A (+1) -> B -> C: up; D -> T2 -> B -> C: up. Both explain "up", none "down".
    assert out.loc["up C", "n_reference_paths"] == 2 and out.loc["down C", "n_reference_paths"] == 0
    # D -| T1 -| A switches A on (z: 1 -> 0 -> 1): a ceiling effect on a saturated A, not a floor on a silent one
    assert out.loc["unch A hi", "n_reference_paths"] == 1 and out.loc["unch A low", "n_reference_paths"] == 0
    path = paths_from_json(out.loc["unch A hi", "reference_paths"])[0]
    assert path == [("D", -1, "T1"), ("T1", -1, "A")]
    signs = [[t[1] for t in paths_from_json(out.loc["up C", "candidate_paths"])[0]]]
    assert predict_from_paths(signs, "chemical", STATE_MEDIUM)[0] == "up"


@needs_data
def test_real_reference_paths_are_valid():
    """On real K562 items of a few perturbations: reference paths are candidate paths that pass the filters."""
    graph = load_signed_graph(SHARED_DATA / "knowledge_graphs")
    items = load_perturbqa_items("K562", SHARED_DATA)
    basal, profile, _ = load_basal_expression(SHARED_DATA)
    basal, profile = np.log1p(basal), np.log1p(profile)
    thresholds = cell_thresholds(items, basal, profile)
    # tau_low sits where unchanged and changed items separate best; tau_high above it
    assert 0 < thresholds.loc["K562", "tau_low"] < thresholds.loc["K562", "tau_high"]
    out_deg = pd.Series(np.bincount(graph.src, minlength=graph.n_nodes), index=graph.nodes)
    perts = sorted(p for p in items["perturbation"].unique() if out_deg.get(p, 0) > 20)[:4]
    sub = items[items["perturbation"].isin(perts)]
    out = reference_paths_for_items(sub, graph, basal, thresholds)
    assert (out["n_reference_paths"] > 0).any()
    edges = graph.to_frame().set_index(["source", "target"])
    for (_, row), (_, res) in zip(sub.iterrows(), out.iterrows()):
        cands = paths_from_json(res["candidate_paths"])
        refs = paths_from_json(res["reference_paths"])
        assert all(r in cands for r in refs)
        assert len(cands) <= 4
        for path in cands:
            assert 1 <= len(path) <= 4 and path[0][0] == row["perturbation"] and path[-1][2] == row["gene"]
            assert all(path[i][2] == path[i + 1][0] for i in range(len(path) - 1))
            assert all(edges.loc[(s, t), "sign"] == sign for s, sign, t in path)
        for path in refs:
            signs = [t[1] for t in path]
            assert path_is_reference(signs, row["label"], "CRISPRi", int(res["gene_state"]))
