"""The chemical modality of PertReasonQA: drug-target edges, the chemical path search (B.2.3),
outcome labels of the simulated compound screen (section 2.2) and the compound split (B.1).

Every expected value is worked out by hand in the comments.
"""

from __future__ import annotations

import json

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from pertreasonqa_lib import chemical_items as pc
from pertreasonqa_lib import reasoning_paths as rp
from project_paths import SHARED_DATA

from pertsci import op3_simulation as op3_sim

needs_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data not found at {SHARED_DATA}")


def drug_graph() -> rp.SignedGraph:
    """Compound D inhibits T1 and activates T2.

    T1 -| A -> B -> C -> E   (T1 reaches E in four gene-gene edges)
    T2 -> B                  (T2 reaches E in three)
    """
    genes = rp.build_signed_graph(pd.DataFrame(
        [{"source": s, "target": t, "sign": sign, "database": "OmniPath"}
         for s, sign, t in [("T1", -1, "A"), ("A", 1, "B"), ("B", 1, "C"), ("C", 1, "E"), ("T2", 1, "B")]]))
    targets = pd.DataFrame({"drug": ["D", "D"], "target": ["T1", "T2"], "sign": [-1, 1]})
    return genes.with_drug_targets(targets, "test")


def names(graph, path):
    return [graph.nodes[graph.src[path[0]]]] + [graph.nodes[graph.dst[e]] for e in path]


def test_drug_edges_round_trip_and_validation():
    g = drug_graph()
    frame = g.to_frame()
    assert frame.loc[frame["interaction"] == "drug_target", ["source", "target", "sign"]].values.tolist() == [
        ["D", "T1", -1], ["D", "T2", 1]]
    again = rp.SignedGraph.from_frame(frame)
    assert again.drug_edge.sum() == 2 and again.to_frame().equals(frame)
    # a graph file without the column is all regulation
    assert not rp.SignedGraph.from_frame(frame.drop(columns="interaction")).drug_edge.any()
    with pytest.raises(ValueError, match="compound 'D' is the target of an edge"):
        rp.SignedGraph.from_frame(pd.concat([frame, pd.DataFrame([{"source": "A", "target": "D", "sign": 1, "databases": "x",
                                                                   "interaction": "regulation"}])]))
    with pytest.raises(ValueError, match="compound 'D' has a regulation edge"):
        rp.SignedGraph.from_frame(pd.concat([frame, pd.DataFrame([{"source": "D", "target": "E", "sign": 1, "databases": "x",
                                                                   "interaction": "regulation"}])]))
    with pytest.raises(ValueError, match="interaction must be"):
        rp.SignedGraph.from_frame(frame.assign(interaction="binds"))


def test_start_nodes_of_compounds_genes_and_combinations():
    g = drug_graph()
    assert sorted(g.nodes[g.start_nodes("D")]) == ["T1", "T2"]
    assert list(g.nodes[g.start_nodes("A")]) == ["A"]
    assert sorted(g.nodes[g.start_nodes("A+T2")]) == ["A", "T2"]
    assert g.start_nodes("NOT_A_NODE") is None
    assert rp.compound_targets(g, "D") == [("T1", -1), ("T2", 1)] and rp.compound_targets(g, "A") == []
    assert rp.start_names("ABT-199 (GDC-0199)", "chemical") == ["ABT-199 (GDC-0199)"]
    assert rp.start_names("A+B", "CRISPRi") == ["A", "B"]


def test_chemical_search_runs_three_hops_from_the_targets_and_prepends_the_drug_edge():
    g = drug_graph()
    basal = np.full(g.n_nodes, np.nan)  # every gene gated alike: the cost follows PPR only
    queries = pd.DataFrame({"perturbation": ["D", "D", "D", "T1"], "gene": ["C", "E", "T1", "E"]})
    res = rp.extract_paths(g, basal, 0.0, queries)
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


def test_chemical_ppr_is_personalised_on_the_targets():
    g = drug_graph()
    w = rp.gate_edge_weights(g, np.full(g.n_nodes, np.nan), 0.0)
    ppr = rp.personalized_pagerank(g, w, [g.start_nodes("D")])[:, 0]
    node = {n: i for i, n in enumerate(g.nodes)}
    assert ppr[node["D"]] == 0  # no edge enters a compound
    # T1 and T2 each get (1 - alpha)/2 of restart mass and no inflow: equal scores
    assert ppr[node["T1"]] == pytest.approx(ppr[node["T2"]])
    assert ppr.sum() == pytest.approx(1.0)


def test_chemical_sign_filters_start_from_the_present_compound():
    g = drug_graph()
    items = pd.DataFrame({"cell": ["c", "c", "c_low", "c_high"], "perturbation": "D", "perturbation_type": "chemical",
                          "gene": ["C", "C", "A", "A"], "label": ["up", "down", "unchanged", "unchanged"]},
                         index=["up C", "down C", "unch A low", "unch A hi"])
    # A is medium in cell c (both routes to C stay open), silent in c_low and saturated in c_high
    basal = pd.DataFrame({"c": {"A": 3.0}, "c_low": {"A": 0.0}, "c_high": {"A": 10.0}})
    thresholds = pd.DataFrame({"tau_low": 1.0, "tau_high": 5.0}, index=["c", "c_low", "c_high"])
    out = rp.reference_paths_for_items(items, g, basal, thresholds)
    # D (+1) -| T1 (-1) -| A (+1) -> B -> C: up; D -> T2 -> B -> C: up. Both explain "up", none "down".
    assert out.loc["up C", "n_reference_paths"] == 2 and out.loc["down C", "n_reference_paths"] == 0
    # D -| T1 -| A switches A on (z: 1 -> 0 -> 1): a ceiling effect on a saturated A, not a floor on a silent one
    assert out.loc["unch A hi", "n_reference_paths"] == 1 and out.loc["unch A low", "n_reference_paths"] == 0
    path = rp.paths_from_json(out.loc["unch A hi", "reference_paths"])[0]
    assert path == [("D", -1, "T1"), ("T1", -1, "A")]
    signs = [[t[1] for t in rp.paths_from_json(out.loc["up C", "candidate_paths"])[0]]]
    assert rp.predict_from_paths(signs, "chemical", rp.STATE_MEDIUM)[0] == "up"


def test_faithfulness_of_a_chemical_mechanism_starts_at_the_compound():
    reference = [[("ABT-199 (GDC-0199)", -1, "BCL2", "sim"), ("BCL2", -1, "BAX", "OmniPath")]]
    solution = pd.DataFrame({"perturbation": ["ABT-199 (GDC-0199)"], "perturbation_type": ["chemical"], "gene": ["BAX"],
                             "label": ["up"], "reference_paths": [json.dumps(reference)]}, index=["i"])
    text = rp.format_response("x", "up", [("ABT-199 (GDC-0199)", -1, "BCL2"), ("BCL2", -1, "BAX")])
    _, answer, triplets = rp.parse_response(text)
    prediction = pd.DataFrame({"answer": [answer], "triplets": [rp.triplets_to_json(triplets)]}, index=["i"])
    row = rp.faithfulness_table(solution, prediction).loc["i"]
    assert row["edge_recall"] == 1.0 and row["path_connectivity"] == 1.0
    # a chain that skips the compound is not connected, and recovers one of the two reference edges
    partial = pd.DataFrame({"answer": ["up"], "triplets": [rp.triplets_to_json([("BCL2", -1, "BAX")])]}, index=["i"])
    row = rp.faithfulness_table(solution, partial).loc["i"]
    assert row["path_connectivity"] == 0.0 and row["edge_recall"] == 0.5


def test_prompt_names_the_compound_and_its_targets():
    g = drug_graph()
    paths = [rp.path_triplets(g, p) for p in rp.extract_paths(g, np.full(g.n_nodes, np.nan), 0.0,
                                                              pd.DataFrame({"perturbation": ["D"], "gene": ["E"]})).paths[0]]
    prompt = rp.question_prompt("B cells", "D", "chemical", "E", {"E": "low", "B": "high"}, paths,
                                targets=rp.compound_targets(g, "D"))
    assert "Perturbation: treatment with the compound D (known targets: inhibits T1, activates T2)." in prompt
    assert "1. D [compound] --(+1)--> T2 [unknown] --(+1)--> B [high] --(+1)--> C [unknown] --(+1)--> E [low]" in prompt
    assert "Question: after treatment with the compound D in B cells, does E go up" in prompt
    parsed = rp.parse_serialized_paths(prompt)
    assert parsed[0][0] == [("D", 1, "T2"), ("T2", 1, "B"), ("B", 1, "C"), ("C", 1, "E")]


def test_compound_targets_from_the_simulation_record():
    simulation = {
        "compounds": pd.DataFrame({"sm_name": ["X", "Y", "Z"], "mechanism": ["m0", "m1", "m0"],
                                   "secondary_mechanism": ["", "m2", "m0"]}),
        "mechanisms": pd.DataFrame({"mechanism": ["m0", "m1", "m2"], "tfs": ["TF1|TF2", "TF3", "TF3|TF4"],
                                    "direction": [1.0, -1.0, 1.0]}),
    }
    t = pc.compound_targets(simulation)
    rows = {(r.drug, r.target): (r.sign, r.mechanisms) for r in t.itertuples()}
    # Y: TF3 is switched off by m1 and on by m2 -> unknown sign; TF4 on by m2
    assert rows == {("X", "TF1"): (1, "m0"), ("X", "TF2"): (1, "m0"), ("Y", "TF3"): (0, "m1;m2"),
                    ("Y", "TF4"): (1, "m2"), ("Z", "TF1"): (1, "m0"), ("Z", "TF2"): (1, "m0")}
    with pytest.raises(ValueError, match="unknown mechanism 'm9'"):
        pc.compound_targets({**simulation, "compounds": simulation["compounds"].assign(mechanism="m9")})


def test_chemical_splits_by_share_of_ood_targets():
    targets = pd.DataFrame({"drug": ["a", "a"] + ["b"] * 11, "target": ["g0", "g1"] + [f"g{i}" for i in range(1, 12)]})
    clusters = pd.Series({f"g{i}": (1 if i == 0 or i == 11 else 0) for i in range(12)})
    splits = pc.chemical_splits(targets, ["a", "b", "c"], clusters, ood_clusters=[1], seed=0)
    # a: 1 of 2 targets in OOD cluster 1 (50% > 10%) -> OOD; b: 1 of 11 (9.1%) -> ID; c has no target -> ID
    assert splits.loc["a", "distribution"] == "OOD" and splits.loc["a", "split"] == "test"
    assert splits.loc["b", "ood_target_share"] == pytest.approx(1 / 11) and splits.loc["b", "distribution"] == "ID"
    assert splits.loc["c", ["n_targets", "distribution"]].tolist() == [0, "ID"]
    with pytest.raises(ValueError, match="no functional cluster"):
        pc.chemical_splits(targets, ["a"], clusters.drop("g0"), [1])


def screen(seed: int = 0) -> ad.AnnData:
    """Two cell types, DMSO and compound K: K doubles G_up and halves G_down in both; G_flat unchanged;
    G_rare is detected in under 5% of cells. A subset of the genes with library sizes kept apart."""
    rng = np.random.default_rng(seed)
    rows, obs = [], []
    for cell in ("B cells", "T cells CD4+"):
        for comp, n in (("Dimethyl Sulfoxide", 300), ("K", 200), ("few", 5)):
            mu = np.array([20.0, 20.0, 20.0, 0.01])
            if comp == "K":
                mu = mu * np.array([2.0, 0.5, 1.0, 1.0])
            rows.append(rng.poisson(mu, size=(n, 4)))
            obs.append(pd.DataFrame({"cell_type": cell, "sm_name": comp, "total_counts": 10_000.0}, index=range(n)))
    obs = pd.concat(obs, ignore_index=True)
    obs.index = obs.index.astype(str)
    return ad.AnnData(X=sp.csr_matrix(np.vstack(rows)), obs=obs, var=pd.DataFrame(index=["G_up", "G_down", "G_flat", "G_rare"]))


def test_outcome_labels_wilcoxon_against_dmso_per_cell_type():
    items, summary = pc.outcome_labels(screen(), min_cells=10)
    got = items.set_index(["cell", "gene"])["label"].to_dict()
    assert got == {("B cells", "G_up"): "up", ("B cells", "G_down"): "down", ("B cells", "G_flat"): "unchanged",
                   ("T cells CD4+", "G_up"): "up", ("T cells CD4+", "G_down"): "down", ("T cells CD4+", "G_flat"): "unchanged"}
    assert set(items["perturbation"]) == {"K"} and set(items["perturbation_type"]) == {"chemical"}
    assert (items.loc[items["label"] != "unchanged", "pvalue_adj"] < 0.01).all()
    assert (items.loc[items["label"] == "unchanged", "pvalue"] > 0.1).all()
    assert summary[["n_genes_tested", "n_up", "n_down", "n_unchanged"]].values.tolist() == [[3, 1, 1, 1]] * 2
    # caps: the strongest changed gene only (G_up and G_down are both significant), every unchanged one (0: all)
    capped, _ = pc.outcome_labels(screen(), min_cells=10, max_changed=1, max_unchanged=0)
    assert len(capped) == 4 and (capped.groupby("cell")["label"].apply(lambda s: (s != "unchanged").sum()) == 1).all()
    assert (capped.groupby("cell")["label"].apply(lambda s: (s == "unchanged").sum()) == 1).all()


def test_fold_of_chemical_items_keeps_ood_cells_for_test_compounds():
    from pertreasonqa_lib import items_and_splits as ps

    items = pd.DataFrame({"cell": ["B cells", "B cells", "T cells CD8+", "T cells CD8+", "NK cells"],
                          "perturbation": ["tr", "te", "tr", "ood", "ood"]})
    splits = pd.DataFrame({"distribution": ["ID", "ID", "OOD"], "split": ["train", "test", "test"]}, index=["tr", "te", "ood"])
    assert ps.fold_of_items(items, splits, pc.CELLS).tolist() == [
        "train", "id_cell_id_pert", "unused", "ood_cell_ood_pert", "id_cell_ood_pert"]
    assert [c for c, v in pc.CELLS.items() if v["distribution"] == "OOD"] == ["T cells CD4+", "T cells CD8+", "T regulatory cells"]


def test_simulation_subset_keeps_the_draws_and_library_sizes():
    meta = op3_sim.synthetic_metadata(n_genes=120, n_compounds=6)
    kw = dict(n_compounds=6, n_test_compounds=2, n_donors=1, plates_per_donor=1, dmso_wells_per_plate=2, cells_per_well=8, seed=3)
    full = op3_sim.simulate_op3(meta, **kw)
    keep = list(full.var_names[::7])
    sub = op3_sim.simulate_op3(meta, keep_genes=keep, **kw)
    assert list(sub.var_names) == keep
    assert (sub.X != full[:, keep].X).nnz == 0
    assert np.array_equal(sub.obs["total_counts"].to_numpy(), np.asarray(full.X.sum(axis=1)).ravel())


@needs_data
def test_blood_basal_averages_the_simulators_columns():
    by_symbol, all_genes, stats = pc.load_blood_basal()
    assert list(by_symbol.columns) == op3_sim.CELL_TYPES and stats["n_mapped"] > 5000
    import gzip

    with gzip.open(SHARED_DATA / pc.BLOOD_FILE, "rt") as fh:
        raw = pd.read_csv(fh, sep="\t").set_index("GeneID")
    gene = raw.index[raw["naive_B_cell"] != raw["memory_B_cell"]][0]
    assert all_genes.loc[gene, "B cells"] == pytest.approx(raw.loc[gene, ["naive_B_cell", "memory_B_cell"]].mean())
