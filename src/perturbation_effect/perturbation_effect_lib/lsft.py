"""Local similarity-filtered training (LSFT) of the linear model, and the prediction of test perturbations.

LSFT (Ahlmann-Eltze, Huber & Anders 2025, methods appendix): for each test perturbation, the top
1/5/10% training perturbations by cosine similarity in the full model's perturbation-embedding
space are kept and the whole model (``b``, the PCA embeddings and ``K``) is refitted on them.
:func:`lsft_predict` does this for every test perturbation at once: the PCA of a subset of ``k``
perturbations is the eigendecomposition of its ``k x k`` centred Gram matrix, which is gathered
from one Gram matrix of all training perturbations, so every refit reduces to small batched
linear algebra and the prediction is a weighted sum of the neighbours' profiles.
:func:`lsft_predict_reference` refits one model per test perturbation (the definition; slow).

:func:`predict_test_perturbations` is what every linear method does with its two embeddings: the
full model's predictions, or LSFT's when the dataset asks for it, and the hardness of each test
perturbation in the full model's perturbation-embedding space.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from perturbation_effect_lib.embeddings import table_rows
from perturbation_effect_lib.hardness import LSFT_FRACTIONS, cosine_similarity, hardness, hardness_table, n_neighbours, top_neighbours
from perturbation_effect_lib.linear_model import (
    AUTHORS,
    N_COMPONENTS,
    PERTURBATIONS,
    RIDGE,
    LinearModel,
    fit_linear_model,
    ridge_core,
)
from perturbation_effect_lib.perturbation_targets import embed_perturbations, target_matrix

__all__ = ["LSFT_FRACTIONS", "LSFTResult", "TestPrediction", "lsft_predict", "lsft_predict_reference",
           "lsft_predict_authors", "predict_test_perturbations"]


@dataclass
class LSFTResult:
    """Predictions of LSFT.

    Attributes
    ----------
    predictions
        Fraction -> test perturbations x genes.
    neighbours
        Fraction -> test x k training indices used for each test perturbation.
    hardness
        Test x fractions (see :func:`hardness`).
    has_embedding
        Test perturbations with a non-zero embedding; the others keep the full model's prediction.
    """

    predictions: dict[float, np.ndarray]
    neighbours: dict[float, np.ndarray]
    hardness: np.ndarray
    has_embedding: np.ndarray


def _centre(x: np.ndarray, axis: int) -> np.ndarray:
    return x - x.mean(axis=axis, keepdims=True)


def lsft_predict(
    Y: np.ndarray,
    train: Sequence[str],
    test: Sequence[str],
    genes: Sequence[str],
    *,
    fractions: Sequence[float] = LSFT_FRACTIONS,
    gene_embedding: str | pd.DataFrame = "pca",
    pert_embedding: str | pd.DataFrame = "pca",
    n_components: int = N_COMPONENTS,
    ridge: float = RIDGE,
    batch_size: int | None = None,
) -> LSFTResult:
    """LSFT predictions for every test perturbation, by batched closed-form refits.

    For a subset ``S`` of ``k`` training perturbations, with ``Y0`` the training matrix minus any
    constant row and ``H`` the k x k centring matrix, the refitted model needs only

    * the PCA: eigenvectors ``V`` and eigenvalues ``L`` of ``H (Y0 Y0^T)_SS H`` (so ``A = C_S^T V``,
      ``A^T A = L``, ``A^T C_S^T = L V^T``);
    * the PCA perturbation embedding of perturbation ``j``: ``(H Q_Sj)^T V`` with
      ``Q = Y0 E^T`` the training profiles at each perturbation's target genes;
    * for fixed tables, their rows and ``Y0 A``.

    The prediction is then ``Y_S^T w`` (PCA gene embedding; ``w = H V K p + 1/k``) or
    ``A K p + Y_S^T 1/k`` (fixed gene embedding). Gathers from the precomputed ``n x n`` matrices,
    batched ``eigh`` and ``solve`` over test perturbations, and one sparse product with ``Y`` per
    batch do all the work. The result equals :func:`lsft_predict_reference` up to rounding.

    Parameters
    ----------
    Y
        Training profiles, perturbations x genes.
    train, test
        Training and test perturbation ids.
    genes
        Measured genes.
    fractions
        Shares of training perturbations to keep (``ceil(n_train * f)`` of them).
    gene_embedding, pert_embedding, n_components, ridge
        As in :func:`fit_linear_model`.
    batch_size
        Test perturbations solved at once (memory ~ batch x k x k); default keeps batches near
        2**22 elements.
    """
    Y = np.asarray(Y, dtype=np.float64)
    genes = pd.Index(genes)
    n = Y.shape[0]
    gene_pca = isinstance(gene_embedding, str)
    pert_pca = isinstance(pert_embedding, str)
    Y0 = Y - Y.mean(axis=0)  # any constant row drops out under H; the mean limits cancellation
    M = Y0 @ Y0.T if (gene_pca or pert_pca) else None  # the Gram matrix of the full fit, too
    full = fit_linear_model(Y, train, genes, gene_embedding=gene_embedding, pert_embedding=pert_embedding,
                            n_components=n_components, ridge=ridge, gram=M)
    B_train, B_test = full.embed(train), full.embed(test)
    has_emb = np.any(B_test != 0, axis=1)
    sim = cosine_similarity(B_test, B_train)
    order = top_neighbours(sim)
    full_pred = full.predict(test)

    if pert_pca:
        E_train = target_matrix(train, genes)
        E_test = target_matrix(test, genes)
        Q_train = np.asarray((E_train @ Y0.T).T)  # [i, j]: training profile i at perturbation j's targets
        Q_test = np.asarray((E_test @ Y0.T).T)
    else:
        table_genes = pd.Index(pert_embedding.index)
        table = pert_embedding.to_numpy(dtype=np.float64)
        Bf_train = embed_perturbations(train, table_genes, table)
        Bf_test = embed_perturbations(test, table_genes, table)
    if not gene_pca:
        A = table_rows(gene_embedding, genes)
        AtA = A.T @ A
        YA = Y0 @ A

    predictions, neighbours = {}, {}
    # The batches are many small matrices: threaded BLAS only adds overhead there (and suffers
    # badly on shared cores), so they run single-threaded; the large products above do not.
    with threadpool_limits(limits=1, user_api="blas"):
        for fraction in fractions:
            k = n_neighbours(n, fraction)
            S_all = order[:, :k]
            neighbours[fraction] = S_all
            pred = full_pred.copy()
            rows = np.flatnonzero(has_emb)
            step = batch_size or max(1, (1 << 22) // max(1, k * k))
            for start in range(0, len(rows), step):
                idx = rows[start:start + step]
                S = S_all[idx]  # c x k
                c = len(idx)
                if gene_pca or pert_pca:
                    Mss = M[S[:, :, None], S[:, None, :]]
                    HMH = _centre(_centre(Mss, 1), 2)
                    evals, evecs = np.linalg.eigh(HMH)
                    d = min(n_components, k)
                    V = evecs[:, :, ::-1][:, :, :d]  # c x k x d, decreasing eigenvalues
                    L = np.clip(evals[:, ::-1][:, :d], 0.0, None)
                if gene_pca:
                    AtA_b = L[:, :, None] * np.eye(d)
                    AtY_b = L[:, :, None] * np.swapaxes(V, 1, 2)  # c x d x k
                else:
                    AtA_b = np.broadcast_to(AtA, (c, *AtA.shape))
                    AtY_b = np.swapaxes(_centre(YA[S], 1), 1, 2)  # c x d_a x k
                if pert_pca:
                    HQ = _centre(Q_train[S[:, :, None], S[:, None, :]], 1)  # c x k(i) x k(j)
                    P = np.swapaxes(HQ, 1, 2) @ V  # c x k x d
                    q = _centre(Q_test[S, idx[:, None]], 1)  # c x k
                    p = np.einsum("ck,ckd->cd", q, V)
                else:
                    P = Bf_train[S]
                    p = Bf_test[idx]
                Kc = ridge_core(AtA_b, AtY_b, P, ridge)
                u = np.einsum("cab,cb->ca", Kc, p)
                if gene_pca:
                    w = _centre(np.einsum("ckd,cd->ck", V, u), 1) + 1.0 / k
                    extra = 0.0
                else:
                    w = np.full((c, k), 1.0 / k)
                    extra = u @ A.T
                weights = sp.csr_matrix((w.ravel(), S.ravel(), np.arange(0, c * k + 1, k)), shape=(c, n))
                pred[idx] = weights @ Y + extra
            predictions[fraction] = pred
    hard = hardness(B_test, B_train, fractions)
    return LSFTResult(predictions=predictions, neighbours=neighbours, hardness=hard, has_embedding=has_emb)


def lsft_predict_reference(
    Y: np.ndarray,
    train: Sequence[str],
    test: Sequence[str],
    genes: Sequence[str],
    *,
    fractions: Sequence[float] = LSFT_FRACTIONS,
    gene_embedding: str | pd.DataFrame = "pca",
    pert_embedding: str | pd.DataFrame = "pca",
    n_components: int = N_COMPONENTS,
    ridge: float = RIDGE,
    test_index: Sequence[int] | None = None,
) -> dict[float, np.ndarray]:
    """LSFT by the definition: one :func:`fit_linear_model` per test perturbation and fraction.

    Slow; used to check :func:`lsft_predict` and as the benchmark's reference. ``test_index``
    restricts the work to some test perturbations (rows of the result in that order).
    """
    Y = np.asarray(Y, dtype=np.float64)
    train = list(train)
    test = list(test)
    full = fit_linear_model(Y, train, genes, gene_embedding=gene_embedding, pert_embedding=pert_embedding,
                            n_components=n_components, ridge=ridge)
    B_train, B_test = full.embed(train), full.embed(test)
    order = top_neighbours(cosine_similarity(B_test, B_train))
    rows = list(range(len(test))) if test_index is None else list(test_index)
    out = {}
    for fraction in fractions:
        k = n_neighbours(len(train), fraction)
        preds = []
        for i in rows:
            if not np.any(B_test[i] != 0):
                preds.append(full.predict([test[i]])[0])
                continue
            S = order[i, :k]
            local = fit_linear_model(Y[S], [train[j] for j in S], genes, gene_embedding=gene_embedding,
                                     pert_embedding=pert_embedding, n_components=n_components, ridge=ridge)
            preds.append(local.predict([test[i]])[0])
        out[fraction] = np.vstack(preds)
    return out


def lsft_predict_authors(
    Y: np.ndarray,
    train: Sequence[str],
    test: Sequence[str],
    genes: Sequence[str],
    control: np.ndarray,
    *,
    fraction: float,
    gene_embedding: str | pd.DataFrame = "pca",
    pert_embedding: str | pd.DataFrame = "pca",
    n_components: int = N_COMPONENTS,
    ridge: float = RIDGE,
) -> np.ndarray:
    """LSFT under the authors' convention: one refit per test perturbation on its neighbours and the control.

    The neighbours are the ``ceil(n_fit * fraction)`` perturbations of the full model's fit set
    (single perturbations with an embedded target) most cosine-similar to the test perturbation in
    the full model's perturbation-embedding space; the local model recomputes its PCA on them and
    the control (:func:`perturbation_effect_lib.linear_model.fit_linear_model`, ``"authors"``). A
    test perturbation without an embedding keeps the full model's prediction.

    Returns
    -------
    numpy.ndarray
        Test x genes.
    """
    Y = np.asarray(Y, dtype=np.float64)
    train, test = list(train), list(test)
    kwargs = dict(gene_embedding=gene_embedding, pert_embedding=pert_embedding, n_components=n_components,
                  ridge=ridge, pca_convention=AUTHORS, control=control)
    full = fit_linear_model(Y, train, genes, **kwargs)
    pool = np.flatnonzero(full.fitted)
    B_pool, B_test = full.embed([train[j] for j in pool]), full.embed(test)
    order = top_neighbours(cosine_similarity(B_test, B_pool))
    k = n_neighbours(len(pool), fraction)
    pred = full.predict(test)
    for i in np.flatnonzero(np.any(B_test != 0, axis=1)):
        S = pool[order[i, :k]]
        local = fit_linear_model(Y[S], [train[j] for j in S], genes, **kwargs)
        pred[i] = local.predict([test[i]])[0]
    return pred


@dataclass
class TestPrediction:
    """What a linear method writes.

    Attributes
    ----------
    predictions
        Test x genes.
    hardness
        :func:`perturbation_effect_lib.hardness.hardness_table` in the full model's
        perturbation-embedding space, against the perturbations it was fitted to.
    excluded
        Training perturbations per reason outside the paper's model (``LinearModel.excluded``).
    """

    predictions: np.ndarray
    hardness: pd.DataFrame
    excluded: dict[str, list[str]]


def predict_test_perturbations(
    Y: np.ndarray,
    train: Sequence[str],
    test: Sequence[str],
    genes: Sequence[str],
    *,
    gene_embedding: str | pd.DataFrame,
    pert_embedding: str | pd.DataFrame,
    lsft_fraction: float,
    n_components: int = N_COMPONENTS,
    ridge: float = RIDGE,
    pca_convention: str = PERTURBATIONS,
    control: np.ndarray | None = None,
) -> TestPrediction:
    """Predict the test perturbations with the linear model, with LSFT when ``lsft_fraction`` > 0.

    Parameters
    ----------
    Y
        Training profiles, perturbations x genes.
    train, test
        Training and test perturbation ids.
    genes
        Measured genes.
    gene_embedding, pert_embedding
        ``"pca"`` or a fixed gene-level table, as in :func:`fit_linear_model`.
    lsft_fraction
        0 predicts with the model fitted on every training perturbation; a value in (0, 1] refits
        the model per test perturbation on that share of training perturbations
        (:func:`lsft_predict` or, under the authors' convention, :func:`lsft_predict_authors`).
    n_components, ridge
        Of the model.
    pca_convention, control
        As in :func:`fit_linear_model` (the control profile is needed by ``"authors"``).

    Returns
    -------
    TestPrediction
    """
    train, test = list(train), list(test)
    kwargs = dict(gene_embedding=gene_embedding, pert_embedding=pert_embedding, n_components=n_components, ridge=ridge)
    model: LinearModel = fit_linear_model(Y, train, genes, pca_convention=pca_convention, control=control, **kwargs)
    if not lsft_fraction:
        predictions = model.predict(test)
    elif pca_convention == AUTHORS:
        predictions = lsft_predict_authors(Y, train, test, genes, control, fraction=lsft_fraction, **kwargs)
    else:
        result = lsft_predict(Y, train, test, genes, fractions=[lsft_fraction], **kwargs)
        predictions = result.predictions[lsft_fraction]
    fitted = [p for p, keep in zip(train, model.fitted) if keep]
    hard = hardness_table(model.embed(test), model.embed(fitted), test)
    return TestPrediction(predictions=predictions, hardness=hard, excluded=model.excluded)
