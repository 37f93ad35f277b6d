"""The linear model of unseen genetic perturbations, Y ~ A K B^T + b, fitted in closed form.

Ahlmann-Eltze, Huber & Anders (Nature Methods 2025, Methods "Linear model") predict the
pseudobulk profile of an unseen perturbation with

    Y ~ A K B^T + b,      K = (A^T A + l I)^-1 A^T (Y_train - b) B (B^T B + l I)^-1,

where ``Y_train`` holds the training profiles (genes x perturbations), ``b`` its row means (the
mean training profile), ``A`` a gene embedding (genes x d), ``B`` the perturbation embedding of
the training perturbations (perturbations x d) and ``l`` the ridge penalty (0.1; d = 10). The
prediction for a test perturbation with embedding ``p`` is ``A K p + b``.

Either embedding is ``"pca"`` or a fixed gene-level table (:mod:`perturbation_effect_lib.embeddings`):

* ``"pca"``: the gene scores of the top ``d`` principal components of the centred training matrix
  (``Y_train - b``, genes as observations). As a *perturbation* embedding a perturbation is the
  row of its target gene in that matrix: it is built from the training perturbations' outcomes
  only, never from the perturbation's own.
* a table: a perturbation is the sum of its targets' rows (a target without a row contributes
  zero; :mod:`perturbation_effect_lib.perturbation_targets`).

Two conventions of the training data (``pca_convention``):

* ``"authors"`` (:data:`AUTHORS`), the authors' code (``run_linear_pretrained_model.R`` of the
  paper's repository): the control condition joins the training conditions; the PCA is of their
  *expression* with genes as observations and each condition centred across genes (so PC1 follows
  expression level); the model is fitted to the *change from control* of the single perturbations
  whose target has an embedding, plus the control (change 0, embedding 0), and ``b`` is the mean
  change of that fit set plus the control profile. Combinations and perturbations whose target has
  no embedding row are left out of the fit (and counted, :attr:`LinearModel.excluded`).
* ``"perturbations"`` (:data:`PERTURBATIONS`): the training perturbations only; ``b`` is their mean
  profile and the PCA is of ``Y_train - b`` (each gene centred across perturbations); every
  training perturbation is fitted, a combination as the sum of its targets' rows and a target
  without a row as zero (those are counted too, but stay in the fit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from perturbation_effect_lib.embeddings import N_COMPONENTS, table_rows
from perturbation_effect_lib.perturbation_targets import embed_perturbations, perturbation_targets

__all__ = ["N_COMPONENTS", "RIDGE", "AUTHORS", "PERTURBATIONS", "PCA_CONVENTIONS", "pca_gene_scores", "ridge_core",
           "LinearModel", "fit_linear_model", "fit_set"]

#: Ridge penalty of the paper's linear model.
RIDGE = 0.1
#: The authors' convention: control among the conditions, PCA of expression centred per condition.
AUTHORS = "authors"
#: Training perturbations only, PCA of the profiles centred per gene.
PERTURBATIONS = "perturbations"
PCA_CONVENTIONS = (AUTHORS, PERTURBATIONS)


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


def ridge_core(AtA: np.ndarray, AtY: np.ndarray, P: np.ndarray, ridge: float) -> np.ndarray:
    """``(A^T A + l I)^-1 (A^T Yc) P (P^T P + l I)^-1`` for stacks of matrices (last two axes).

    Parameters
    ----------
    AtA
        ``A^T A`` (... x d_a x d_a).
    AtY
        ``A^T Yc``, the gene embedding times the centred training profiles (... x d_a x n).
    P
        Perturbation embedding of the training perturbations (... x n x d_b).
    ridge
        The ridge penalty ``l``.

    Returns
    -------
    numpy.ndarray
        The core ``K`` (... x d_a x d_b).
    """
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
    excluded
        Training perturbations per reason (``"combination"``, ``"target_without_embedding"``):
        left out of the fit (``"authors"``) or fitted with a zero or partial embedding
        (``"perturbations"``); see :func:`fit_set`.
    fitted
        Whether each training perturbation entered the fit.
    """

    genes: pd.Index
    A: np.ndarray
    K: np.ndarray
    b: np.ndarray
    pert_genes: pd.Index
    pert_table: np.ndarray
    excluded: dict[str, list[str]] = field(default_factory=dict)
    fitted: np.ndarray | None = None

    def embed(self, perturbations: Sequence[str]) -> np.ndarray:
        """Perturbation embeddings (perturbations x d_b): sums of the targets' vectors."""
        return embed_perturbations(perturbations, self.pert_genes, self.pert_table)

    def predict(self, perturbations: Sequence[str]) -> np.ndarray:
        """Predicted profiles, perturbations x genes."""
        return self.embed(perturbations) @ self.K.T @ self.A.T + self.b


def fit_set(perturbations: Sequence[str], embedded_genes: pd.Index) -> tuple[np.ndarray, dict[str, list[str]]]:
    """Which training perturbations the paper's model can be fitted to, and why the others cannot.

    In the authors' code a perturbation is matched to the embedding by name, so only a single
    perturbation whose target has an embedding row enters the fit: a combination (``"A+B"``) and a
    target outside the table (e.g. an unmeasured gene under the PCA embedding) do not.

    Parameters
    ----------
    perturbations
        Training perturbation ids.
    embedded_genes
        Genes with a row in the perturbation-embedding table.

    Returns
    -------
    keep, excluded
        Boolean mask of the fit set; perturbation ids per reason (``"combination"``,
        ``"target_without_embedding"``).
    """
    known = set(map(str, embedded_genes))
    keep = np.zeros(len(perturbations), dtype=bool)
    excluded: dict[str, list[str]] = {"combination": [], "target_without_embedding": []}
    for i, pert in enumerate(perturbations):
        targets = perturbation_targets(pert)
        if len(targets) != 1:
            excluded["combination"].append(str(pert))
        elif targets[0] not in known:
            excluded["target_without_embedding"].append(str(pert))
        else:
            keep[i] = True
    return keep, excluded


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
    pca_convention: str = PERTURBATIONS,
    control: np.ndarray | None = None,
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
        e.g. from :mod:`perturbation_effect_lib.embeddings`).
    n_components
        d of the PCA embedding.
    ridge
        The ridge penalty.
    gram
        ``(Y - b) @ (Y - b).T`` (perturbations x perturbations, ``b`` the column means) when the
        caller has computed it already; saves the largest product of a PCA fit (``"perturbations"``
        convention only).
    pca_convention
        ``"authors"`` or ``"perturbations"`` (module docstring).
    control
        The control profile (genes); required by the ``"authors"`` convention.

    Returns
    -------
    LinearModel
        The fit; :meth:`LinearModel.predict` predicts any perturbation from its targets.

    Raises
    ------
    ValueError
        For an unknown embedding or convention, a shape mismatch, a missing control profile, or
        when no training perturbation can be fitted.
    """
    Y = np.asarray(Y, dtype=np.float64)
    genes = pd.Index(genes)
    perturbations = [str(p) for p in perturbations]
    if Y.shape != (len(perturbations), len(genes)):
        raise ValueError(f"Y has shape {Y.shape}, expected {(len(perturbations), len(genes))} (perturbations x genes)")
    if pca_convention not in PCA_CONVENTIONS:
        raise ValueError(f"pca_convention must be one of {PCA_CONVENTIONS}, got {pca_convention!r}")
    for name, value in (("gene_embedding", gene_embedding), ("pert_embedding", pert_embedding)):
        if isinstance(value, str) and value != "pca":
            raise ValueError(f"{name} must be 'pca' or a table, got {value!r}")
    uses_pca = isinstance(gene_embedding, str) or isinstance(pert_embedding, str)
    pert_genes = genes if isinstance(pert_embedding, str) else pd.Index(pert_embedding.index)
    keep, excluded = fit_set(perturbations, pert_genes)
    if pca_convention == AUTHORS:
        if control is None:
            raise ValueError("the authors' convention needs the control profile (control=...)")
        control = np.asarray(control, dtype=np.float64)
        if control.shape != (len(genes),):
            raise ValueError(f"control has shape {control.shape}, expected ({len(genes)},)")
        if not keep.any():
            raise ValueError(f"no training perturbation can be fitted: {len(excluded['combination'])} combinations and "
                             f"{len(excluded['target_without_embedding'])} single perturbations whose target has no embedding")
        # PCA of every training condition with the control (conditions x genes), each condition
        # centred across genes: prcomp of the genes x conditions matrix with genes as observations.
        conditions = np.vstack([Y, control])
        scores = pca_gene_scores(conditions - conditions.mean(axis=1, keepdims=True), n_components) if uses_pca else None
        # The fit set's change from control, with the control itself (change 0, embedding 0).
        change = np.vstack([Y[keep] - control, np.zeros(len(genes))])
        centre = change.mean(axis=0)
        centred = change - centre
        fitted_perts = [*np.asarray(perturbations, dtype=object)[keep], None]
        b = centre + control
    else:
        b = Y.mean(axis=0)
        centred = Y - b
        scores = pca_gene_scores(centred, n_components, gram=gram) if uses_pca else None
        fitted_perts = perturbations
        keep = np.ones(len(perturbations), dtype=bool)
    A = scores if isinstance(gene_embedding, str) else table_rows(gene_embedding, genes)
    pert_table = scores if isinstance(pert_embedding, str) else pert_embedding.to_numpy(dtype=np.float64)
    # The control row (None) has no target: embed_perturbations gives it the zero vector.
    P = embed_perturbations(["" if p is None else p for p in fitted_perts], pert_genes, pert_table)
    K = ridge_core(A.T @ A, A.T @ centred.T, P, ridge)
    return LinearModel(genes=genes, A=A, K=K, b=b, pert_genes=pert_genes, pert_table=pert_table,
                       excluded=excluded, fitted=keep)
