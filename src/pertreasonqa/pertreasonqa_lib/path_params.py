"""Hyperparameters of the reference-path pipeline (PertReasonQA, Kim et al. 2026, appendix B.2.6).

The module constants are the paper's values; :class:`PathParams` carries them (or a method's own
choices, e.g. another ``D_max``) through the gating (B.2.2), the PPR and hop-limited search
(B.2.3) and the sign filters (B.2.4).
"""

from __future__ import annotations

import dataclasses

# --- hyperparameters of appendix B.2.6 -------------------------------------------------------------
BETA = 10.0
DELTA_SRC = 0.05
DELTA_TGT = 0.5
EPS_W = 1e-9
W_BASE = 1.0
ALPHA = 0.85
PPR_MAX_ITER = 50
PPR_TOL = 1e-4
EPS_C = 1e-4
MAX_HOPS = 4
#: Gene-gene edges of a chemical's path after its drug-target edge (B.2.6: "reduced to 3 internally").
MAX_HOPS_CHEMICAL = MAX_HOPS - 1
N_PATHS = 4
PENALTY = 2.0
#: Ambiguity budget B_0 of Algorithm 1 (not given in the paper).
AMBIGUITY_BUDGET = 1


@dataclasses.dataclass(frozen=True)
class PathParams:
    """Hyperparameters of the reference-path pipeline (defaults: appendix B.2.6).

    Parameters
    ----------
    beta, delta_src, delta_tgt, eps_w, w_base
        Gating steepness, source floor, target floor, weight floor, structural base weight.
    alpha, ppr_max_iter, ppr_tol
        PPR damping, iteration cap and L1 tolerance.
    eps_c
        Cost constant of the Dijkstra search.
    max_hops
        Maximum number of edges of a path (``D_max``); a chemical's path has one drug-target edge
        and at most ``max_hops - 1`` gene-gene edges.
    n_paths, penalty
        Path budget ``K`` and penalty factor ``lambda`` of the diversification.
    ambiguity_budget
        ``B_0`` of Algorithm 1.
    """

    beta: float = BETA
    delta_src: float = DELTA_SRC
    delta_tgt: float = DELTA_TGT
    eps_w: float = EPS_W
    w_base: float = W_BASE
    alpha: float = ALPHA
    ppr_max_iter: int = PPR_MAX_ITER
    ppr_tol: float = PPR_TOL
    eps_c: float = EPS_C
    max_hops: int = MAX_HOPS
    n_paths: int = N_PATHS
    penalty: float = PENALTY
    ambiguity_budget: int = AMBIGUITY_BUDGET


#: The paper's hyperparameters: the default of every function of the pipeline (frozen, so shared safely).
DEFAULT_PARAMS = PathParams()
