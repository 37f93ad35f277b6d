"""Targets compressed on their leading SVD components, so that models predict a few components, not every gene.

Several of the competition's top solutions compressed the targets this way (Szałata et al. 2024,
appendix E.1); the target encodings are also taken in this space.
"""

from __future__ import annotations

import numpy as np


def svd_basis(values: np.ndarray, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    """Centre and compress targets: ``values ~ mean + scores @ components``.

    Parameters
    ----------
    values
        Rows x genes.
    n_components
        Components kept; at least 1 and at most ``min(values.shape) - 1``.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The column means (genes) and the orthonormal components (components x genes); the scores
        of rows are ``(values - mean) @ components.T``.
    """
    mean = values.mean(axis=0)
    k = max(1, min(n_components, min(values.shape) - 1))
    _, _, vt = np.linalg.svd(values - mean, full_matrices=False)
    return mean, vt[:k]
