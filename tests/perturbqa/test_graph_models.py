"""perturbqa_lib.graph_models: GAT attention, ternary scores, learning a planted signal, determinism."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from perturbqa_lib.graph_models import (
    GATLayer,
    build_graph,
    fit_predict,
    pair_item_scores,
    spectral_features,
    subtask_scores,
    ternary_targets,
)
from sklearn.metrics import roc_auc_score


@pytest.fixture(autouse=True)
def one_thread():
    # The models here are tiny: threads add only synchronisation, which is slow on busy cores.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def edges_frame(rows, database="toy"):
    df = pd.DataFrame(rows, columns=["source", "target"])
    df["relation"], df["sign"], df["directed"], df["database"] = "pathway", 0, False, database
    return df


def test_gat_attention_sums_to_one_and_respects_adjacency():
    torch.manual_seed(0)
    n = 6
    # Edges j -> i: node 0 hears 1, 2 and itself; node 3 only itself; node 5 hears 4 twice (two types).
    edge_index = torch.tensor([[1, 2, 0, 3, 4, 4, 5, 1, 2, 4], [0, 0, 0, 3, 5, 5, 5, 1, 2, 4]])
    edge_type = torch.tensor([0, 1, 2, 2, 0, 1, 2, 2, 2, 2])
    layer = GATLayer(5, 8, heads=2, n_edge_types=3)
    with torch.no_grad():
        layer.edge_bias.weight.normal_()
    x = torch.randn(n, 5)
    h, alpha = layer.attention(x, edge_index, edge_type)
    assert alpha.shape == (edge_index.shape[1], 2)
    sums = torch.zeros(n, 2).index_add(0, edge_index[1], alpha)
    assert torch.allclose(sums, torch.ones(n, 2), atol=1e-6)
    assert torch.all(alpha > 0)
    # A node with a single incoming edge copies its neighbour's projection.
    out = layer(x, edge_index, edge_type).view(n, 2, 4)
    assert torch.allclose(out[3], h[3] + layer.bias.view(2, 4), atol=1e-6)
    # Changing a node no edge leads from (node 0 feeds nobody but itself) leaves node 3 and 5 unchanged.
    x2 = x.clone()
    x2[0] += 10.0
    out2 = layer(x2, edge_index, edge_type).view(n, 2, 4)
    assert torch.allclose(out[[3, 4, 5]], out2[[3, 4, 5]])
    assert not torch.allclose(out[0], out2[0])
    # The edge-type bias changes the weights of parallel edges of different types.
    a54 = alpha[[4, 5]]
    assert not torch.allclose(a54[0], a54[1])


def test_subtask_scores_from_ternary_probabilities():
    proba = np.array([[0.7, 0.1, 0.2], [0.2, 0.6, 0.2], [1.0, 0.0, 0.0]])
    np.testing.assert_allclose(subtask_scores(proba, "de"), [0.3, 0.8, 0.0])
    np.testing.assert_allclose(subtask_scores(proba, "dir"), [2 / 3, 0.25, 0.5])
    with pytest.raises(ValueError, match="pair subtask"):
        subtask_scores(proba, "gse_gene")
    np.testing.assert_array_equal(ternary_targets(["unchanged", "down", "up"]), [0, 1, 2])
    with pytest.raises(ValueError, match="unknown responses"):
        ternary_targets(["sideways"])


def test_build_graph_pools_sets_and_keeps_isolated_entities():
    edges = edges_frame([("A", "S1"), ("B", "S1"), ("C", "S2")])
    graph = build_graph(edges, ["A", "Z", "SET"], {"SET": ["A", "B", "Q"]})
    assert "Z" in graph.nodes and "Q" in graph.nodes and not graph.in_graph[graph.nodes.get_loc("Z")]
    row = graph.pool.toarray()[graph.entities.get_loc("SET")]
    assert row.sum() == pytest.approx(1.0)
    assert {graph.nodes[i] for i in np.flatnonzero(row)} == {"A", "B", "Q"}
    # Both directions and a self-loop per node.
    pairs = set(map(tuple, graph.edge_index.T.tolist()))
    a, s1 = graph.nodes.get_loc("A"), graph.nodes.get_loc("S1")
    assert {(a, s1), (s1, a), (a, a)} <= pairs
    feats = spectral_features(graph, dim=3)
    assert feats.shape == (len(graph.nodes), 5) and np.isfinite(feats).all()


def planted(seed=0, n_per_group=20):
    """Two communities of genes; perturbing a gene of community k moves genes of k (up for 0, down for 1)."""
    rng = np.random.default_rng(seed)
    rows, groups = [], {}
    for k in range(2):
        genes = [f"G{k}_{i}" for i in range(n_per_group)]
        groups.update({g: k for g in genes})
        hubs = [f"H{k}_{h}" for h in range(4)]
        for g in genes:
            for h in rng.choice(hubs, size=3, replace=False):
                rows.append((g, h))
    edges = edges_frame(rows)
    genes = sorted(groups)
    perts = [g for g in genes if int(g.split("_")[1]) < 12]
    test_perts = [g for g in genes if int(g.split("_")[1]) >= 16]
    downstream = [g for g in genes if 12 <= int(g.split("_")[1]) < 16]

    def response(p, g):
        if groups[p] != groups[g]:
            return "unchanged"
        return "up" if groups[p] == 0 else "down"

    train = pd.DataFrame([(p, g, response(p, g)) for p in perts for g in downstream], columns=["pert", "gene", "response"])
    test = pd.DataFrame([(p, g, response(p, g)) for p in test_perts for g in downstream], columns=["pert", "gene", "response"])
    return edges, train, test


@pytest.mark.parametrize("kind", ["mlp", "gat"])
def test_learns_planted_signal_on_unseen_perturbations(kind):
    edges, train, test = planted()
    proba = fit_predict(train, test, edges, kind=kind, feature_dim=4, hidden=16, layers=1, heads=2, ffn=32,
                        epochs=40, batch_size=96, lr=5e-3, dropout=0.0, seed=0, verbose=False)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-5)
    de = (test["response"] != "unchanged").astype(int)
    assert roc_auc_score(de, subtask_scores(proba, "de")) > 0.9
    changed = (test["response"] != "unchanged").to_numpy()
    up = (test.loc[changed, "response"] == "up").astype(int)
    assert roc_auc_score(up, subtask_scores(proba[changed], "dir")) > 0.9


def test_deterministic_with_seed_and_items_scored():
    edges, train, test = planted()
    items = pd.concat([test.assign(subtask="de"), test[test["response"] != "unchanged"].assign(subtask="dir")])
    items.index = [f"{s}:{p}:{g}" for s, p, g in zip(items["subtask"], items["pert"], items["gene"])]
    items = pd.concat([items, pd.DataFrame({"subtask": ["gse_gene"], "pert": [""], "gene": [""]}, index=["gse_gene:1"])])
    kw = dict(kind="gat", feature_dim=4, hidden=8, layers=1, heads=2, ffn=16, epochs=3, batch_size=32, seed=3, verbose=False)
    a = pair_item_scores(train, items, edges, **kw)
    b = pair_item_scores(train, items, edges, **kw)
    c = pair_item_scores(train, items, edges, **{**kw, "seed": 4})
    pd.testing.assert_series_equal(a, b)
    assert not np.allclose(a.to_numpy(), c.to_numpy())
    assert "gse_gene:1" not in a.index and len(a) == len(items) - 1
    assert a.between(0, 1).all()
