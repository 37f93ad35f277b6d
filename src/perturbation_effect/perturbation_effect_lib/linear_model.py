"""The linear baseline of unseen genetic perturbations, its embeddings, and LSFT.

Ahlmann-Eltze, Huber & Anders (Nature Methods 2025, Methods "Linear model") predict the
pseudobulk profile of an unseen perturbation with

    Y ~ A K B^T + b,      K = (A^T A + l I)^-1 A^T (Y_train - b) B (B^T B + l I)^-1,

where ``Y_train`` holds the training profiles (genes x perturbations), ``b`` its row means (the
mean training profile), ``A`` a gene embedding (genes x d), ``B`` the perturbation embedding of
the training perturbations (perturbations x d) and ``l`` the ridge penalty (0.1; d = 10). The
prediction for a test perturbation with embedding ``p`` is ``A K p + b``.

Embeddings (the ``"pca"`` source is computed from the training data, the others are fixed tables
of gene-level vectors; see :func:`embedding_table`):

* ``pca``: the gene scores of the top ``d`` principal components of the centred training matrix
  (``Y_train - b``, genes as observations). As a *perturbation* embedding a perturbation is the
  row of its target gene in that matrix: it is built from the training perturbations' outcomes
  only, never from the perturbation's own.
* ``random``: a standard-normal vector per gene, seeded by the gene's name.
* ``huri`` / ``omnipath``: Laplacian eigenmaps (spectral embedding) of the HuRI protein-protein
  interaction graph or the OmniPath signalling graph (``pertsci.knowledge_graphs``).
* ``go_bp``: GO biological-process membership of the genes, reduced by truncated SVD.

A combination ``A+B`` is embedded as the sum of its targets' vectors (a linear model's natural
superposition); a target without a vector contributes zero.

**LSFT** (local similarity-filtered training, methods appendix): for each test perturbation, the
top 1/5/10% training perturbations by cosine similarity in the full model's perturbation-embedding
space are kept and the whole model (``b``, the PCA embeddings and ``K``) is refitted on them.
:func:`lsft_predict` does this for every test perturbation at once: the PCA of a subset of ``k``
perturbations is the eigendecomposition of its ``k x k`` centred Gram matrix, which is gathered
from one Gram matrix of all training perturbations, so every refit reduces to small batched
linear algebra and the prediction is a weighted sum of the neighbours' profiles.
:func:`lsft_predict_reference` refits one model per test perturbation (the definition; slow).
**Hardness** (methods appendix): the mean cosine similarity of a test perturbation to its top-k
training perturbations in the same space.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

__all__ = [
    "EMBEDDING_SOURCES",
    "N_COMPONENTS",
    "RIDGE",
    "LSFT_FRACTIONS",
    "target_matrix",
    "random_embedding",
    "spectral_embedding",
    "go_membership_embedding",
    "embedding_table",
    "pca_gene_scores",
    "LinearModel",
    "fit_linear_model",
    "cosine_similarity",
    "hardness",
    "LSFTResult",
    "lsft_predict",
    "lsft_predict_reference",
    "predict_task",
    "mean_prediction",
    "additive_prediction",
]

#: Embedding sources understood by :func:`fit_linear_model` (``pca``) and :func:`embedding_table`.
EMBEDDING_SOURCES = ("pca", "random", "huri", "omnipath", "go_bp")
#: Dimensions and ridge penalty of the paper's linear model.
N_COMPONENTS = 10
RIDGE = 0.1
#: LSFT fractions of the methods appendix.
LSFT_FRACTIONS = (0.01, 0.05, 0.10)


# --------------------------------------------------------------------------------------------------
# perturbations and gene-level embedding tables


def _targets(perturbation: str) -> list[str]:
    return [t for t in str(perturbation).split("+") if t]


def target_matrix(perturbations: Sequence[str], genes: Sequence[str]) -> sp.csr_matrix:
    """Indicator matrix perturbations x genes: 1 where the gene is a target of the perturbation.

    Perturbation ids are targets joined by ``+``; targets that are not in ``genes`` are ignored.
    """
    position = {g: j for j, g in enumerate(genes)}
    rows, cols = [], []
    for i, pert in enumerate(perturbations):
        for t in _targets(pert):
            j = position.get(t)
            if j is not None:
                rows.append(i)
                cols.append(j)
    return sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(perturbations), len(position)))


def _standard_scale(matrix: np.ndarray) -> np.ndarray:
    """Scale a gene-level table so that its non-zero rows have mean squared norm d (its width).

    That is the scale of the ``random`` table (standard-normal entries), so every fixed embedding
    meets the ridge penalty of 0.1 on the same footing whatever its source's units. One factor for
    the whole table keeps the relative weight of its dimensions (scaling each column separately
    would blow up minor components that live on a handful of genes).
    """
    sq = np.sum(matrix**2, axis=1)
    nonzero = sq > 0
    if not nonzero.any():
        return matrix
    return matrix * math.sqrt(matrix.shape[1] / sq[nonzero].mean())


def random_embedding(genes: Sequence[str], n_components: int = N_COMPONENTS, *, seed: int = 0) -> pd.DataFrame:
    """A standard-normal vector per gene, seeded by ``seed`` and the gene's name.

    A gene's vector does not depend on which other genes are asked for, so training and test
    perturbations of one gene always get the same vector.
    """
    genes = list(dict.fromkeys(str(g) for g in genes))
    rows = [np.random.default_rng([seed, zlib.crc32(g.encode())]).standard_normal(n_components) for g in genes]
    return pd.DataFrame(np.vstack(rows) if rows else np.zeros((0, n_components)), index=genes)


def spectral_embedding(edges: pd.DataFrame, n_components: int = N_COMPONENTS) -> pd.DataFrame:
    """Laplacian eigenmaps of an (undirected view of an) interaction graph.

    The graph is symmetrised and reduced to its largest connected component; the embedding is
    ``D^-1/2 u`` for the ``n_components`` leading non-trivial eigenvectors ``u`` of the normalised
    adjacency ``D^-1/2 W D^-1/2`` (the smallest non-trivial ones of the normalised Laplacian).

    Parameters
    ----------
    edges
        With ``source`` and ``target`` gene symbols (``pertsci.knowledge_graphs`` edge tables).

    Returns
    -------
    pandas.DataFrame
        Genes of the largest component x ``n_components`` (see :func:`_standard_scale`).
    """
    from scipy.sparse.csgraph import connected_components
    from scipy.sparse.linalg import eigsh

    from pertsci.knowledge_graphs import adjacency

    mat, index = adjacency(edges, symmetric=True)
    mat = abs(mat).tocsr()
    mat.setdiag(0)
    mat.eliminate_zeros()
    _, labels = connected_components(mat, directed=False)
    largest = np.argmax(np.bincount(labels))
    keep = np.flatnonzero(labels == largest)
    mat = mat[keep][:, keep]
    if len(keep) <= n_components + 1:
        raise ValueError(f"the largest connected component has {len(keep)} genes; {n_components + 1} are needed")
    degree = np.asarray(mat.sum(axis=1)).ravel()
    inv_sqrt = sp.diags(1.0 / np.sqrt(degree))
    normalised = inv_sqrt @ mat @ inv_sqrt
    # Deterministic start vector: eigsh otherwise starts from a random one.
    v0 = np.sqrt(degree) / np.linalg.norm(np.sqrt(degree))
    values, vectors = eigsh(normalised, k=n_components + 1, which="LA", v0=v0, tol=1e-8)
    order = np.argsort(values)[::-1]
    vectors = vectors[:, order[1:]] / np.sqrt(degree)[:, None]
    # Fix each eigenvector's sign so that results do not depend on the solver.
    signs = np.sign(vectors[np.argmax(np.abs(vectors), axis=0), np.arange(vectors.shape[1])])
    return pd.DataFrame(_standard_scale(vectors * signs), index=index[keep])


def go_membership_embedding(genes: Sequence[str], gene_sets: dict[str, list[str]],
                            n_components: int = N_COMPONENTS) -> pd.DataFrame:
    """GO-term membership of ``genes``, reduced to ``n_components`` dimensions.

    The genes x terms membership matrix (terms holding at least two of ``genes``) is weighted by
    ``1 / sqrt(term size)`` so that broad terms count less, rows are L2-normalised, and the top
    singular vectors times singular values are the embedding. Genes in no term get zeros.
    """
    from scipy.sparse.linalg import svds

    index = pd.Index(list(dict.fromkeys(str(g) for g in genes)))
    rows, cols, vals = [], [], []
    n_terms = 0
    for name in sorted(gene_sets):
        pos = index.get_indexer(list(set(gene_sets[name])))
        pos = pos[pos >= 0]
        if len(pos) < 2:
            continue
        rows.extend(pos.tolist())
        cols.extend([n_terms] * len(pos))
        vals.extend([1.0 / math.sqrt(len(pos))] * len(pos))
        n_terms += 1
    if n_terms == 0:
        raise ValueError("no gene set holds two or more of the genes")
    member = sp.csr_matrix((vals, (rows, cols)), shape=(len(index), n_terms))
    norms = np.sqrt(np.asarray(member.multiply(member).sum(axis=1)).ravel())
    member = sp.diags(np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)) @ member
    if min(member.shape) > n_components + 1:
        u, s, _ = svds(member, k=n_components, v0=np.ones(min(member.shape)) / math.sqrt(min(member.shape)))
    else:  # too few genes or terms for the sparse solver: a dense SVD, padded to the width asked for
        u, s, _ = np.linalg.svd(member.toarray(), full_matrices=False)
        u = np.pad(u[:, :n_components], ((0, 0), (0, max(0, n_components - u.shape[1]))))
        s = np.pad(s[:n_components], (0, max(0, n_components - len(s))))
    order = np.argsort(s, kind="stable")[::-1]
    emb = u[:, order] * s[order]
    signs = np.sign(emb[np.argmax(np.abs(emb), axis=0), np.arange(emb.shape[1])])
    signs[signs == 0] = 1.0
    return pd.DataFrame(_standard_scale(emb * signs), index=index)


def embedding_table(source: str, genes: Sequence[str], n_components: int = N_COMPONENTS, *, seed: int = 0,
                    data_dir=None) -> pd.DataFrame:
    """A fixed gene-level embedding (genes x ``n_components``) from one of :data:`EMBEDDING_SOURCES`.

    ``genes`` are the genes the caller needs (measured genes and perturbation targets); the
    ``random`` and ``go_bp`` tables are built for exactly those, the knowledge-graph tables for the
    whole graph (genes outside it then count as zero vectors).
    """
    from pertsci import knowledge_graphs as kg

    if source == "random":
        return random_embedding(genes, n_components, seed=seed)
    if source == "huri":
        return spectral_embedding(kg.huri_edges(data_dir), n_components)
    if source == "omnipath":
        return spectral_embedding(kg.omnipath_edges(data_dir), n_components)
    if source == "go_bp":
        return go_membership_embedding(genes, kg.gene_sets("go_bp", data_dir), n_components)
    raise ValueError(f"unknown fixed embedding source {source!r}; expected one of {EMBEDDING_SOURCES[1:]}")


# --------------------------------------------------------------------------------------------------
# the linear model


# Above this size, the top eigenpairs of a Gram matrix come from Lanczos iterations (matrix-vector
# products) rather than from a dense tridiagonal reduction, which costs O(m^3) whatever d is.
_DENSE_EIGH_MAX = 400


def _top_eigh(gram: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``d`` largest eigenvalues (decreasing) and their eigenvectors of a symmetric PSD matrix."""
    import scipy.linalg
    from scipy.sparse.linalg import eigsh

    m = gram.shape[0]
    if m <= _DENSE_EIGH_MAX or d >= m - 1:
        values, vectors = scipy.linalg.eigh(gram, subset_by_index=[m - d, m - 1])
    else:
        # A fixed start vector keeps the result deterministic; tol=0 asks for machine precision.
        values, vectors = eigsh(gram, k=d, which="LA", v0=np.full(m, 1.0 / np.sqrt(m)), tol=0)
        order = np.argsort(values)
        values, vectors = values[order], vectors[:, order]
    return values[::-1], vectors[:, ::-1]


def pca_gene_scores(centred: np.ndarray, n_components: int = N_COMPONENTS, *, gram: np.ndarray | None = None) -> np.ndarray:
    """Gene scores (genes x d) of the top principal components of a centred perturbations x genes matrix.

    With ``centred = U S V^T`` these are ``V S`` restricted to the top ``d = min(n_components,
    n_perturbations, n_genes)`` components: the genes' coordinates when genes are the observations
    and perturbations the variables. Only the top ``d`` eigenpairs of the smaller Gram matrix are
    computed, which keeps a fit cheap with thousands of genes and perturbations.

    Parameters
    ----------
    centred
        Perturbations x genes, columns centred.
    n_components
        d.
    gram
        ``centred @ centred.T`` when the caller has it already (used when there are no more
        perturbations than genes).
    """
    n, g = centred.shape
    d = min(n_components, n, g)
    if n <= g:
        gram = centred @ centred.T if gram is None else gram
        _, u = _top_eigh(gram, d)
        return centred.T @ u
    values, v = _top_eigh(centred.T @ centred, d)
    return v * np.sqrt(np.clip(values, 0.0, None))


def _fixed_rows(table: pd.DataFrame, genes: Sequence[str]) -> np.ndarray:
    """Rows of ``table`` for ``genes``; zeros where a gene has no vector."""
    return table.reindex(pd.Index(genes)).fillna(0.0).to_numpy(dtype=np.float64)


def _embed_perturbations(perturbations: Sequence[str], table_genes: pd.Index, table: np.ndarray) -> np.ndarray:
    """Sum of the target genes' rows of a gene-level table."""
    return target_matrix(perturbations, table_genes) @ table


def _ridge_core(AtA: np.ndarray, AtY: np.ndarray, P: np.ndarray, ridge: float) -> np.ndarray:
    """``(A^T A + l I)^-1 (A^T Yc) P (P^T P + l I)^-1`` for stacks of matrices (last two axes)."""
    d_a = AtA.shape[-1]
    d_b = P.shape[-1]
    left = np.linalg.solve(AtA + ridge * np.eye(d_a), AtY @ P)
    PtP = np.swapaxes(P, -1, -2) @ P + ridge * np.eye(d_b)
    # right-multiplication by the inverse of a symmetric matrix: solve the transposed system.
    return np.swapaxes(np.linalg.solve(PtP, np.swapaxes(left, -1, -2)), -1, -2)


@dataclass
class LinearModel:
    """A fitted ``Y ~ A K B^T + b``.

    Attributes
    ----------
    genes
        Measured genes (the rows of ``A`` and of the predictions).
    A
        Gene embedding, genes x d_a.
    K
        d_a x d_b core matrix.
    b
        Mean training profile.
    pert_genes, pert_table
        The gene-level table perturbations are embedded from (its genes and vectors).
    """

    genes: pd.Index
    A: np.ndarray
    K: np.ndarray
    b: np.ndarray
    pert_genes: pd.Index
    pert_table: np.ndarray

    def embed(self, perturbations: Sequence[str]) -> np.ndarray:
        """Perturbation embeddings (perturbations x d_b): sums of the targets' vectors."""
        return _embed_perturbations(perturbations, self.pert_genes, self.pert_table)

    def predict(self, perturbations: Sequence[str]) -> np.ndarray:
        """Predicted profiles, perturbations x genes."""
        return self.embed(perturbations) @ self.K.T @ self.A.T + self.b


def fit_linear_model(
    Y: np.ndarray,
    perturbations: Sequence[str],
    genes: Sequence[str],
    *,
    gene_embedding: str | pd.DataFrame = "pca",
    pert_embedding: str | pd.DataFrame = "pca",
    n_components: int = N_COMPONENTS,
    ridge: float = RIDGE,
    gram: np.ndarray | None = None,
) -> LinearModel:
    """Fit the linear model on training profiles.

    Parameters
    ----------
    Y
        Training profiles, perturbations x genes.
    perturbations
        Their ids (targets joined by ``+``).
    genes
        The measured genes (columns of ``Y``).
    gene_embedding, pert_embedding
        ``"pca"`` (from ``Y``; see the module docstring) or a fixed gene-level table (genes x d,
        e.g. from :func:`embedding_table`).
    n_components
        d of the PCA embedding.
    ridge
        The ridge penalty.
    gram
        ``(Y - b) @ (Y - b).T`` (perturbations x perturbations, ``b`` the column means) when the
        caller has computed it already; saves the largest product of a PCA fit.
    """
    Y = np.asarray(Y, dtype=np.float64)
    genes = pd.Index(genes)
    if Y.shape != (len(perturbations), len(genes)):
        raise ValueError(f"Y has shape {Y.shape}, expected {(len(perturbations), len(genes))} (perturbations x genes)")
    b = Y.mean(axis=0)
    centred = Y - b
    uses_pca = isinstance(gene_embedding, str) or isinstance(pert_embedding, str)
    scores = pca_gene_scores(centred, n_components, gram=gram) if uses_pca else None
    if isinstance(gene_embedding, str):
        if gene_embedding != "pca":
            raise ValueError(f"gene_embedding must be 'pca' or a table, got {gene_embedding!r}")
        A = scores
    else:
        A = _fixed_rows(gene_embedding, genes)
    if isinstance(pert_embedding, str):
        if pert_embedding != "pca":
            raise ValueError(f"pert_embedding must be 'pca' or a table, got {pert_embedding!r}")
        pert_genes, pert_table = genes, scores
    else:
        pert_genes, pert_table = pd.Index(pert_embedding.index), pert_embedding.to_numpy(dtype=np.float64)
    P = _embed_perturbations(perturbations, pert_genes, pert_table)
    K = _ridge_core(A.T @ A, A.T @ centred.T, P, ridge)
    return LinearModel(genes=genes, A=A, K=K, b=b, pert_genes=pert_genes, pert_table=pert_table)


# --------------------------------------------------------------------------------------------------
# similarity, hardness, LSFT


def cosine_similarity(X: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``X`` with every row of ``Z``; 0 where a row is zero."""
    def unit(M):
        norms = np.linalg.norm(M, axis=1, keepdims=True)
        return np.divide(M, norms, out=np.zeros_like(M, dtype=np.float64), where=norms > 0)

    return unit(np.asarray(X, dtype=np.float64)) @ unit(np.asarray(Z, dtype=np.float64)).T


def _n_neighbours(n_train: int, fraction: float) -> int:
    if not 0 < fraction <= 1:
        raise ValueError(f"an LSFT fraction must be in (0, 1], got {fraction}")
    return max(1, math.ceil(n_train * fraction))


def _top_neighbours(similarity: np.ndarray) -> np.ndarray:
    """Training indices of each row sorted by decreasing similarity (ties: lower index first)."""
    return np.argsort(-similarity, axis=1, kind="stable")


def hardness(B_test: np.ndarray, B_train: np.ndarray, fractions: Sequence[float] = LSFT_FRACTIONS) -> np.ndarray:
    """Mean cosine similarity of each test perturbation to its top ``ceil(n_train * f)`` training ones.

    Returns
    -------
    numpy.ndarray
        n_test x len(fractions); NaN for a test perturbation without an embedding (zero vector).
    """
    sim = cosine_similarity(B_test, B_train)
    ordered = -np.sort(-sim, axis=1)
    out = np.column_stack([ordered[:, :_n_neighbours(B_train.shape[0], f)].mean(axis=1) for f in fractions])
    out[~np.any(np.asarray(B_test) != 0, axis=1)] = np.nan
    return out


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
    order = _top_neighbours(sim)
    full_pred = full.predict(test)

    if pert_pca:
        E_train = target_matrix(train, genes)
        E_test = target_matrix(test, genes)
        Q_train = np.asarray((E_train @ Y0.T).T)  # [i, j]: training profile i at perturbation j's targets
        Q_test = np.asarray((E_test @ Y0.T).T)
    else:
        table_genes = pd.Index(pert_embedding.index)
        table = pert_embedding.to_numpy(dtype=np.float64)
        Bf_train = _embed_perturbations(train, table_genes, table)
        Bf_test = _embed_perturbations(test, table_genes, table)
    if not gene_pca:
        A = _fixed_rows(gene_embedding, genes)
        AtA = A.T @ A
        YA = Y0 @ A

    predictions, neighbours = {}, {}
    # The batches are many small matrices: threaded BLAS only adds overhead there (and suffers
    # badly on shared cores), so they run single-threaded; the large products above do not.
    with threadpool_limits(limits=1, user_api="blas"):
        for fraction in fractions:
            k = _n_neighbours(n, fraction)
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
                Kc = _ridge_core(AtA_b, AtY_b, P, ridge)
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
    order = _top_neighbours(cosine_similarity(B_test, B_train))
    rows = list(range(len(test))) if test_index is None else list(test_index)
    out = {}
    for fraction in fractions:
        k = _n_neighbours(len(train), fraction)
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


def predict_task(
    train,
    test,
    *,
    gene_embedding: str = "pca",
    pert_embedding: str = "pca",
    n_components: int = N_COMPONENTS,
    ridge: float = RIDGE,
    lsft_fraction: float | None = None,
    seed: int = 0,
    data_dir=None,
) -> tuple[np.ndarray, pd.DataFrame]:
    """Predict the task's test perturbations with the linear model (one component's whole job).

    Parameters
    ----------
    train, test
        The task's training and test AnnData (``X`` of ``train`` holds the profiles; perturbation
        ids are the ``obs_names``).
    gene_embedding, pert_embedding
        Sources from :data:`EMBEDDING_SOURCES`; fixed tables are built for the measured genes and
        every target of ``train`` and ``test`` (target names are known before any outcome).
    n_components, ridge
        Of the model.
    lsft_fraction
        ``None`` reads ``train.uns["lsft_fraction"]`` (0 when absent); a value in (0, 1] refits the
        model per test perturbation on that share of training perturbations (:func:`lsft_predict`).
    seed
        Of the ``random`` embedding.
    data_dir
        Knowledge-graph folder for ``huri``, ``omnipath`` and ``go_bp`` (default: the shared data).

    Returns
    -------
    predictions, hardness
        Test x genes; and test x ``hardness_top1pct``, ``hardness_top5pct``, ``hardness_top10pct``.
    """
    for source in (gene_embedding, pert_embedding):
        if source not in EMBEDDING_SOURCES:
            raise ValueError(f"unknown embedding source {source!r}; expected one of {EMBEDDING_SOURCES}")
    genes = pd.Index(train.var_names)
    train_ids, test_ids = list(train.obs_names), list(test.obs_names)
    wanted = list(genes) + [t for p in train_ids + test_ids for t in _targets(p)]

    def resolve(source):
        return "pca" if source == "pca" else embedding_table(source, wanted, n_components, seed=seed, data_dir=data_dir)

    A, B = resolve(gene_embedding), resolve(pert_embedding)
    Y = np.asarray(train.X.toarray() if sp.issparse(train.X) else train.X, dtype=np.float64)
    if lsft_fraction is None:
        lsft_fraction = float(train.uns.get("lsft_fraction", 0.0))
    fractions = list(LSFT_FRACTIONS)
    if lsft_fraction:
        result = lsft_predict(Y, train_ids, test_ids, genes, fractions=[lsft_fraction], gene_embedding=A,
                              pert_embedding=B, n_components=n_components, ridge=ridge)
        predictions = result.predictions[lsft_fraction]
    model = fit_linear_model(Y, train_ids, genes, gene_embedding=A, pert_embedding=B, n_components=n_components, ridge=ridge)
    if not lsft_fraction:
        predictions = model.predict(test_ids)
    hard = hardness(model.embed(test_ids), model.embed(train_ids), fractions)
    columns = [f"hardness_top{round(100 * f)}pct" for f in fractions]
    return predictions, pd.DataFrame(hard, index=pd.Index(test_ids), columns=columns)


# --------------------------------------------------------------------------------------------------
# baselines without an embedding


def mean_prediction(Y: np.ndarray, n_test: int) -> np.ndarray:
    """The mean training profile for every test perturbation (the ``mean`` baseline)."""
    return np.tile(np.asarray(Y, dtype=np.float64).mean(axis=0), (n_test, 1))


def additive_prediction(Y: np.ndarray, train: Sequence[str], test: Sequence[str], control: np.ndarray) -> np.ndarray:
    """Additive baseline: control plus the sum of the targets' single-perturbation changes.

    A target's change is its training single perturbation's profile minus control. A target
    without a training single perturbation (an unseen gene) contributes the mean change of the
    training single perturbations, so an unseen single perturbation is predicted by that mean.

    Raises
    ------
    ValueError
        When the training data has no single perturbation.
    """
    Y = np.asarray(Y, dtype=np.float64)
    control = np.asarray(control, dtype=np.float64)
    singles = {t[0]: i for i, t in enumerate(_targets(p) for p in train) if len(t) == 1}
    if not singles:
        raise ValueError("the additive baseline needs single perturbations in the training data")
    changes = Y[list(singles.values())] - control
    single_index = {g: j for j, g in enumerate(singles)}
    fallback = changes.mean(axis=0)
    out = np.empty((len(test), Y.shape[1]))
    for i, pert in enumerate(test):
        delta = np.zeros(Y.shape[1])
        for t in _targets(pert):
            delta += changes[single_index[t]] if t in single_index else fallback
        out[i] = control + delta
    return out


def run_component(par: Mapping, method_id: str, *, gene_embedding: str, pert_embedding: str) -> None:
    """The whole of a linear-baseline component: read ``input_train`` and ``input_test``, predict, write ``output``.

    Parameters
    ----------
    par
        The component's parameters: the file arguments, ``n_components``, ``ridge``,
        ``lsft_fraction`` and, for the random embeddings, ``seed``.
    method_id
        Written to the prediction.
    gene_embedding, pert_embedding
        As :func:`predict_task`.
    """
    import anndata as ad

    train = ad.read_h5ad(par["input_train"])
    test = ad.read_h5ad(par["input_test"])
    prediction, hard = predict_task(
        train, test, gene_embedding=gene_embedding, pert_embedding=pert_embedding, n_components=par["n_components"],
        ridge=par["ridge"], lsft_fraction=par["lsft_fraction"], seed=par.get("seed", 0),
    )
    uns = {"dataset_id": test.uns["dataset_id"], "method_id": method_id}
    ad.AnnData(obs=hard, var=train.var[[]], layers={"prediction": prediction}, uns=uns).write_h5ad(par["output"], compression="gzip")
