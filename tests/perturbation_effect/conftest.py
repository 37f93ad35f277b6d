"""Fixtures shared by the perturbation_effect tests: a toy linear-model problem and a small simulated screen."""

from __future__ import annotations

import numpy as np
import pytest
from perturbation_effect_lib import embeddings
from perturbation_effect_lib import perturbseq_simulation as perturb_sim


@pytest.fixture(scope="module")
def toy():
    """Profiles with low-rank structure; a combination; targets outside the measured genes."""
    rng = np.random.default_rng(0)
    g = 120
    genes = [f"g{i}" for i in range(g)]
    train = [f"g{i}" for i in range(60)] + ["g1+g2", "g3+x400"]
    test = [f"g{i}" for i in range(60, 72)] + ["g5+g70", "x999"]
    Y = rng.normal(size=(len(train), g)) + rng.normal(size=(len(train), 3)) @ rng.normal(size=(3, g))
    table = embeddings.random_embedding(genes + ["x400", "x999"], 10, seed=1)
    return dict(Y=Y, genes=genes, train=train, test=test, table=table)


@pytest.fixture(scope="module")
def small_screen():
    """A small synthetic screen of synthetic genes (no shared data needed)."""
    return perturb_sim.simulate_screen(n_genes=200, n_perturbations=24, n_combinations=4, n_programs=3,
                                       program_size=(8, 10), cells_per_perturbation=20, n_control_cells=300, seed=2)
