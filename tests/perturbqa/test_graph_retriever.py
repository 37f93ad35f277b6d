"""perturbqa_lib.graph_retriever: closest nodes, the three retrieval criteria, contrasting examples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from perturbqa_lib.graph_retriever import (
    Example,
    Retriever,
    _outside,
    closest_nodes,
    contrasting_examples,
    neighbour_matrix,
)


def edges_frame(rows):
    df = pd.DataFrame(rows, columns=["source", "target", "relation"])
    df["sign"], df["directed"], df["database"] = 0, False, "toy"
    return df


@pytest.fixture
def toy():
    # P0 (test perturbation) shares pathways S1, S2 with P1, only S1 with P2; P3 shares nothing.
    # Gene g0 shares complex C1 with g1; g2 is unrelated.
    edges = edges_frame([("P0", "S1", "pathway"), ("P0", "S2", "pathway"), ("P1", "S1", "pathway"), ("P1", "S2", "pathway"),
                         ("P2", "S1", "pathway"), ("P3", "S9", "pathway"), ("g0", "C1", "complex"), ("g1", "C1", "complex"),
                         ("g2", "C7", "complex")])
    train = pd.DataFrame([(p, g) for p in ["P1", "P2", "P3"] for g in ["g0", "g1", "g2"]], columns=["pert", "gene"])
    train["label"] = [1, 1, 0, 0, 1, 0, 0, 0, 0]
    return edges, train


def test_closest_nodes_rank_by_shared_neighbours(toy):
    edges, train = toy
    cand = ["P1", "P2", "P3"]
    close = closest_nodes(["P0"], neighbour_matrix(edges, ["P0"]), cand, neighbour_matrix(edges, cand), k=10)
    assert close["P0"] == ["P1", "P2"]  # P3 shares no neighbour
    close = closest_nodes(["g0"], neighbour_matrix(edges, ["g0"]), ["g0", "g1", "g2"], neighbour_matrix(edges, ["g0", "g1", "g2"]))
    assert close["g0"] == ["g0", "g1"]  # the gene itself first


def test_retriever_criteria_and_limits(toy):
    edges, train = toy
    r = Retriever(train, edges, k=10, per_criterion=2)
    examples = r.retrieve("P0", "g0", np.random.default_rng(0))
    crit = {}
    for e in examples:
        crit.setdefault(e.criterion, []).append((e.pert, e.gene))
    assert all(len(v) <= 2 for v in crit.values())
    assert all(p in ("P1", "P2") and g in ("g0", "g1") for p, g in crit[1])
    assert all(p in ("P1", "P2") for p, _ in crit.get(2, []))
    assert all(g in ("g0", "g1") for _, g in crit.get(3, []))
    pairs = [(e.pert, e.gene) for e in examples]
    assert len(pairs) == len(set(pairs))
    labels = dict(zip(zip(train["pert"], train["gene"]), train["label"]))
    assert all(e.label == labels[(e.pert, e.gene)] for e in examples)
    # A gene set's neighbours are its members' (and the members): S* sets the same way.
    sets = {"SET": ["g0"]}
    r2 = Retriever(train.assign(gene=train["gene"].replace({"g0": "SET"})), edges, sets, k=10, per_criterion=5)
    r2.prepare(["P0"], ["SET"])
    assert r2.close_genes["SET"][0] == "SET"


def test_contrasting_examples_take_one_of_each_label(toy):
    _, train = toy
    retrieved = [Example("P1", "g0", 1, 1), Example("P1", "g1", 1, 1), Example("P2", "g0", 0, 2)]
    two = contrasting_examples(retrieved, train, np.random.default_rng(0))
    assert two == [retrieved[2], retrieved[0]]  # label 0 first, the first retrieved of each label
    # A label no retrieved example has: a random training pair with that label (criterion 0).
    two = contrasting_examples(retrieved[:1], train, np.random.default_rng(0))
    assert two[1] == retrieved[0] and two[0].label == 0 and two[0].criterion == 0
    assert train.set_index(["pert", "gene"]).loc[(two[0].pert, two[0].gene), "label"] == 0
    # None in training either: left out.
    assert contrasting_examples([], train.assign(label=1), np.random.default_rng(0))[0].label == 1
    assert len(contrasting_examples([], train.assign(label=1), np.random.default_rng(0))) == 1


def test_retrieved_labels_are_those_of_as_many_retrievals(toy):
    edges, train = toy
    r = Retriever(train, edges, k=10, per_criterion=1)  # one example of several candidates: the draws matter
    for pert, gene in (("P0", "g0"), ("P3", "g2"), ("P0", "g1")):
        rng = np.random.default_rng(5)
        expected = [[e.label for e in r.retrieve(pert, gene, rng)] for _ in range(3)]
        assert [list(labels) for labels in r.retrieved_labels(pert, gene, np.random.default_rng(5), 3)] == expected


def test_outside_ranks_the_integers_left_after_removing_some():
    rng = np.random.default_rng(0)
    for _ in range(200):
        excluded = np.unique(rng.integers(0, 40, int(rng.integers(0, 12))))
        left = np.setdiff1d(np.arange(60), excluded)
        ranks = np.sort(rng.choice(40, 5, replace=False))
        np.testing.assert_array_equal(_outside(ranks, excluded), left[ranks])


def _listed_draw(r, train, pert, gene, rng):
    """One retrieval the plain way: list every criterion's candidates and draw from the list."""
    def take(candidates):
        if candidates.size <= r.per_criterion:
            return candidates
        return np.sort(rng.choice(candidates, r.per_criterion, replace=False))

    # The pools: the training pairs of each close perturbation (gene), in that order, then in training order.
    pool_p = pd.concat([train[train["pert"] == p] for p in r.close_perts[pert]])
    pool_g = pd.concat([train[train["gene"] == g] for g in r.close_genes[gene]])
    first = take(np.flatnonzero(pool_p["gene"].isin(r.close_genes[gene]).to_numpy()))
    second = take(np.setdiff1d(np.arange(len(pool_p)), first))
    from_p = pool_p.iloc[np.concatenate([first, second])]
    chosen = set(zip(from_p["pert"], from_p["gene"]))
    third = take(np.flatnonzero([(p, g) not in chosen for p, g in zip(pool_g["pert"], pool_g["gene"])]))
    picked = pd.concat([from_p, pool_g.iloc[third]])
    criteria = [1] * first.size + [2] * second.size + [3] * third.size
    return [Example(p, g, int(label), c) for p, g, label, c in zip(picked["pert"], picked["gene"], picked["label"], criteria)]


def test_draws_equal_those_from_listed_candidates():
    """Positions drawn by count and mapped give the draws of rng.choice on the listed candidates."""
    rng = np.random.default_rng(1)
    perts, genes = [f"P{i}" for i in range(12)], [f"g{i}" for i in range(15)]
    rows = [(n, f"S{s}", "pathway") for n in perts + genes for s in rng.choice(6, 3, replace=False)]
    edges = edges_frame(rows)
    train = pd.DataFrame([(p, g) for p in perts[2:] for g in genes[3:]], columns=["pert", "gene"])
    train["label"] = rng.integers(0, 2, len(train))
    r = Retriever(train, edges, k=4, per_criterion=3)
    for pert in perts[:4]:
        for gene in genes[:5]:
            r.prepare([pert], [gene])
            seed = int(rng.integers(1 << 30))
            mine, listed = np.random.default_rng(seed), np.random.default_rng(seed)
            for _ in range(3):
                assert r.retrieve(pert, gene, mine) == _listed_draw(r, train, pert, gene, listed)
