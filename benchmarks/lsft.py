"""LSFT at screen scale: batched closed-form refits against a loop of refits.

LSFT (local similarity-filtered training) refits the linear model of Ahlmann-Eltze et al. (2025)
for every test perturbation on its top 1%, 5% and 10% most similar training perturbations. This
benchmark times ``perturbation_effect_lib.lsft.lsft_predict`` (batched eigendecompositions and solves,
see its docstring) on 2,000 perturbations x 5,000 genes split by GEARS's simulation split, for the
training-PCA model (the costly case: the PCA is recomputed for every test perturbation) and for a
fixed (random) perturbation embedding, and compares it with ``lsft_predict_reference`` (one
``fit_linear_model`` per test perturbation and fraction) run on a subset and extrapolated.

Run with ``python benchmarks/lsft.py`` (``--n_reference`` test perturbations for the reference).
Target: the batched LSFT of every test perturbation at 1/5/10% under 60 s on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from figures import write_figures
from threadpoolctl import threadpool_limits

# The task's own library lives beside its components, not in an installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "perturbation_effect"))
from perturbation_effect_lib import embeddings, linear_model, lsft  # noqa: E402
from perturbation_effect_lib import holdout_splits as splits  # noqa: E402

FRACTIONS = (0.01, 0.05, 0.10)


def make_profiles(n_perturbations: int, n_genes: int, seed: int = 0) -> tuple[np.ndarray, list[str], list[str]]:
    """Pseudobulk-like profiles with low-rank structure; perturbation i targets measured gene i."""
    rng = np.random.default_rng(seed)
    genes = [f"G{j:05d}" for j in range(n_genes)]
    base = rng.gamma(2.0, 0.6, size=n_genes)
    loadings = rng.normal(0, 0.15, size=(n_genes, 20))
    programs = rng.normal(size=(n_perturbations, 20)) * (rng.random((n_perturbations, 20)) < 0.2)
    Y = base + programs @ loadings.T + rng.normal(0, 0.03, size=(n_perturbations, n_genes))
    # A perturbation's own target, and the genes of its program, respond; that is what the
    # training-PCA embedding of the target gene's row picks up.
    Y[np.arange(n_perturbations), np.arange(n_perturbations)] -= 1.0
    return Y, [genes[i] for i in range(n_perturbations)], genes


def run(n_perturbations: int, n_genes: int, n_reference: int) -> None:
    Y, perts, genes = make_profiles(n_perturbations, n_genes)
    split = splits.simulation_split(perts, seed=1)
    is_train = (split["split"] == "train").to_numpy()
    train = [p for p, t in zip(perts, is_train) if t]
    test = [p for p, t in zip(perts, is_train) if not t]
    Y_train = Y[is_train]
    print(f"{n_perturbations} perturbations x {n_genes} genes: {len(train)} train, {len(test)} test; "
          f"LSFT at {', '.join(f'{f:.0%}' for f in FRACTIONS)} "
          f"(k = {', '.join(str(max(1, int(np.ceil(len(train) * f)))) for f in FRACTIONS)})")
    table = embeddings.random_embedding(genes, embeddings.N_COMPONENTS, seed=0)
    header = f"{'model':32s} {'batched (s)':>12s} {'loop, extrapolated (s)':>23s} {'ratio':>8s} {'max |diff|':>11s}"
    print(header)
    print("-" * len(header))
    figures: dict[str, float] = {}
    for label, pert_embedding in (("linear, training PCA", "pca"), ("linear, random perturbation emb.", table)):
        start = time.perf_counter()
        fast = lsft.lsft_predict(Y_train, train, test, genes, fractions=FRACTIONS, pert_embedding=pert_embedding)
        batched = time.perf_counter() - start
        subset = np.linspace(0, len(test) - 1, n_reference).astype(int)
        # The reference at its fastest: one BLAS thread suits its many small refits best.
        start = time.perf_counter()
        with threadpool_limits(limits=1, user_api="blas"):
            slow = lsft.lsft_predict_reference(Y_train, train, test, genes, fractions=FRACTIONS,
                                               pert_embedding=pert_embedding, test_index=subset)
        loop = time.perf_counter() - start
        # The reference pays one full fit (also part of the batched time) plus one refit per test
        # perturbation and fraction; only the refits scale with the number of test perturbations.
        start = time.perf_counter()
        with threadpool_limits(limits=1, user_api="blas"):
            linear_model.fit_linear_model(Y_train, train, genes, pert_embedding=pert_embedding)
        full_fit = time.perf_counter() - start
        extrapolated = full_fit + (loop - full_fit) * len(test) / n_reference
        diff = max(float(np.abs(fast.predictions[f][subset] - slow[f]).max()) for f in FRACTIONS)
        print(f"{label:32s} {batched:12.1f} {extrapolated:23.1f} {extrapolated / batched:8.1f} {diff:11.1e}")
        key = "pca" if isinstance(pert_embedding, str) else "fixed_embedding"
        figures.update({f"batched_{key}_s": batched, f"loop_{key}_s": extrapolated, f"max_abs_diff_{key}": diff})
    print("target: batched LSFT of every test perturbation under 60 s on 2 cores")
    print(f"figures: {write_figures('lsft', figures, perturbations=n_perturbations, genes=n_genes)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n_perturbations", type=int, default=2000)
    parser.add_argument("--n_genes", type=int, default=5000)
    parser.add_argument("--n_reference", type=int, default=10, help="test perturbations run through the loop of refits")
    ns = parser.parse_args()
    run(ns.n_perturbations, ns.n_genes, ns.n_reference)


if __name__ == "__main__":
    main()
