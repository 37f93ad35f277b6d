"""Fixed gene-level embedding tables of the linear model: random, knowledge-graph spectral, GO membership.

A table has one row per gene and ``d`` columns; the linear model uses one as its gene embedding
``A`` (rows of the measured genes) or its perturbation embedding ``B`` (sums of the targets' rows,
see :mod:`perturbation_effect_lib.perturbation_targets`). The training-data PCA, the other source of
embeddings, is computed inside the fit (:mod:`perturbation_effect_lib.linear_model`).

* :func:`random_embedding`: a standard-normal vector per gene, seeded by the gene's name.
* :func:`spectral_embedding`: Laplacian eigenmaps of an interaction graph (HuRI, OmniPath).
* :func:`go_membership_embedding`: GO biological-process membership, reduced by truncated SVD.

Every table but the random one is scaled to the random one's size (:func:`_standard_scale`); the
GO table row by row (:func:`_rows_to_random_norm`), since its rows' sizes say how well the top
components capture a gene's terms, not how strongly the gene acts.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from perturbation_effect_lib.perturbation_targets import perturbation_targets

__all__ = [
    "N_COMPONENTS",
    "genes_to_embed",
    "table_rows",
    "random_embedding",
    "spectral_embedding",
    "go_membership_embedding",
]

#: Dimensions of the paper's embeddings (d = 10).
N_COMPONENTS = 10


def genes_to_embed(genes: Iterable[str], perturbations: Iterable[str]) -> list[str]:
    """The genes a fixed table is built for: the measured genes, then every target of ``perturbations``.

    Target names are known before any outcome, so the test perturbations' targets may be listed.
    Duplicates are kept (the table builders drop them, keeping the first).
    """
    return list(genes) + [t for p in perturbations for t in perturbation_targets(p)]


def table_rows(table: pd.DataFrame, genes: Sequence[str]) -> np.ndarray:
    """Rows of a gene-level ``table`` for ``genes``; zeros where a gene has no vector."""
    return table.reindex(pd.Index(genes)).fillna(0.0).to_numpy(dtype=np.float64)


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


def _rows_to_random_norm(matrix: np.ndarray, *, rtol: float = 1e-8) -> np.ndarray:
    """Scale every non-zero row to norm ``sqrt(d)``, the expected norm of a ``random`` row.

    Rows whose norm is below ``rtol`` times the largest are numerically zero and set to zero, so
    rounding noise is not blown up into a direction.
    """
    norms = np.linalg.norm(matrix, axis=1)
    keep = norms > rtol * (norms.max() if norms.size else 0.0)
    out = np.zeros_like(matrix)
    out[keep] = matrix[keep] * (math.sqrt(matrix.shape[1]) / norms[keep])[:, None]
    return out


def random_embedding(genes: Sequence[str], n_components: int = N_COMPONENTS, *, seed: int = 0) -> pd.DataFrame:
    """A standard-normal vector per gene, seeded by ``seed`` and the gene's name.

    A gene's vector does not depend on which other genes are asked for, so training and test
    perturbations of one gene always get the same vector.

    Parameters
    ----------
    genes
        Genes to embed (duplicates are dropped).
    n_components
        d.
    seed
        Combined with each gene's CRC32 to seed its vector.

    Returns
    -------
    pandas.DataFrame
        Genes x ``n_components``.
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
        With ``source`` and ``target`` gene symbols (e.g. one graph of a gene-knowledge file,
        :func:`perturbation_effect_lib.gene_knowledge.graph_edges`).
    n_components
        d.

    Returns
    -------
    pandas.DataFrame
        Genes of the largest component x ``n_components`` (see :func:`_standard_scale`).

    Raises
    ------
    ValueError
        When the largest connected component has too few genes for ``n_components``.
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
    singular vectors times singular values are the embedding. Each gene's vector is then scaled to
    norm ``sqrt(d)`` (:func:`_rows_to_random_norm`): projected, a gene whose terms the top
    components capture well would otherwise weigh several times more in the fit than one whose
    terms they capture partly (norms of 5.6 to 7.5 against a median of 0.9 on the test resources),
    and the ridge fit would extrapolate its prediction far beyond the observed changes. Genes in
    no term get zeros.

    Parameters
    ----------
    genes
        Genes to embed (duplicates are dropped); members of a set outside them are ignored.
    gene_sets
        Term name -> member genes (e.g. :func:`perturbation_effect_lib.gene_knowledge.gene_sets`).
    n_components
        d.

    Raises
    ------
    ValueError
        When no gene set holds two or more of ``genes``.
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
    return pd.DataFrame(_rows_to_random_norm(emb * signs), index=index)
