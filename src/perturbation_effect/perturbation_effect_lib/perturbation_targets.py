"""Perturbation ids (target genes joined by ``+``) and their targets as an indicator matrix.

A perturbation id is ``"A"`` for a single perturbation of gene ``A`` and ``"A+B"`` for a
combination. A perturbation is embedded by the sum of its targets' rows of a gene-level table (a
linear model's natural superposition); a target without a row contributes zero.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

__all__ = ["perturbation_targets", "target_matrix", "embed_perturbations"]


def perturbation_targets(perturbation: str) -> list[str]:
    """The target genes of one perturbation id (empty parts are ignored).

    Examples
    --------
    >>> perturbation_targets("CBL+CNN1"), perturbation_targets("KLF1")
    (['CBL', 'CNN1'], ['KLF1'])
    """
    return [t for t in str(perturbation).split("+") if t]


def target_matrix(perturbations: Sequence[str], genes: Sequence[str]) -> sp.csr_matrix:
    """Indicator matrix perturbations x genes: 1 where the gene is a target of the perturbation.

    Parameters
    ----------
    perturbations
        Perturbation ids (targets joined by ``+``).
    genes
        The columns; targets that are not among them are ignored.
    """
    position = {g: j for j, g in enumerate(genes)}
    rows, cols = [], []
    for i, pert in enumerate(perturbations):
        for t in perturbation_targets(pert):
            j = position.get(t)
            if j is not None:
                rows.append(i)
                cols.append(j)
    return sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(perturbations), len(position)))


def embed_perturbations(perturbations: Sequence[str], table_genes: pd.Index, table: np.ndarray) -> np.ndarray:
    """Perturbation embeddings (perturbations x d): the sum of the targets' rows of a gene-level table.

    Parameters
    ----------
    perturbations
        Perturbation ids.
    table_genes
        The genes of the table's rows.
    table
        Genes x d.
    """
    return target_matrix(perturbations, table_genes) @ table
