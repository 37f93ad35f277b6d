"""Fixed gene-level embedding tables: random, spectral, GO membership (perturbation_effect_lib.embeddings)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from perturbation_effect_lib import embeddings
from perturbation_effect_lib.hardness import cosine_similarity


def test_random_embedding_of_a_gene_does_not_depend_on_the_others():
    a = embeddings.random_embedding(["A", "B", "C"], 5, seed=3)
    b = embeddings.random_embedding(["C", "Z"], 5, seed=3)
    np.testing.assert_array_equal(a.loc["C"], b.loc["C"])
    assert not np.allclose(a.loc["A"], a.loc["B"])
    assert not np.allclose(embeddings.random_embedding(["C"], 5, seed=4).loc["C"], b.loc["C"])


def test_spectral_embedding_separates_two_communities():
    left = [f"L{i}" for i in range(6)]
    right = [f"R{i}" for i in range(6)]
    pairs = [(a, b) for group in (left, right) for i, a in enumerate(group) for b in group[i + 1:]]
    pairs += [("L0", "R0"), ("X1", "X2")]  # a bridge, and a separate component that is dropped
    edges = pd.DataFrame(pairs, columns=["source", "target"])
    edges["relation"], edges["sign"], edges["directed"], edges["database"] = "physical", 0, False, "toy"
    emb = embeddings.spectral_embedding(edges, n_components=2)
    assert set(emb.index) == set(left) | set(right)
    first = emb[0]
    assert (np.sign(first[left]) != np.sign(first[right].mean())).all() or (np.sign(first[right]) != np.sign(first[left].mean())).all()
    assert np.sign(first[left].mean()) != np.sign(first[right].mean())
    # Only source and target are read: the four columns of a gene-knowledge file suffice.
    again = embeddings.spectral_embedding(edges[["source", "target", "relation", "database"]], n_components=2)
    assert again.index.equals(emb.index)
    with pytest.raises(ValueError, match="largest connected component"):
        embeddings.spectral_embedding(edges, n_components=12)


def test_go_membership_embedding_groups_genes_of_one_term():
    sets = {f"T{k}": [f"T{k}_{i}" for i in range(6)] for k in range(12)}
    sets["shared"] = ["T0_0", "T1_0"]
    genes = [g for members in sets.values() for g in members] + ["nowhere"]
    emb = embeddings.go_membership_embedding(genes, sets, n_components=11)
    sim = cosine_similarity(emb.to_numpy(), emb.to_numpy())
    idx = {g: i for i, g in enumerate(emb.index)}
    assert sim[idx["T3_1"], idx["T3_2"]] > 0.99
    assert abs(sim[idx["T3_1"], idx["T4_1"]]) < 0.5
    assert not emb.loc["nowhere"].any()
    with pytest.raises(ValueError, match="no gene set"):
        embeddings.go_membership_embedding(["A", "B"], sets)


def test_fixed_tables_have_the_random_tables_scale():
    """Every fixed table's non-zero rows have mean squared norm d, as a standard-normal table does."""
    rng = np.random.default_rng(0)
    genes = [f"G{i}" for i in range(60)]
    sets = {f"T{k}": rng.choice(genes, size=3 + k, replace=False).tolist() for k in range(20)}
    emb = embeddings.go_membership_embedding(genes + ["nowhere"], sets, n_components=4).to_numpy()
    squared = (emb**2).sum(axis=1)
    assert squared[-1] == 0
    np.testing.assert_allclose(squared[squared > 0].mean(), 4)
    # GO rows are all on one scale: no gene weighs more because the top components capture its terms best.
    np.testing.assert_allclose(squared[squared > 0], 4)
    spectral = embeddings.spectral_embedding(pd.DataFrame({"source": genes[:-1], "target": genes[1:]}), n_components=4).to_numpy()
    np.testing.assert_allclose((spectral**2).sum(axis=1).mean(), 4)


def test_genes_to_embed_and_table_rows():
    assert embeddings.genes_to_embed(["A", "B"], ["A", "C+D", "x"]) == ["A", "B", "A", "C", "D", "x"]
    table = pd.DataFrame([[1.0, 2.0], [3.0, 4.0]], index=["A", "B"])
    np.testing.assert_array_equal(embeddings.table_rows(table, ["B", "Z", "A"]), [[3.0, 4.0], [0.0, 0.0], [1.0, 2.0]])
